/* Native tests of the C priority policy. */
#include "../priority/priority.c"
#include "wasmsched_test.h"

int main(void) {
	ws_test_run running[] = {{"r1", 1, WS_RUNNING}};
	ws_test_run waiting[] = {{"r2", 2, WS_WAITING}, {"r3", 3, WS_WAITING}};
	ws_test_decision d = ws_test_serial(1, running, 1, waiting, 2, 0);
	WS_EXPECT(d.n == 3);
	WS_EXPECT(ws_test_is(d, 0, WS_DISCARD, "r2") && ws_test_is(d, 1, WS_LAUNCH, "r3") && ws_test_is(d, 2, WS_STOP, "r1"));
	/* a deep window: launch the newest, one discard_below for the rest */
	ws_test_run deep[] = {{"a", 11, WS_WAITING}, {"b", 12, WS_WAITING}, {"y", 99, WS_WAITING}, {"z", 100, WS_WAITING}};
	d = ws_test_serial(1, NULL, 0, deep, 4, 90);
	WS_EXPECT(d.n == 2 && ws_test_is(d, 0, WS_LAUNCH, "z") && d.a[1].kind == WS_DISCARD_BELOW && d.a[1].seq == 100);
	return ws_test_failures;
}
