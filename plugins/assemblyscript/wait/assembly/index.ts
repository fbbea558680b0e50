// wait: launch the oldest waiting runs while fewer than max_active are
// active (the Go built-in plugins/wait, in AssemblyScript).
import { Snapshot, Decision, decideSerial, wasmsched_abi_version, wasmsched_input, serialKind } from "wasmsched";
export { wasmsched_abi_version, wasmsched_input, serialKind as wasmsched_kind };
export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); }

function decide(s: Snapshot, d: Decision): void {
  const free = <i64>s.maxActive() - <i64>s.nActive;
  for (let i: u32 = 0; <i64>i < free && i < s.nWaiting; i++) {
    d.launch(s.waiting(i), "oldest waiting run, below max_active");
  }
}
