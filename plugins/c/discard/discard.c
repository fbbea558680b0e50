/* discard: launch the oldest waiting run(s) below max_active, discard every
 * other waiting run (the Go built-in plugins/discard, in C). */
#define WASMSCHED_SERIAL
#include "wasmsched.h"

static const char reason_launch[] = "oldest waiting run, below max_active";
static const char reason_discard[] = "group busy: discard policy drops later runs";

void ws_decide_serial(const ws_snapshot *s, ws_decision *d) {
	int64_t free = (int64_t)ws_snap_max_active(s) - ws_snap_n_active(s);
	uint32_t nw = ws_snap_n_waiting(s);
	if (ws_snap_truncated(s)) {
		/* the window's oldest part holds at least max_active runs */
		for (uint32_t i = 0; (int64_t)i < free && i < nw; i++)
			ws_launch(d, ws_snap_waiting(s, i), reason_launch);
		ws_discard_below(d, ws_run_seq(ws_snap_waiting(s, nw - 1)) + 1, reason_discard);
		return;
	}
	for (uint32_t i = 0; i < nw; i++) {
		ws_run r = ws_snap_waiting(s, i);
		if ((int64_t)i < free)
			ws_launch(d, r, reason_launch);
		else
			ws_discard(d, r, reason_discard);
	}
}
