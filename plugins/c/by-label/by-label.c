/* by-label: slots go in the order of a label's value (the parameter
 * "label", e.g. namespace set --param label=tier: "a" before "b"; runs
 * without it last), the oldest first among equals; a group that holds
 * "cap" slots or more already (the parameter, default unbounded) waits. An
 * example of an allocation policy that reads labels, parameters and the
 * slots in use (the C and Rust SDKs give the same order: TestByLabelGuests). */
#define WASMSCHED_ALLOCATION
#include "wasmsched.h"

/* the label the order follows: the parameter, read once a decision (the
 * comparison has no context argument) */
static ws_str order_key;

static ws_str label_of(const ws_alloc_snapshot *s, ws_alloc_run r, int *has) {
	ws_str v = {0, 0};
	*has = 0;
	if (order_key.n > 0) {
		/* (the key is a view, not a C string: ws_str_same, not ws_arun_label_value) */
		for (uint32_t i = 0; i < ws_arun_n_labels(r); i++) {
			ws_label l = ws_arun_label(s, r, i);
			if (ws_str_same(l.key, order_key)) { *has = 1; return l.value; }
		}
	}
	return v;
}

/* a comes before b: a has the label and b not, or its value sorts first
 * (bytewise), or the values are equal and a is older */
static int before(const ws_alloc_snapshot *s, ws_alloc_run a, ws_alloc_run b) {
	int ha, hb;
	ws_str va = label_of(s, a, &ha), vb = label_of(s, b, &hb);
	if (ha != hb) return ha;
	for (uint32_t i = 0; i < va.n && i < vb.n; i++)
		if (va.p[i] != vb.p[i]) return (unsigned char)va.p[i] < (unsigned char)vb.p[i];
	if (va.n != vb.n) return va.n < vb.n;
	return ws_arun_seq(a) < ws_arun_seq(b);
}

void ws_decide_allocation(const ws_alloc_snapshot *s, ws_alloc_decision *d) {
	uint64_t cap = ws_alloc_param_u64(s, "cap", (uint64_t)-1);
	if (!ws_alloc_param(s, "label", &order_key)) order_key.n = 0;
	for (uint32_t i = 0; i < ws_alloc_n_runs(s); i++)
		if (ws_alloc_used(s, "", ws_arun_group(s, ws_alloc_run_at(s, i))) < cap) ws_order(d, i);
	ws_order_sort(d, s, before);
}
