//! wait: launch the oldest waiting runs while fewer than max_active are
//! active (the Go built-in plugins/wait, in Rust).
#![cfg_attr(target_arch = "wasm32", no_std)]
use wasmsched_sdk::{Decision, SerialPolicy, Snapshot};

pub struct Wait;

pub const REASON_LAUNCH: &str = "oldest waiting run, below max_active";

impl SerialPolicy for Wait {
    fn decide(s: &Snapshot, d: &mut Decision) {
        let free = (s.max_active() as usize).saturating_sub(s.n_active());
        for r in s.waiting().take(free) {
            d.launch(&r, REASON_LAUNCH);
        }
    }
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::serial_policy!(Wait);

#[cfg(test)]
mod tests {

    use super::*;
    use wasmsched_sdk::testing::{action, n_actions, snapshot};
    use wasmsched_sdk::{decide_serial_into, RUNNING, WAITING};

    #[test]
    fn launches_below_max_active() {
        let (mut inp, mut out) = ([0u8; 4096], [0u8; 8192]);
        let n = snapshot(&mut inp, 2, &[("r1", 1, RUNNING)], &[("r2", 2, WAITING), ("r3", 3, WAITING)], 0);
        let m = decide_serial_into::<Wait>(&inp[..n], &mut out).unwrap();
        assert_eq!(n_actions(&out[..m]), 1);
        assert_eq!(action(&inp[..n], &out[..m], 0), (1, &b"r2"[..], 0, REASON_LAUNCH.as_bytes()));
    }
}
