// priority-first: slots go to the highest run priority first, the oldest
// (lowest seq) among equals (the Go built-in plugins/priority-first, in
// AssemblyScript; an allocation policy).
import { AllocSnapshot, AllocDecision, AllocRun, decideAllocation, wasmsched_abi_version, wasmsched_input, allocationKind } from "wasmsched";
export { wasmsched_abi_version, wasmsched_input, allocationKind as wasmsched_kind };
export function wasmsched_decide(len: i32): i64 { return decideAllocation(len, decide); }

// a comes before b: higher priority, then lower seq (seqs are unique, so
// the order is total and the unstable sort gives the Go built-in's)
function before(s: AllocSnapshot, a: AllocRun, b: AllocRun): bool {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.seq < b.seq;
}

function decide(s: AllocSnapshot, d: AllocDecision): void {
  for (let i: u32 = 0; i < s.nRuns; i++) d.order(i);
  d.sort(s, before);
}
