//! A Rust plugin that misbehaves on purpose (the modes of testdata/faulty,
//! by max_active): 99 loops forever, 98 panics (an index out of bounds),
//! 97 grows memory until refused and then loops; anything else decides
//! like wait.
#![no_std]
use wasmsched_sdk::{Decision, SerialPolicy, Snapshot};

pub struct Faulty;

impl SerialPolicy for Faulty {
    fn decide(s: &Snapshot, d: &mut Decision) {
        let m = s.max_active();
        let mut spin = 0u32;
        match m {
            99 => loop {
                spin = unsafe { core::ptr::read_volatile(&spin) }.wrapping_add(1);
            },
            98 => {
                let i = s.n_waiting() + 7;
                let _ = s.waiting_at(i); // panics: out of range
            }
            97 => {
                while core::arch::wasm32::memory_grow(0, 16) != usize::MAX {}
                loop {
                    spin = unsafe { core::ptr::read_volatile(&spin) }.wrapping_add(1);
                }
            }
            _ => {}
        }
        let free = (m as usize).saturating_sub(s.n_active());
        for r in s.waiting().take(free) {
            d.launch(&r, "oldest waiting run, below max_active");
        }
    }
}

wasmsched_sdk::serial_policy!(Faulty);
