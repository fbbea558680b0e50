/* Native tests of the C SDK's allocation readers and writer: a policy that
 * records what it reads, and orders the runs as the test asks. */
#define WASMSCHED_ALLOCATION
#include "wasmsched.h"
#include "wasmsched_test.h"

static struct {
	int64_t now;
	uint32_t free, total, launched_total, oldest, n_runs, n_workers, n_usage;
	uint64_t seq1;
	int64_t launched1;
	int32_t prio1;
	uint32_t slots0, slots1, n_labels1;
	char id1[32], group1[32], label1[64], tenant1[32], worker0[32], usage1[64], weights[32];
	int has_region0;
	uint32_t used_a, used_ga, used_none, workers_free;
	uint64_t limit, bad_limit;
	const uint32_t *ask; /* the order to write */
	uint32_t n_ask;
	const uint32_t *on; /* placement: the worker of each run of ask (0: ws_order) */
	/* placement (ABI version 5) */
	uint32_t n_require1, n_wlabels1;
	char require1[64], zone1[32], groups1[64];
	char takes[16]; /* takes[w * 3 + r]: '1' when worker w may take run r */
	/* preferences (ABI version 6) */
	uint32_t n_prefer, score[9]; /* score[w * 3 + r] */
	char prefer0[64];
} seen;

static void copy(char *dst, size_t n, ws_str v) { snprintf(dst, n, "%.*s", (int)v.n, v.p); }

void ws_decide_allocation(const ws_alloc_snapshot *s, ws_alloc_decision *d) {
	seen.now = ws_alloc_now(s);
	seen.free = ws_alloc_free(s);
	seen.total = ws_alloc_total(s);
	seen.launched_total = ws_alloc_launched_total(s);
	seen.oldest = ws_alloc_oldest(s);
	seen.n_runs = ws_alloc_n_runs(s);
	if (seen.n_runs >= 2) {
		ws_alloc_run r0 = ws_alloc_run_at(s, 0), r = ws_alloc_run_at(s, 1);
		seen.slots0 = ws_arun_slots(r0);
		seen.seq1 = ws_arun_seq(r);
		seen.launched1 = ws_arun_launched_at(r);
		seen.prio1 = ws_arun_priority(r);
		seen.slots1 = ws_arun_slots(r);
		seen.n_labels1 = ws_arun_n_labels(r);
		copy(seen.id1, sizeof seen.id1, ws_arun_id(s, r));
		copy(seen.group1, sizeof seen.group1, ws_arun_group(s, r));
		ws_label l = ws_arun_label(s, r, 1);
		snprintf(seen.label1, sizeof seen.label1, "%.*s=%.*s", (int)l.key.n, l.key.p, (int)l.value.n, l.value.p);
		ws_str v;
		if (ws_arun_label_value(s, r, "tenant", &v)) copy(seen.tenant1, sizeof seen.tenant1, v);
		seen.has_region0 = ws_arun_label_value(s, r0, "region", &v);
		ws_str a = {"a", 1}, ga = {"ga", 2}, none = {"zz", 2};
		seen.used_a = ws_alloc_used(s, "tenant", a);
		seen.used_ga = ws_alloc_used(s, "", ga);
		seen.used_none = ws_alloc_used(s, "tenant", none);
	}
	seen.n_workers = ws_alloc_n_workers(s);
	copy(seen.worker0, sizeof seen.worker0, ws_alloc_worker_at(s, 0).worker);
	seen.workers_free = 0;
	for (uint32_t i = 0; i < ws_alloc_n_workers(s); i++) seen.workers_free += ws_alloc_worker_at(s, i).free;
	seen.n_usage = ws_alloc_n_usage(s);
	ws_alloc_usage u = ws_alloc_usage_at(s, 1);
	snprintf(seen.usage1, sizeof seen.usage1, "%.*s/%.*s=%u/%u", (int)u.key.n, u.key.p, (int)u.value.n, u.value.p, u.slots, u.runs);
	ws_str w;
	seen.weights[0] = 0;
	if (ws_alloc_param(s, "weights", &w)) copy(seen.weights, sizeof seen.weights, w);
	seen.limit = ws_alloc_param_u64(s, "limit", 7);
	seen.bad_limit = ws_alloc_param_u64(s, "weights", 7);
	if (seen.n_runs >= 2 && ws_alloc_n_workers(s) >= 2) {
		ws_alloc_run r = ws_alloc_run_at(s, 1);
		seen.n_require1 = ws_arun_n_require(r);
		ws_label q = ws_arun_require(s, r, 0);
		snprintf(seen.require1, sizeof seen.require1, "%.*s=%.*s", (int)q.key.n, q.key.p, (int)q.value.n, q.value.p);
		seen.n_wlabels1 = ws_alloc_worker_n_labels(s, 1);
		ws_str z;
		seen.zone1[0] = 0;
		if (ws_alloc_worker_label_value(s, 1, "zone", &z)) copy(seen.zone1, sizeof seen.zone1, z);
		copy(seen.groups1, sizeof seen.groups1, ws_alloc_worker_groups(s, 1));
		for (uint32_t w = 0; w < 3 && w < ws_alloc_n_workers(s); w++)
			for (uint32_t i = 0; i < 3 && i < seen.n_runs; i++)
				seen.takes[w * 3 + i] = ws_alloc_worker_takes(s, w, ws_alloc_run_at(s, i)) ? '1' : '0';
		seen.n_prefer = ws_alloc_n_prefer(s);
		ws_alloc_pref q0 = ws_alloc_prefer_at(s, 0);
		snprintf(seen.prefer0, sizeof seen.prefer0, "%u:%.*s=%.*s:%u", q0.run, (int)q0.key.n, q0.key.p, (int)q0.value.n, q0.value.p, q0.weight);
		for (uint32_t w = 0; w < 3 && w < ws_alloc_n_workers(s); w++)
			for (uint32_t i = 0; i < 3 && i < seen.n_runs; i++) seen.score[w * 3 + i] = ws_alloc_score(s, ws_alloc_run_at(s, i), w);
	}
	for (uint32_t i = 0; i < seen.n_ask; i++) {
		if (seen.on && seen.on[i]) ws_place(d, seen.ask[i], seen.on[i] - 1);
		else ws_order(d, seen.ask[i]);
	}
}

int main(void) {
	ws_test_label l1[] = {{"region", "eu"}, {"tenant", "b"}};
	ws_test_arun runs[] = {
		{"r0", "ga", 11, 0, 0, NULL, 0, 1000},
		{"r1", "gb", 12, -4, 3, l1, 2, 1234},
		{"r2", "gb", 13, 0, 1, NULL, 0, 0},
	};
	ws_test_worker workers[] = {{"w-1", 4, 1}, {"w-2", 8, 2}};
	ws_test_usage usage[] = {{"", "ga", 5, 2}, {"tenant", "a", 3, 1}};
	ws_test_label params[] = {{"fair_label", "tenant"}, {"limit", "42"}, {"weights", "a=2,b=1"}};
	ws_test_alloc_snapshot s = {.now = 99, .free = 3, .total = 12, .launched_total = 9, .oldest = 2,
	                            .runs = runs, .n_runs = 3, .workers = workers, .n_workers = 2,
	                            .usage = usage, .n_usage = 2, .params = params, .n_params = 3};
	uint32_t ask[] = {2, 0, 1};
	seen.ask = ask;
	seen.n_ask = 3;
	WS_EXPECT(ws_test_order_is(ws_test_allocation(&s), "r2 r0 r1"));
	WS_EXPECT(seen.now == 99 && seen.free == 3 && seen.total == 12);
	WS_EXPECT(seen.launched_total == 9 && seen.oldest == 2 && seen.n_runs == 3);
	WS_EXPECT(seen.slots0 == 1); /* 0 reads as 1 */
	WS_EXPECT(seen.seq1 == 12 && seen.launched1 == 1234 && seen.prio1 == -4 && seen.slots1 == 3);
	WS_EXPECT(strcmp(seen.id1, "r1") == 0 && strcmp(seen.group1, "gb") == 0);
	WS_EXPECT(seen.n_labels1 == 2 && strcmp(seen.label1, "tenant=b") == 0 && strcmp(seen.tenant1, "b") == 0);
	WS_EXPECT(!seen.has_region0);
	WS_EXPECT(seen.used_a == 3 && seen.used_ga == 5 && seen.used_none == 0);
	WS_EXPECT(seen.n_workers == 2 && strcmp(seen.worker0, "w-1") == 0 && seen.workers_free == 3);
	WS_EXPECT(seen.n_usage == 2 && strcmp(seen.usage1, "tenant/a=3/1") == 0);
	WS_EXPECT(strcmp(seen.weights, "a=2,b=1") == 0 && seen.limit == 42 && seen.bad_limit == 7);

	/* launched_total below n_runs reads as n_runs, oldest above it as n_runs */
	s.launched_total = 1;
	s.oldest = 50;
	ws_test_allocation(&s);
	WS_EXPECT(seen.launched_total == 3 && seen.oldest == 3);

	/* an index past the runs is dropped; the order stops at n_runs entries */
	uint32_t wild[] = {7, 1, 3, 0, 2, 1};
	seen.ask = wild;
	seen.n_ask = 6;
	ws_test_order o = ws_test_allocation(&s);
	WS_EXPECT(o.n == 3 && ws_test_order_is(o, "r1 r0 r2"));

	/* malformed input: refused before the policy runs */
	uint32_t n = ws_test_alloc_encode(&s);
	WS_EXPECT(ws_allocation_out_size(ws_test_in, n) == 16 + 8 * 3); /* the order, and room for its workers */
	WS_EXPECT(ws_allocation_out_size(ws_test_in, 40) == 0);     /* short */
	WS_EXPECT(ws_allocation_out_size(ws_test_in, 48 + 48) == 0); /* 3 runs do not fit */
	ws__put32(ws_test_in, 5);
	WS_EXPECT(ws_allocation_out_size(ws_test_in, n) == 0); /* a serial snapshot's tag */
	ws__put32(ws_test_in, 6);
	/* a string outside the record reads as empty */
	ws__put32(ws_test_in + 48 + 48 + 24, n - 1); /* r1's id: two bytes from n - 1 */
	seen.ask = ask;
	seen.n_ask = 0;
	ws_decide_allocation_buf(ws_test_in, n, ws_test_out);
	WS_EXPECT(strcmp(seen.id1, "") == 0 && strcmp(seen.group1, "gb") == 0);

	/* placement (ABI version 5): requirements, worker profiles, takes, and
	 * a decision that names workers */
	ws_test_label gpu[] = {{"gpu", "yes"}}, zb[] = {{"gpu", "yes"}, {"zone", "b"}}, za[] = {{"zone", "a"}};
	/* preferences (ABI version 6): p0 prefers zone a (5) and gpu (2), p2
	 * zone b (1) */
	ws_test_label p0pref[] = {{"gpu", "yes"}, {"zone", "a"}}, p2pref[] = {{"zone", "b"}};
	uint32_t p0w[] = {2, 5};
	ws_test_arun pruns[] = {
		{"p0", "etl-daily", 1, 0, 1, NULL, 0, 0, NULL, 0, p0pref, p0w, 2},
		{"p1", "train", 2, 0, 2, l1, 2, 0, gpu, 1},
		{"p2", "report", 3, 0, 1, NULL, 0, 0, NULL, 0, p2pref, NULL, 1},
	};
	ws_test_worker pworkers[] = {
		{"a1", 4, 4, za, 1, NULL},
		{"b1", 4, 4, zb, 2, "train,etl-*"},
		{"c1", 2, 2, NULL, 0, "*-daily"},
	};
	ws_test_alloc_snapshot ps = {.free = 10, .total = 10, .runs = pruns, .n_runs = 3, .workers = pworkers, .n_workers = 3};
	uint32_t pask[] = {1, 0, 2}, pon[] = {2, 3, 0};
	seen.ask = pask;
	seen.n_ask = 3;
	seen.on = pon;
	o = ws_test_allocation(&ps);
	WS_EXPECT(ws_test_order_is(o, "p1@b1 p0@c1 p2"));
	WS_EXPECT(seen.n_require1 == 1 && strcmp(seen.require1, "gpu=yes") == 0);
	WS_EXPECT(seen.n_wlabels1 == 2 && strcmp(seen.zone1, "b") == 0 && strcmp(seen.groups1, "train,etl-*") == 0);
	/* a1: p0, p2 (no gpu for p1); b1: p0 (etl-*), p1; c1: p0 (*-daily) */
	WS_EXPECT(strcmp(seen.takes, "101110100") == 0 || (fprintf(stderr, "takes %s\n", seen.takes), 0));
	WS_EXPECT(seen.n_prefer == 3 && (strcmp(seen.prefer0, "0:gpu=yes:2") == 0 || (fprintf(stderr, "prefer0 %s\n", seen.prefer0), 0)));
	/* a1 (zone a): p0 5; b1 (gpu, zone b): p0 2, p2 1; c1: none */
	uint32_t want[9] = {5, 0, 0, 2, 0, 1, 0, 0, 0};
	for (int k = 0; k < 9; k++) WS_EXPECT(seen.score[k] == want[k] || (fprintf(stderr, "score[%d] %u\n", k, seen.score[k]), 0));
	/* no worker named: the decision has no workers (a version 4 host's form) */
	seen.on = NULL;
	uint32_t m = ws_decide_allocation_buf(ws_test_in, ws_test_alloc_encode(&ps), ws_test_out);
	WS_EXPECT(m == 16 + 4 * 3 && ws__u32(ws_test_out + 8) == 0);

	return ws_test_failures;
}
