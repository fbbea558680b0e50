// priority: "newest wins": keep the max_active newest runs (waiting or
// active, not stopping), launch the waiting ones among them, discard the
// older waiting runs and stop the older active ones (the Go built-in
// plugins/priority, in AssemblyScript).
import { Snapshot, Decision, STOPPING, decideSerial, wasmsched_abi_version, wasmsched_input, serialKind } from "wasmsched";
export { wasmsched_abi_version, wasmsched_input, serialKind as wasmsched_kind };
export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); }

const NEWEST = "newest run wins";
const SUPERSEDED = "superseded by a newer run";

function stopOlder(s: Snapshot, d: Decision, cutoff: u64): void {
  for (let i: u32 = 0; i < s.nActive; i++) {
    const r = s.active(i);
    if (r.state != STOPPING && r.seq < cutoff) d.stop(r, SUPERSEDED);
  }
}

function decide(s: Snapshot, d: Decision): void {
  const keep = s.maxActive();
  let ia = <i64>s.nActive - 1, iw = <i64>s.nWaiting - 1;
  let cutoff: u64 = 0;
  // walk both seq-sorted lists from the newest end to the keep-th newest candidate
  for (let kept: u32 = 0; kept < keep; kept++) {
    while (ia >= 0 && s.active(<u32>ia).state == STOPPING) ia--;
    if (iw >= 0 && (ia < 0 || s.waiting(<u32>iw).seq > s.active(<u32>ia).seq)) {
      cutoff = s.waiting(<u32>iw).seq;
      iw--;
    } else if (ia >= 0) {
      cutoff = s.active(<u32>ia).seq;
      ia--;
    } else {
      cutoff = 0; // fewer candidates than max_active: all survive
      break;
    }
  }
  const nw = s.nWaiting;
  if (s.truncated()) {
    for (let i: u32 = 0; i < nw; i++) {
      const r = s.waiting(i);
      if (r.seq >= cutoff) d.launch(r, NEWEST);
    }
    if (cutoff > 0) d.discardBelow(cutoff, SUPERSEDED);
    stopOlder(s, d, cutoff);
    return;
  }
  for (let i: u32 = 0; i < nw; i++) {
    const r = s.waiting(i);
    if (r.seq >= cutoff) d.launch(r, NEWEST);
    else d.discard(r, SUPERSEDED);
  }
  stopOlder(s, d, cutoff);
}
