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
 * actions back. An allocation policy (WASMSCHED_ALLOCATION) is tested with
 * ws_test_allocation:
 *
 *     ws_test_arun runs[] = {{"a1", "g", 1, 0, 1}, {"b1", "g", 2, 9, 1}};
 *     ws_test_alloc_snapshot s = {.free = 1, .runs = runs, .n_runs = 2};
 *     WS_EXPECT(ws_test_order_is(ws_test_allocation(&s), "b1 a1"));
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
static inline ws_test_decision ws_test_serial(uint32_t max_active, const ws_test_run *active, uint32_t na,
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
static inline int ws_test_is(ws_test_decision d, uint32_t i, uint32_t kind, const char *run) {
	return i < d.n && d.a[i].kind == kind && (run == NULL || strcmp(d.a[i].run, run) == 0);
}
#endif

#ifdef WASMSCHED_ALLOCATION
typedef struct { const char *key, *value; } ws_test_label;
/* A run waiting for slots: id, group, seq, priority, slots, its labels
 * (sorted by key, as the host sends them). */
typedef struct {
	const char *id, *group;
	uint64_t seq;
	int32_t priority;
	uint32_t slots;
	const ws_test_label *labels;
	uint32_t n_labels;
	int64_t launched_at;
	const ws_test_label *require; /* placement (ABI version 5): sorted by key */
	uint32_t n_require;
	const ws_test_label *prefer; /* preferences (ABI version 6): sorted by key */
	const uint32_t *prefer_weight;
	uint32_t n_prefer;
} ws_test_arun;
typedef struct {
	const char *worker;
	uint32_t slots, free;
	const ws_test_label *labels; /* placement (ABI version 5): sorted by key */
	uint32_t n_labels;
	const char *groups; /* comma-separated names or patterns; 0 or "": every group */
} ws_test_worker;
typedef struct { const char *key, *value; uint32_t slots, runs; } ws_test_usage;
/* An allocation snapshot (launched_total and oldest 0: all of the runs). */
typedef struct {
	int64_t now;
	uint32_t free, total, launched_total, oldest;
	const ws_test_arun *runs;
	uint32_t n_runs;
	const ws_test_worker *workers;
	uint32_t n_workers;
	const ws_test_usage *usage;
	uint32_t n_usage;
	const ws_test_label *params; /* sorted by name */
	uint32_t n_params;
} ws_test_alloc_snapshot;
/* The order decided: run indices and, space-separated, their ids (with
 * "@worker" for a run placed on a worker: ws_place). */
typedef struct { uint32_t n; uint32_t order[256]; uint32_t worker[256]; char ids[256 * 24]; } ws_test_order;

static inline uint32_t ws_test__str(uint8_t *b, uint8_t *field, uint32_t at, const char *v) {
	uint32_t l = v ? (uint32_t)strlen(v) : 0;
	ws__put32(field, at);
	ws__put32(field + 4, l);
	if (l) memcpy(b + at, v, l);
	return at + l;
}

/* ws_test_alloc_encode encodes s into ws_test_in as the host does and
 * returns its length. */
static inline uint32_t ws_test_alloc_encode(const ws_test_alloc_snapshot *s) {
	memset(ws_test_in, 0, sizeof ws_test_in);
	uint8_t *b = ws_test_in;
	uint32_t nl = 0;
	uint32_t nq = 0;
	for (uint32_t i = 0; i < s->n_runs; i++) nl += s->runs[i].n_labels + s->runs[i].n_require, nq += s->runs[i].n_prefer;
	for (uint32_t i = 0; i < s->n_workers; i++) nl += s->workers[i].n_labels;
	uint32_t wat = 48 + 48 * s->n_runs, uat = wat + 16 * s->n_workers, lat = uat + 24 * s->n_usage, pat = lat + 16 * nl;
	uint32_t fat = pat + 16 * s->n_params, qat = fat + 16 * s->n_workers, at = qat + 8 + 24 * nq, label = 0, q = 0;
	ws__put32(b + qat, nq);
	ws__put32(b, 6);
	ws__put32(b + 4, s->n_runs);
	ws__put64(b + 8, (uint64_t)s->now);
	ws__put32(b + 16, s->free);
	ws__put32(b + 20, s->total);
	ws__put32(b + 24, s->launched_total ? s->launched_total : s->n_runs);
	ws__put32(b + 28, s->oldest ? s->oldest : s->n_runs);
	ws__put32(b + 32, s->n_workers);
	ws__put32(b + 36, s->n_usage);
	ws__put32(b + 40, nl);
	ws__put32(b + 44, s->n_params);
	for (uint32_t i = 0; i < s->n_runs; i++) {
		const ws_test_arun *r = &s->runs[i];
		uint8_t *p = b + 48 + 48 * i;
		ws__put64(p, r->seq);
		ws__put64(p + 8, (uint64_t)r->launched_at);
		ws__put32(p + 16, (uint32_t)r->priority);
		ws__put32(p + 20, r->slots);
		at = ws_test__str(b, p + 24, at, r->id);
		at = ws_test__str(b, p + 32, at, r->group);
		ws__put32(p + 40, label);
		p[44] = (uint8_t)r->n_labels;
		p[45] = (uint8_t)(r->n_labels >> 8);
		p[46] = (uint8_t)r->n_require;
		p[47] = (uint8_t)(r->n_require >> 8);
		for (uint32_t j = 0; j < r->n_labels; j++, label++) {
			at = ws_test__str(b, b + lat + 16 * label, at, r->labels[j].key);
			at = ws_test__str(b, b + lat + 16 * label + 8, at, r->labels[j].value);
		}
		for (uint32_t j = 0; j < r->n_require; j++, label++) {
			at = ws_test__str(b, b + lat + 16 * label, at, r->require[j].key);
			at = ws_test__str(b, b + lat + 16 * label + 8, at, r->require[j].value);
		}
		for (uint32_t j = 0; j < r->n_prefer; j++, q++) {
			uint8_t *e = b + qat + 8 + 24 * q;
			ws__put32(e, i);
			ws__put32(e + 4, r->prefer_weight ? r->prefer_weight[j] : 1);
			at = ws_test__str(b, e + 8, at, r->prefer[j].key);
			at = ws_test__str(b, e + 16, at, r->prefer[j].value);
		}
	}
	for (uint32_t i = 0; i < s->n_workers; i++) {
		const ws_test_worker *w = &s->workers[i];
		at = ws_test__str(b, b + wat + 16 * i, at, w->worker);
		ws__put32(b + wat + 16 * i + 8, w->slots);
		ws__put32(b + wat + 16 * i + 12, w->free);
		ws__put32(b + fat + 16 * i, label);
		b[fat + 16 * i + 4] = (uint8_t)w->n_labels;
		b[fat + 16 * i + 5] = (uint8_t)(w->n_labels >> 8);
		for (uint32_t j = 0; j < w->n_labels; j++, label++) {
			at = ws_test__str(b, b + lat + 16 * label, at, w->labels[j].key);
			at = ws_test__str(b, b + lat + 16 * label + 8, at, w->labels[j].value);
		}
		at = ws_test__str(b, b + fat + 16 * i + 8, at, w->groups);
	}
	for (uint32_t i = 0; i < s->n_usage; i++) {
		at = ws_test__str(b, b + uat + 24 * i, at, s->usage[i].key);
		at = ws_test__str(b, b + uat + 24 * i + 8, at, s->usage[i].value);
		ws__put32(b + uat + 24 * i + 16, s->usage[i].slots);
		ws__put32(b + uat + 24 * i + 20, s->usage[i].runs);
	}
	for (uint32_t i = 0; i < s->n_params; i++) {
		at = ws_test__str(b, b + pat + 16 * i, at, s->params[i].key);
		at = ws_test__str(b, b + pat + 16 * i + 8, at, s->params[i].value);
	}
	return at;
}

/* ws_test_allocation encodes and decides an allocation snapshot (at most
 * 256 runs). */
static inline ws_test_order ws_test_allocation(const ws_test_alloc_snapshot *s) {
	ws_test_order o;
	memset(&o, 0, sizeof o);
	uint32_t n = ws_test_alloc_encode(s);
	if (!ws_allocation_out_size(ws_test_in, n)) { ws_test_failures++; fprintf(stderr, "ws_test_allocation: bad snapshot\n"); return o; }
	uint32_t m = ws_decide_allocation_buf(ws_test_in, n, ws_test_out);
	const uint8_t *out = ws_test_out;
	uint32_t np = ws__u32(out + 8);
	if (ws__u32(out) != 7 || (np != 0 && np != ws__u32(out + 4)) || m != 16 + 4 * (ws__u32(out + 4) + np)) {
		ws_test_failures++;
		fprintf(stderr, "ws_test_allocation: not an allocation decision\n");
		return o;
	}
	o.n = ws__u32(out + 4);
	size_t at = 0;
	for (uint32_t i = 0; i < o.n && i < 256; i++) {
		o.order[i] = ws__u32(out + 16 + 4 * i);
		o.worker[i] = np ? ws__u32(out + 16 + 4 * o.n + 4 * i) : WS_HOST_CHOOSES;
		if (o.order[i] >= s->n_runs) { ws_test_failures++; fprintf(stderr, "order %u: run index %u of %u runs\n", i, o.order[i], s->n_runs); continue; }
		at += (size_t)snprintf(o.ids + at, sizeof o.ids - at, "%s%s", i ? " " : "", s->runs[o.order[i]].id);
		if (at >= sizeof o.ids) at = sizeof o.ids - 1;
		if (o.worker[i] != WS_HOST_CHOOSES && o.worker[i] < s->n_workers) {
			at += (size_t)snprintf(o.ids + at, sizeof o.ids - at, "@%s", s->workers[o.worker[i]].worker);
			if (at >= sizeof o.ids) at = sizeof o.ids - 1;
		}
	}
	return o;
}

/* ws_test_order_is: the order's ids are want (space-separated). */
static inline int ws_test_order_is(ws_test_order o, const char *want) {
	if (strcmp(o.ids, want) == 0) return 1;
	fprintf(stderr, "order \"%s\", want \"%s\"\n", o.ids, want);
	return 0;
}
#endif

#endif /* WASMSCHED_TEST_H */
