/* priority: "newest wins": keep the max_active newest runs (waiting or
 * active, not stopping), launch the waiting ones among them, discard the
 * older waiting runs and stop the older active ones (the Go built-in
 * plugins/priority, in C). */
#define WASMSCHED_SERIAL
#include "wasmsched.h"

static const char reason_newest[] = "newest run wins";
static const char reason_superseded[] = "superseded by a newer run";

static void stop_older(const ws_snapshot *s, ws_decision *d, uint64_t cutoff) {
	for (uint32_t i = 0; i < ws_snap_n_active(s); i++) {
		ws_run r = ws_snap_active(s, i);
		if (ws_run_state(r) != WS_STOPPING && ws_run_seq(r) < cutoff)
			ws_stop(d, r, reason_superseded);
	}
}

void ws_decide_serial(const ws_snapshot *s, ws_decision *d) {
	uint32_t keep = ws_snap_max_active(s);
	int64_t ia = (int64_t)ws_snap_n_active(s) - 1, iw = (int64_t)ws_snap_n_waiting(s) - 1;
	uint64_t cutoff = 0;
	/* walk both seq-sorted lists from the newest end to the keep-th newest candidate */
	for (uint32_t kept = 0; kept < keep; kept++) {
		while (ia >= 0 && ws_run_state(ws_snap_active(s, (uint32_t)ia)) == WS_STOPPING) ia--;
		if (iw >= 0 && (ia < 0 || ws_run_seq(ws_snap_waiting(s, (uint32_t)iw)) > ws_run_seq(ws_snap_active(s, (uint32_t)ia)))) {
			cutoff = ws_run_seq(ws_snap_waiting(s, (uint32_t)iw));
			iw--;
		} else if (ia >= 0) {
			cutoff = ws_run_seq(ws_snap_active(s, (uint32_t)ia));
			ia--;
		} else {
			cutoff = 0; /* fewer candidates than max_active: all survive */
			break;
		}
	}
	uint32_t nw = ws_snap_n_waiting(s);
	if (ws_snap_truncated(s)) {
		for (uint32_t i = 0; i < nw; i++) {
			ws_run r = ws_snap_waiting(s, i);
			if (ws_run_seq(r) >= cutoff) ws_launch(d, r, reason_newest);
		}
		if (cutoff > 0) ws_discard_below(d, cutoff, reason_superseded);
		stop_older(s, d, cutoff);
		return;
	}
	for (uint32_t i = 0; i < nw; i++) {
		ws_run r = ws_snap_waiting(s, i);
		if (ws_run_seq(r) >= cutoff)
			ws_launch(d, r, reason_newest);
		else
			ws_discard(d, r, reason_superseded);
	}
	stop_older(s, d, cutoff);
}
