/* zone-spread: examples/zone-spread in C (ABI version 5, placement). Runs
 * get slots in launch order; each goes to the zone (the value of the worker
 * label named by the parameter "zone_label", default "zone") with the
 * fewest slots in use, counting the runs this decision placed, ties to the
 * zone that sorts first, and in it to the worker with the most free slots,
 * among the workers that may take it (ws_alloc_worker_takes) with its slots
 * free. A run no worker can take now is left to the host. The Go, C and
 * Rust versions decide alike (TestZoneSpreadGuests). Freestanding: at most
 * MAX_WORKERS workers are considered (the rest are left to the host). */
#define WASMSCHED_ALLOCATION
#include "wasmsched.h"

#define MAX_WORKERS 4096

static uint32_t free_[MAX_WORKERS], zone_of[MAX_WORKERS], used[MAX_WORKERS];
static ws_str names[MAX_WORKERS];

static int str_less(ws_str a, ws_str b) {
	for (uint32_t i = 0; i < a.n && i < b.n; i++)
		if (a.p[i] != b.p[i]) return (unsigned char)a.p[i] < (unsigned char)b.p[i];
	return a.n < b.n;
}

/* worker a is a better place than worker b */
static int better(uint32_t a, uint32_t b) {
	uint32_t za = zone_of[a], zb = zone_of[b];
	if (za != zb) {
		if (used[za] != used[zb]) return used[za] < used[zb];
		return str_less(names[za], names[zb]);
	}
	return free_[a] > free_[b];
}

void ws_decide_allocation(const ws_alloc_snapshot *s, ws_alloc_decision *d) {
	char key[128] = "zone";
	ws_str p;
	if (ws_alloc_param(s, "zone_label", &p) && p.n > 0 && p.n < sizeof key) {
		for (uint32_t i = 0; i < p.n; i++) key[i] = p.p[i];
		key[p.n] = 0;
	}
	uint32_t nw = ws_alloc_n_workers(s), nz = 0;
	if (nw > MAX_WORKERS) nw = MAX_WORKERS;
	for (uint32_t w = 0; w < nw; w++) {
		ws_alloc_worker wk = ws_alloc_worker_at(s, w);
		ws_str zone = {(const char *)"", 0};
		ws_alloc_worker_label_value(s, w, key, &zone);
		uint32_t z = 0;
		while (z < nz && !ws_str_same(names[z], zone)) z++;
		if (z == nz) {
			names[nz] = zone;
			used[nz++] = 0;
		}
		free_[w] = wk.free;
		zone_of[w] = z;
		used[z] += wk.slots - wk.free;
	}
	for (uint32_t i = 0; i < ws_alloc_n_runs(s); i++) {
		ws_alloc_run r = ws_alloc_run_at(s, i);
		uint32_t k = ws_arun_slots(r), best = WS_HOST_CHOOSES;
		for (uint32_t w = 0; w < nw; w++) {
			if (free_[w] < k || (best != WS_HOST_CHOOSES && !better(w, best)) || !ws_alloc_worker_takes(s, w, r)) continue;
			best = w;
		}
		if (best != WS_HOST_CHOOSES) {
			free_[best] -= k;
			used[zone_of[best]] += k;
		}
		ws_place(d, i, best);
	}
}
