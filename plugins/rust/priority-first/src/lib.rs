//! priority-first: slots go to the highest run priority first, the oldest
//! (lowest seq) among equals (the Go built-in plugins/priority-first, in
//! Rust; an allocation policy).
#![cfg_attr(target_arch = "wasm32", no_std)]
use wasmsched_sdk::{AllocationDecision, AllocationPolicy, AllocationSnapshot};

pub struct PriorityFirst;

impl AllocationPolicy for PriorityFirst {
    fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision) {
        for i in 0..s.n_runs() {
            d.push(i);
        }
        // seqs are unique: the order is total, and the unstable sort gives
        // the Go built-in's
        d.sort_by(s, |a, b| b.priority().cmp(&a.priority()).then(a.seq().cmp(&b.seq())));
    }
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::allocation_policy!(PriorityFirst);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::decide_allocation_into;
    use wasmsched_sdk::testing::{alloc_snapshot, order, ARun, ASnap};

    fn ids(runs: &[ARun]) -> std::vec::Vec<&'static str> {
        let (mut inp, mut out) = ([0u8; 8192], [0u8; 4096]);
        let n = alloc_snapshot(&mut inp, &ASnap { free: 2, total: 6, runs, ..ASnap::default() });
        let m = decide_allocation_into::<PriorityFirst>(&inp[..n], &mut out).unwrap();
        let names = ["a1", "a2", "a3", "b1", "b2", "n1"];
        order(&out[..m]).map(|i| names.iter().copied().find(|x| *x == runs[i].id).unwrap()).collect()
    }

    #[test]
    fn highest_priority_first() {
        // the built-ins' table (plugins/alloc_test.go)
        let r = |id, group, seq, slots, priority| ARun { id, group, seq, slots, priority, ..ARun::default() };
        let runs = [r("a1", "ga", 1, 1, 0), r("a2", "ga", 2, 1, 5), r("a3", "ga", 3, 2, 0), r("b1", "gb", 4, 1, 0), r("b2", "gb", 5, 1, 9), r("n1", "gn", 6, 1, 0)];
        assert_eq!(ids(&runs), ["b2", "a2", "a1", "a3", "b1", "n1"]);
        assert!(ids(&[]).is_empty());
    }
}
