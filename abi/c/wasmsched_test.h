/*
 * wasmsched_test.h: a native test harness for C policies. Include it after
 * the policy source in a native test program (clang -o t t.c; ./t):
 *
 *     #include "wait.c"
 *     #include "wasmsched_test.h"
 *     int main(void) {
 *         ws_test_run active[] = {{"r1", 1, WS_RUNNING}};
 *         ws_test_run waiting[] = {{"r2", 2, WS_WAITING}, {"r3", 3, WS_WAITING}};
 *         ws_test_decision d = ws_test_serial(2, active, 1, waiting, 2, 0);
 *         WS_EXPECT(d.n == 1 && ws_test_is(d, 0, WS_LAUNCH, "r2"));
 *         return ws_test_failures;
 *     }
 *
 * It encodes a snapshot exactly as the host does (abi/ABI.md), decides it
 * with ws_decide_serial_buf (the code the export runs) and reads the
 * actions back.
 */
#ifndef WASMSCHED_TEST_H
#define WASMSCHED_TEST_H

#include <stdio.h>
#include <string.h>

typedef struct { const char *id; uint64_t seq; uint8_t state; } ws_test_run;

typedef struct {
	uint32_t n;
	struct { uint32_t kind; char run[128]; uint64_t seq; char reason[WS_MAX_REASON + 1]; } a[64];
} ws_test_decision;

static int ws_test_failures;

#define WS_EXPECT(cond) do { if (!(cond)) { ws_test_failures++; fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static uint8_t ws_test_in[1 << 16], ws_test_out[1 << 20];

#ifdef WASMSCHED_SERIAL
/* ws_test_serial encodes and decides a snapshot (at most 64 runs). */
static ws_test_decision ws_test_serial(uint32_t max_active, const ws_test_run *active, uint32_t na,
                                       const ws_test_run *waiting, uint32_t nw, uint32_t waiting_total) {
	memset(ws_test_in, 0, sizeof ws_test_in);
	uint8_t *b = ws_test_in;
	uint32_t s = 64 + 64 * (na + nw); /* version 4: no labels, parameters or launches */
	ws__put32(b, 5);
	ws__put32(b + 4, max_active);
	ws__put32(b + 32, na);
	ws__put32(b + 36, nw);
	ws__put32(b + 40, waiting_total);
	for (uint32_t i = 0; i < na + nw; i++) {
		const ws_test_run *r = i < na ? &active[i] : &waiting[i - na];
		uint8_t *p = b + 64 + 64 * i;
		uint32_t l = (uint32_t)strlen(r->id);
		ws__put64(p, r->seq);
		ws__put32(p + 28, 1);
		ws__put32(p + 32, s);
		ws__put32(p + 36, l);
		p[40] = r->state;
		memcpy(b + s, r->id, l);
		s += l;
	}
	ws_test_decision d = {0};
	if (!ws_serial_out_size(b, s)) { ws_test_failures++; fprintf(stderr, "ws_test_serial: bad snapshot\n"); return d; }
	uint32_t m = ws_decide_serial_buf(b, s, ws_test_out);
	const uint8_t *o = ws_test_out;
	d.n = ws__u32(o + 4);
	if (ws__u32(o + 8) != 1) { ws_test_failures++; fprintf(stderr, "ws_test_serial: flags %u, want 1 (runs named by index)\n", ws__u32(o + 8)); }
	for (uint32_t i = 0; i < d.n && i < 64; i++) {
		const uint8_t *a = o + 16 + 20 * i;
		d.a[i].kind = ws__u32(a);
		if (d.a[i].kind == WS_DISCARD_BELOW || d.a[i].kind == WS_WAKE) {
			d.a[i].seq = ws__u64(a + 4);
		} else {
			/* the run's index in the snapshot: active runs first, then waiting */
			uint32_t j = ws__u32(a + 4);
			if (j >= na + nw) { ws_test_failures++; fprintf(stderr, "action %u: run index %u of %u runs\n", i, j, na + nw); continue; }
			snprintf(d.a[i].run, sizeof d.a[i].run, "%s", j < na ? active[j].id : waiting[j - na].id);
		}
		snprintf(d.a[i].reason, sizeof d.a[i].reason, "%.*s", (int)ws__u32(a + 16), (const char *)o + ws__u32(a + 12));
		if (ws__u32(a + 12) + ws__u32(a + 16) > m) { ws_test_failures++; fprintf(stderr, "action %u: reason outside the record\n", i); }
	}
	return d;
}

/* ws_test_is: action i has kind and run (or, for WS_DISCARD_BELOW, seq as run == NULL). */
static int ws_test_is(ws_test_decision d, uint32_t i, uint32_t kind, const char *run) {
	return i < d.n && d.a[i].kind == kind && (run == NULL || strcmp(d.a[i].run, run) == 0);
}
#endif

#endif /* WASMSCHED_TEST_H */
