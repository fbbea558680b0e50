// discard: launch the oldest waiting run(s) below max_active, discard every
// other waiting run (the Go built-in plugins/discard, in AssemblyScript).
import { Snapshot, Decision, decideSerial, wasmsched_abi_version, wasmsched_input, serialKind } from "wasmsched";
export { wasmsched_abi_version, wasmsched_input, serialKind as wasmsched_kind };
export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); }

const LAUNCH = "oldest waiting run, below max_active";
const DISCARD = "group busy: discard policy drops later runs";

function decide(s: Snapshot, d: Decision): void {
  const free = <i64>s.maxActive() - <i64>s.nActive;
  const nw = s.nWaiting;
  if (s.truncated()) {
    // the window's oldest part holds at least max_active runs
    for (let i: u32 = 0; <i64>i < free && i < nw; i++) d.launch(s.waiting(i), LAUNCH);
    d.discardBelow(s.waiting(nw - 1).seq + 1, DISCARD);
    return;
  }
  for (let i: u32 = 0; i < nw; i++) {
    const r = s.waiting(i);
    if (<i64>i < free) d.launch(r, LAUNCH);
    else d.discard(r, DISCARD);
  }
}
