/* reuse: after a failover, reuse every task slot whose worker is alive and
 * still holds it, reallocate the others (the Go built-in plugins/reuse, in C). */
#define WASMSCHED_REUSE
#include "wasmsched.h"

void ws_decide_reuse(const ws_reuse_request *r, ws_reuse_decision *d) {
	for (uint32_t i = 0; i < ws_req_n_slots(r); i++) {
		ws_slot s = ws_req_slot(r, i);
		ws_verdict(d, ws_slot_alive(s) && ws_slot_held(s) ? WS_REUSE : WS_REALLOCATE);
	}
}
