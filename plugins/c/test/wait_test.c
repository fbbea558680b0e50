/* Native tests of the C wait policy (plugins/c/build.sh does not build
 * this; plugins/guests_test.go TestCNative runs it). */
#include "../wait/wait.c"
#include "wasmsched_test.h"

int main(void) {
	ws_test_run running[] = {{"r1", 1, WS_RUNNING}};
	ws_test_run waiting[] = {{"r2", 2, WS_WAITING}, {"r3", 3, WS_WAITING}};
	ws_test_decision d = ws_test_serial(2, running, 1, waiting, 2, 0);
	WS_EXPECT(d.n == 1 && ws_test_is(d, 0, WS_LAUNCH, "r2"));
	WS_EXPECT(strcmp(d.a[0].reason, "oldest waiting run, below max_active") == 0);
	d = ws_test_serial(1, running, 1, waiting, 2, 0);
	WS_EXPECT(d.n == 0);
	d = ws_test_serial(0, NULL, 0, waiting, 2, 0); /* max_active 0 reads as 1 */
	WS_EXPECT(d.n == 1 && ws_test_is(d, 0, WS_LAUNCH, "r2"));
	/* the readers: an id reference inside the record reads the id, one
	 * outside it reads as empty (checked when read, never out of bounds) */
	ws_test_serial(2, running, 1, waiting, 2, 0); /* leaves the record in ws_test_in */
	uint32_t len = 64 + 64 * 3 + 6;
	ws_snapshot s = {ws_test_in, len, 1, 2, 0, 0, 0, ws_test_in + len - 6, ws_test_in + len - 6, ws_test_in + len - 6};
	ws_str id = ws_run_id(&s, ws_snap_waiting(&s, 1));
	WS_EXPECT(id.n == 2 && memcmp(id.p, "r3", 2) == 0);
	ws__put32(ws_test_in + 64 + 64 * 2 + 32, len - 1); /* r3's id now runs 1 byte past the end */
	WS_EXPECT(ws_run_id(&s, ws_snap_waiting(&s, 1)).n == 0);
	ws__put32(ws_test_in + 64 + 64 * 2 + 32, 0xfffffff0u); /* and an offset that would wrap in 32 bits */
	WS_EXPECT(ws_run_id(&s, ws_snap_waiting(&s, 1)).n == 0);
	return ws_test_failures;
}
