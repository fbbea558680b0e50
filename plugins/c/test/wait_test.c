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
	return ws_test_failures;
}
