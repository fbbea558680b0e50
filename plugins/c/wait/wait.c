/* wait: launch the oldest waiting runs while fewer than max_active are
 * active (the Go built-in plugins/wait, in C). */
#define WASMSCHED_SERIAL
#include "wasmsched.h"

static const char reason_launch[] = "oldest waiting run, below max_active";

void ws_decide_serial(const ws_snapshot *s, ws_decision *d) {
	int64_t free = (int64_t)ws_snap_max_active(s) - ws_snap_n_active(s);
	for (uint32_t i = 0; (int64_t)i < free && i < ws_snap_n_waiting(s); i++)
		ws_launch(d, ws_snap_waiting(s, i), reason_launch);
}
