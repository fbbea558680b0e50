/* Native tests of the C priority-first allocation policy. */
#include "../priority-first/priority-first.c"
#include "wasmsched_test.h"

int main(void) {
	/* the built-ins' table (plugins/alloc_test.go): highest priority
	 * first, the oldest among equals */
	ws_test_label ta[] = {{"tenant", "a"}}, tb[] = {{"tenant", "b"}};
	ws_test_arun runs[] = {
		{"a1", "ga", 1, 0, 1, ta, 1, 0}, {"a2", "ga", 2, 5, 1, ta, 1, 0}, {"a3", "ga", 3, 0, 2, ta, 1, 0},
		{"b1", "gb", 4, 0, 1, tb, 1, 0}, {"b2", "gb", 5, 9, 1, tb, 1, 0}, {"n1", "gn", 6, 0, 1, NULL, 0, 0},
	};
	ws_test_alloc_snapshot s = {.now = 1, .free = 2, .total = 6, .runs = runs, .n_runs = 6};
	WS_EXPECT(ws_test_order_is(ws_test_allocation(&s), "b2 a2 a1 a3 b1 n1"));
	/* negative priorities sort below 0; equal ones by seq, whatever the
	 * snapshot's order (the newest part of a window follows the oldest) */
	ws_test_arun mixed[] = {
		{"x", "g", 30, -3, 1, NULL, 0, 0}, {"y", "g", 10, 0, 1, NULL, 0, 0}, {"z", "g", 20, 0, 1, NULL, 0, 0},
		{"w", "g", 5, -3, 1, NULL, 0, 0}, {"v", "g", 40, 2147483647, 1, NULL, 0, 0},
	};
	ws_test_alloc_snapshot m = {.free = 1, .runs = mixed, .n_runs = 5};
	WS_EXPECT(ws_test_order_is(ws_test_allocation(&m), "v y z w x"));
	/* nothing waiting: an empty order */
	ws_test_alloc_snapshot none = {.free = 4};
	ws_test_order o = ws_test_allocation(&none);
	WS_EXPECT(o.n == 0);
	/* a window of 200 runs (the newest part first here), many equal
	 * priorities: the heap sort gives what a reference sort does */
	static ws_test_arun many[200];
	static char ids[200][8];
	static uint32_t ref[200];
	for (uint32_t i = 0; i < 200; i++) {
		snprintf(ids[i], sizeof ids[i], "m%u", i);
		many[i] = (ws_test_arun){ids[i], "g", (uint64_t)((i * 7919) % 1009), (int32_t)((i * 37) % 11) - 5, 1, NULL, 0, 0};
		ref[i] = i;
	}
	for (uint32_t i = 1; i < 200; i++) /* insertion sort: priority desc, seq asc */
		for (uint32_t j = i; j > 0; j--) {
			ws_test_arun *a = &many[ref[j - 1]], *b = &many[ref[j]];
			if (a->priority > b->priority || (a->priority == b->priority && a->seq < b->seq)) break;
			uint32_t t = ref[j]; ref[j] = ref[j - 1]; ref[j - 1] = t;
		}
	ws_test_alloc_snapshot big = {.free = 10, .runs = many, .n_runs = 200};
	o = ws_test_allocation(&big);
	WS_EXPECT(o.n == 200);
	int same = 1;
	for (uint32_t i = 0; i < 200; i++) same &= o.order[i] == ref[i];
	WS_EXPECT(same);
	return ws_test_failures;
}
