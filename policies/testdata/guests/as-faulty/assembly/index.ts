// An AssemblyScript plugin that misbehaves on purpose (the modes of
// testdata/faulty, by max_active): 99 loops forever, 98 aborts with a
// message (a failed assert), 97 grows memory until refused and then loops,
// 96 decides what the host refuses (the same run launched twice); anything
// else decides like wait.
import { Snapshot, Decision, decideSerial, wasmsched_abi_version, wasmsched_input, serialKind } from "wasmsched";
export { wasmsched_abi_version, wasmsched_input, serialKind as wasmsched_kind };
export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); }

let spin: u32 = 0;

function decide(s: Snapshot, d: Decision): void {
  const m = s.maxActive();
  if (m == 99) {
    while (true) spin++;
  }
  if (m == 98) {
    assert(s.nWaiting == 0, "the faulty plugin gives up: mode 98");
  }
  if (m == 97) {
    while (memory.grow(16) >= 0) spin++;
    while (true) spin++;
  }
  if (m == 96) {
    d.launch(s.waiting(0), "twice");
    d.launch(s.waiting(0), "twice");
    return;
  }
  const free = <i64>m - <i64>s.nActive;
  for (let i: u32 = 0; <i64>i < free && i < s.nWaiting; i++) {
    d.launch(s.waiting(i), "oldest waiting run, below max_active");
  }
}
