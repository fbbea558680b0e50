//! priority: "newest wins": keep the max_active newest runs (waiting or
//! active, not stopping), launch the waiting ones among them, discard the
//! older waiting runs and stop the older active ones (the Go built-in
//! plugins/priority, in Rust).
#![cfg_attr(target_arch = "wasm32", no_std)]
use wasmsched_sdk::{Decision, SerialPolicy, Snapshot, STOPPING};

pub struct Priority;

const REASON_NEWEST: &str = "newest run wins";
const REASON_SUPERSEDED: &str = "superseded by a newer run";

impl SerialPolicy for Priority {
    fn decide(s: &Snapshot, d: &mut Decision) {
        let keep = s.max_active();
        // walk both seq-sorted lists from the newest end to the keep-th newest candidate
        let (mut ia, mut iw) = (s.n_active() as isize - 1, s.n_waiting() as isize - 1);
        let mut cutoff = 0u64;
        for _ in 0..keep {
            while ia >= 0 && s.active_at(ia as usize).state() == STOPPING {
                ia -= 1;
            }
            if iw >= 0 && (ia < 0 || s.waiting_at(iw as usize).seq() > s.active_at(ia as usize).seq()) {
                cutoff = s.waiting_at(iw as usize).seq();
                iw -= 1;
            } else if ia >= 0 {
                cutoff = s.active_at(ia as usize).seq();
                ia -= 1;
            } else {
                cutoff = 0; // fewer candidates than max_active: all survive
                break;
            }
        }
        if s.truncated() {
            for r in s.waiting() {
                if r.seq() >= cutoff {
                    d.launch(&r, REASON_NEWEST);
                }
            }
            if cutoff > 0 {
                d.discard_below(cutoff, REASON_SUPERSEDED);
            }
        } else {
            for r in s.waiting() {
                if r.seq() >= cutoff {
                    d.launch(&r, REASON_NEWEST);
                } else {
                    d.discard(&r, REASON_SUPERSEDED);
                }
            }
        }
        for r in s.active() {
            if r.state() != STOPPING && r.seq() < cutoff {
                d.stop(&r, REASON_SUPERSEDED);
            }
        }
    }
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::serial_policy!(Priority);

#[cfg(test)]
mod tests {

    use super::*;
    use wasmsched_sdk::testing::{action, n_actions, snapshot};
    use wasmsched_sdk::{decide_serial_into, RUNNING, WAITING};

    #[test]
    fn newest_wins() {
        let (mut inp, mut out) = ([0u8; 4096], [0u8; 8192]);
        let n = snapshot(&mut inp, 1, &[("r1", 1, RUNNING)], &[("r2", 2, WAITING), ("r3", 3, WAITING)], 0);
        let m = decide_serial_into::<Priority>(&inp[..n], &mut out).unwrap();
        let got: std::vec::Vec<_> = (0..n_actions(&out[..m])).map(|i| { let a = action(&inp[..n], &out[..m], i); (a.0, a.1.to_vec()) }).collect();
        assert_eq!(got, std::vec![(2, b"r2".to_vec()), (1, b"r3".to_vec()), (3, b"r1".to_vec())]);
    }
}
