/* Native tests of the C SDK's serial readers of ABI version 4: a run's
 * labels, the group's parameters and recent launches, on a snapshot
 * encoded by hand (abi/ABI.md "Serial snapshot"). */
#define WASMSCHED_SERIAL
#include "wasmsched.h"
#include "wasmsched_test.h"

void ws_decide_serial(const ws_snapshot *s, ws_decision *d) { (void)s; (void)d; }

static uint32_t str(uint8_t *b, uint8_t *field, uint32_t at, const char *v) {
	uint32_t l = (uint32_t)strlen(v);
	ws__put32(field, at);
	ws__put32(field + 4, l);
	memcpy(b + at, v, l);
	return at + l;
}

static int is(ws_str v, const char *want) { return v.n == strlen(want) && memcmp(v.p, want, v.n) == 0; }

int main(void) {
	/* one waiting run with labels region=eu, tenant=b; parameters limit=42
	 * and period=5s; one launch, labelled tenant=b (the label table's
	 * entry 1) */
	uint8_t *b = ws_test_in;
	memset(b, 0, 4096);
	uint32_t labels = 64 + 64, params = labels + 16 * 2, launches = params + 16 * 2, at = launches + 16;
	ws__put32(b, 5);
	ws__put32(b + 4, 1);
	ws__put32(b + 36, 1);
	ws__put32(b + 48, 2);
	ws__put32(b + 52, 2);
	ws__put32(b + 56, 1);
	at = str(b, b + 16, at, "nightly");
	at = str(b, b + 24, at, "mine");
	uint8_t *r = b + 64;
	ws__put64(r, 7);
	at = str(b, r + 32, at, "w1");
	r[40] = WS_WAITING;
	r[42] = 2;
	ws__put32(r + 44, 0);
	at = str(b, b + labels, at, "region");
	at = str(b, b + labels + 8, at, "eu");
	at = str(b, b + labels + 16, at, "tenant");
	at = str(b, b + labels + 24, at, "b");
	at = str(b, b + params, at, "limit");
	at = str(b, b + params + 8, at, "42");
	at = str(b, b + params + 16, at, "period");
	at = str(b, b + params + 24, at, "5s");
	ws__put64(b + launches, 1234);
	ws__put32(b + launches + 8, 1);
	ws__put32(b + launches + 12, 1);
	WS_EXPECT(ws_serial_out_size(b, at) != 0);
	ws_snapshot s = {b, at, 0, 1, 2, 2, 1, b + labels, b + params, b + launches};
	ws_run w = ws_snap_waiting(&s, 0);
	ws_str v;
	WS_EXPECT(ws_run_n_labels(w) == 2);
	WS_EXPECT(ws_run_label_value(&s, w, "tenant", &v) && is(v, "b"));
	WS_EXPECT(ws_run_label_value(&s, w, "region", &v) && is(v, "eu"));
	WS_EXPECT(!ws_run_label_value(&s, w, "zone", &v) && v.n == 0);
	WS_EXPECT(is(ws_run_label(&s, w, 1).key, "tenant") && ws_run_label(&s, w, 2).key.n == 0);
	WS_EXPECT(ws_snap_param(&s, "period", &v) && is(v, "5s"));
	WS_EXPECT(!ws_snap_param(&s, "tenant", &v)); /* a label is not a parameter */
	WS_EXPECT(ws_snap_param_u64(&s, "limit", 1) == 42 && ws_snap_param_u64(&s, "period", 1) == 1 && ws_snap_param_u64(&s, "none", 9) == 9);
	WS_EXPECT(ws_snap_n_launches(&s) == 1 && ws_snap_launch_at(&s, 0) == 1234 && ws_snap_launch_n_labels(&s, 0) == 1);
	WS_EXPECT(is(ws_snap_launch_label(&s, 0, 0).value, "b") && ws_snap_launch_label(&s, 0, 1).key.n == 0);
	/* a label reference outside the record reads as empty */
	ws__put32(b + labels + 24, at); /* tenant's value: one byte past the end */
	WS_EXPECT(ws_run_label_value(&s, w, "tenant", &v) && v.n == 0);
	/* the run's label range past the table: only the entries inside it */
	r[42] = 5;
	WS_EXPECT(!ws_run_label_value(&s, w, "limit", &v)); /* entries 2..4 are not labels */
	return ws_test_failures;
}
