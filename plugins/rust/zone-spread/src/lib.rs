//! zone-spread: examples/zone-spread in Rust (ABI version 5, placement).
//! Runs get slots in launch order; each goes to the zone (the value of the
//! worker label named by the parameter "zone_label", default "zone") with
//! the fewest slots in use, counting the runs this decision placed, ties to
//! the zone that sorts first, and in it to the worker with the most free
//! slots, among the workers that may take it (`takes`) with its slots free.
//! A run no worker can take now is left to the host. The Go, C and Rust
//! versions decide alike (TestZoneSpreadGuests). No allocator: at most
//! MAX_WORKERS workers in MAX_ZONES zones are considered (the rest are
//! left to the host).
#![cfg_attr(target_arch = "wasm32", no_std)]
use wasmsched_sdk::{AllocationDecision, AllocationPolicy, AllocationSnapshot, HOST_CHOOSES};

pub struct ZoneSpread;

const MAX_WORKERS: usize = 4096;
const MAX_ZONES: usize = 256;

struct Scratch {
    free: [u32; MAX_WORKERS],
    zone_of: [u32; MAX_WORKERS],
    used: [u32; MAX_WORKERS],
}

// the decision's scratch (one call at a time: the host never re-enters a guest)
static mut SCRATCH: Scratch = Scratch { free: [0; MAX_WORKERS], zone_of: [0; MAX_WORKERS], used: [0; MAX_WORKERS] };

impl AllocationPolicy for ZoneSpread {
    fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision) {
        // SAFETY: a guest runs one decision at a time, and native tests call it from one thread
        let sc = unsafe { &mut *core::ptr::addr_of_mut!(SCRATCH) };
        let key = s.param(b"zone_label").filter(|k| !k.is_empty()).unwrap_or(b"zone");
        let nw = s.n_workers().min(MAX_WORKERS);
        let zone = |w: usize| s.worker_label(w, key).unwrap_or(b"");
        let mut names: [&[u8]; MAX_ZONES] = [&[]; MAX_ZONES];
        let mut nz = 0usize;
        for w in 0..nw {
            let wk = s.worker(w);
            let name = zone(w);
            let z = match names[..nz].iter().position(|n| *n == name) {
                Some(z) => z,
                None if nz < MAX_ZONES => {
                    names[nz] = name;
                    sc.used[nz] = 0;
                    nz += 1;
                    nz - 1
                }
                None => {
                    sc.free[w] = 0; // a zone past MAX_ZONES: its workers are left to the host
                    sc.zone_of[w] = 0;
                    continue;
                }
            };
            sc.free[w] = wk.free;
            sc.zone_of[w] = z as u32;
            sc.used[z] += wk.slots - wk.free;
        }
        for r in s.runs() {
            let k = r.slots();
            let mut best: Option<usize> = None;
            for w in 0..nw {
                if sc.free[w] < k || matches!(best, Some(b) if !better(sc, &names, w, b)) || !s.takes(w, &r) {
                    continue;
                }
                best = Some(w);
            }
            match best {
                Some(b) => {
                    sc.free[b] -= k;
                    sc.used[sc.zone_of[b] as usize] += k;
                    d.place(r.index(), b as u32);
                }
                None => d.place(r.index(), HOST_CHOOSES),
            }
        }
    }
}

/// Whether worker a is a better place than worker b: its zone has fewer
/// slots in use (then sorts first), or it is in the same zone with more
/// free slots.
fn better(sc: &Scratch, names: &[&[u8]], a: usize, b: usize) -> bool {
    let (za, zb) = (sc.zone_of[a] as usize, sc.zone_of[b] as usize);
    if za != zb {
        if sc.used[za] != sc.used[zb] {
            return sc.used[za] < sc.used[zb];
        }
        return names[za] < names[zb];
    }
    sc.free[a] > sc.free[b]
}

#[cfg(target_arch = "wasm32")]
wasmsched_sdk::allocation_policy!(ZoneSpread);
