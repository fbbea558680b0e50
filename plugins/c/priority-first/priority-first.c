/* priority-first: slots go to the highest run priority first, the oldest
 * (lowest seq) among equals (the Go built-in plugins/priority-first, in C;
 * an allocation policy). */
#define WASMSCHED_ALLOCATION
#include "wasmsched.h"

/* a comes before b: higher priority, then lower seq (seqs are unique, so
 * the order is total and the unstable sort gives the Go built-in's) */
static int before(const ws_alloc_snapshot *s, ws_alloc_run a, ws_alloc_run b) {
	(void)s;
	int32_t pa = ws_arun_priority(a), pb = ws_arun_priority(b);
	if (pa != pb) return pa > pb;
	return ws_arun_seq(a) < ws_arun_seq(b);
}

void ws_decide_allocation(const ws_alloc_snapshot *s, ws_alloc_decision *d) {
	for (uint32_t i = 0; i < ws_alloc_n_runs(s); i++) ws_order(d, i);
	ws_order_sort(d, s, before);
}
