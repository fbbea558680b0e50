//! reuse: after a failover, reuse every task slot whose worker is alive and
//! still holds it, reallocate the others (the Go built-in plugins/reuse, in Rust).
#![cfg_attr(target_arch = "wasm32", no_std)]
use wasmsched_sdk::{ReuseDecision, ReusePolicy, ReuseRequest, REALLOCATE, REUSE};

pub struct Reuse;

impl ReusePolicy for Reuse {
    fn decide(r: &ReuseRequest, d: &mut ReuseDecision) {
        for s in r.slots() {
            d.verdict(if s.alive() && s.held() { REUSE } else { REALLOCATE });
        }
    }
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::reuse_policy!(Reuse);
