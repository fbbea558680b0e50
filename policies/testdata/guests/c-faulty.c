/* A C plugin that misbehaves on purpose (the modes of testdata/faulty, by
 * max_active): 99 loops forever, 98 traps, 97 grows memory until refused
 * and then loops; anything else decides like wait. */
#define WASMSCHED_SERIAL
#include "wasmsched.h"

void ws_decide_serial(const ws_snapshot *s, ws_decision *d) {
	uint32_t m = ws_snap_max_active(s);
	volatile uint32_t spin = 0;
	switch (m) {
	case 99:
		for (;;) spin++;
	case 98:
		__builtin_trap();
	case 97:
		while (__builtin_wasm_memory_grow(0, 16) != (size_t)-1) spin++;
		for (;;) spin++;
	}
	int64_t free = (int64_t)m - ws_snap_n_active(s);
	for (uint32_t i = 0; (int64_t)i < free && i < ws_snap_n_waiting(s); i++)
		ws_launch(d, ws_snap_waiting(s, i), "oldest waiting run, below max_active");
}
