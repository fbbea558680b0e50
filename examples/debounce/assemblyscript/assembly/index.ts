// debounce, in AssemblyScript (the Go version is ../policy.go; the same
// scenarios pass against both): the newest waiting run launches once no run
// was submitted for `period` (default 1s), the older waiting runs are
// discarded then; a steady stream still launches its newest run once the
// oldest waiting one has waited `max_wait` (default 0: no bound). While it
// waits it asks to be woken at the earlier of the two times (ABI v4), so
// nothing else needs to happen for the launch. A launch waits for a place
// below max_active.
import { Snapshot, Decision, decideSerial, declareParams, wasmsched_abi_version, wasmsched_input, serialKind } from "wasmsched";
export { wasmsched_abi_version, wasmsched_input, serialKind as wasmsched_kind };
export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); }

// the parameters it reads, checked by the host at group set, push and
// activation (the Go version's params.Declare, as a declaration)
export function wasmsched_params(): i64 {
  return declareParams(
    "period\tduration\t1s\t1ms\t168h\tthe quiet period after the newest submit\n" +
    "max_wait\tduration\t\t0s\t168h\tthe longest the oldest waiting run waits (0: no bound)\n");
}

const LAUNCH = "debounce: newest run after the quiet period";
const MAX_WAIT = "debounce: newest run, the oldest waited max_wait";
const DISCARD = "debounce: superseded by a newer run";

function decide(s: Snapshot, d: Decision): void {
  const n = s.nWaiting;
  if (n == 0) return;
  const period = s.paramDurationMs("period", 1000);
  const maxWait = s.paramDurationMs("max_wait", 0);
  const newest = s.waiting(n - 1), oldest = s.waiting(0);
  let due = newest.submittedAt + period;
  let reason = LAUNCH;
  if (maxWait > 0 && oldest.submittedAt + maxWait < due) {
    due = oldest.submittedAt + maxWait;
    reason = MAX_WAIT;
  }
  if (s.now() < due) {
    d.wakeAt(due);
    return;
  }
  if (s.free() == 0) return; // decided again when an active run ends
  d.launch(newest, reason);
  if (n > 1) d.discardBelow(newest.seq, DISCARD); // every older one, beyond the window too
}
