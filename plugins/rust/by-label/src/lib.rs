//! by-label: slots go in the order of a label's value (the parameter
//! "label", e.g. `namespace set --param label=tier`: "a" before "b"; runs
//! without it last), the oldest first among equals; a group that holds
//! "cap" slots or more already (the parameter, default unbounded) waits. An
//! example of an allocation policy that reads labels, parameters and the
//! slots in use (the C and Rust SDKs give the same order: TestByLabelGuests).
#![cfg_attr(target_arch = "wasm32", no_std)]
use core::cmp::Ordering;
use wasmsched_sdk::{AllocRun, AllocationDecision, AllocationPolicy, AllocationSnapshot};

pub struct ByLabel;

impl AllocationPolicy for ByLabel {
    fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision) {
        let cap = s.param_u64(b"cap", u64::MAX);
        for r in s.runs() {
            if (s.used(b"", r.group()) as u64) < cap {
                d.push(r.index());
            }
        }
        let key = s.param(b"label").unwrap_or(b"");
        let value = |r: &AllocRun| if key.is_empty() { None } else { s.label(r, key) };
        d.sort_by(s, |a, b| match (value(a), value(b)) {
            (Some(x), Some(y)) => x.cmp(y).then(a.seq().cmp(&b.seq())),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => a.seq().cmp(&b.seq()),
        });
    }
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::allocation_policy!(ByLabel);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::decide_allocation_into;
    use wasmsched_sdk::testing::{alloc_snapshot, order, ARun, ASnap};

    #[test]
    fn by_label_then_seq_capped_per_group() {
        const A: &[(&str, &str)] = &[("tier", "a")];
        const B: &[(&str, &str)] = &[("tier", "b")];
        let r = |id, group, seq, labels| ARun { id, group, seq, labels, ..ARun::default() };
        let runs = [r("b1", "g1", 1, B), r("n1", "g1", 2, &[]), r("a1", "g2", 3, A), r("a2", "full", 4, A), r("b2", "g2", 5, B)];
        let (mut inp, mut out) = ([0u8; 8192], [0u8; 4096]);
        let snap = ASnap { free: 1, runs: &runs, usage: &[("", "full", 4, 2)], params: &[("cap", "3"), ("label", "tier")], ..ASnap::default() };
        let n = alloc_snapshot(&mut inp, &snap);
        let m = decide_allocation_into::<ByLabel>(&inp[..n], &mut out).unwrap();
        let ids: std::vec::Vec<&str> = order(&out[..m]).map(|i| runs[i].id).collect();
        assert_eq!(ids, ["a1", "b1", "b2", "n1"]);
    }
}
