//! discard: launch the oldest waiting run(s) below max_active, discard every
//! other waiting run (the Go built-in plugins/discard, in Rust).
#![cfg_attr(target_arch = "wasm32", no_std)]
use wasmsched_sdk::{Decision, SerialPolicy, Snapshot};

pub struct Discard;

const REASON_LAUNCH: &str = "oldest waiting run, below max_active";
const REASON_DISCARD: &str = "group busy: discard policy drops later runs";

impl SerialPolicy for Discard {
    fn decide(s: &Snapshot, d: &mut Decision) {
        let free = (s.max_active() as usize).saturating_sub(s.n_active());
        if s.truncated() {
            // the window's oldest part holds at least max_active runs
            for r in s.waiting().take(free) {
                d.launch(&r, REASON_LAUNCH);
            }
            if let Some(newest) = s.waiting().next_back() {
                d.discard_below(newest.seq() + 1, REASON_DISCARD);
            }
            return;
        }
        for (i, r) in s.waiting().enumerate() {
            if i < free {
                d.launch(&r, REASON_LAUNCH);
            } else {
                d.discard(&r, REASON_DISCARD);
            }
        }
    }
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::serial_policy!(Discard);

#[cfg(test)]
mod tests {

    use super::*;
    use wasmsched_sdk::testing::{action, n_actions, snapshot};
    use wasmsched_sdk::{decide_serial_into, WAITING};

    #[test]
    fn deep_window_discards_below() {
        let (mut inp, mut out) = ([0u8; 4096], [0u8; 8192]);
        let n = snapshot(&mut inp, 1, &[], &[("a", 11, WAITING), ("b", 12, WAITING), ("y", 99, WAITING), ("z", 100, WAITING)], 90);
        let m = decide_serial_into::<Discard>(&inp[..n], &mut out).unwrap();
        assert_eq!(n_actions(&out[..m]), 2);
        assert_eq!(action(&inp[..n], &out[..m], 0).1, b"a");
        assert_eq!(action(&inp[..n], &out[..m], 1).2, 101);
    }
}
