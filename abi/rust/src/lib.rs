//! The wasmsched plugin SDK for Rust (ABI version 4, `abi/ABI.md`).
//!
//! `no_std`, no dependencies, no allocator: readers are zero-copy views of
//! the input buffer, the decision writer encodes in place, and both buffers
//! come from `memory.grow`. Implement one trait and name it once; the SDK
//! owns every export:
//!
//! ```ignore
//! #![no_std]
//! use wasmsched_sdk::{Decision, SerialPolicy, Snapshot};
//!
//! struct Wait;
//! impl SerialPolicy for Wait {
//!     fn decide(s: &Snapshot, d: &mut Decision) {
//!         let free = s.max_active() as usize - s.n_active().min(s.max_active() as usize);
//!         for r in s.waiting().take(free) {
//!             d.launch(&r, "oldest waiting run, below max_active");
//!         }
//!     }
//! }
//! wasmsched_sdk::serial_policy!(Wait);
//! ```
//!
//! A slot-reuse policy implements [`ReusePolicy`] (`reuse_policy!`), an
//! allocation policy, which orders the runs waiting for slots,
//! [`AllocationPolicy`] (`allocation_policy!`).
//!
//! Build with `cargo build --release --target wasm32-wasi` (see
//! docs/sdk-rust.md); the policy logic tests natively with `cargo test
//! --no-default-features` against [`testing`].
#![cfg_attr(not(test), no_std)]

use core::ptr;

/// The ABI version this SDK exports.
pub const ABI_VERSION: i32 = 6;
/// Reasons are cut to this many bytes (the host's limit).
pub const MAX_REASON: usize = 256;

/// Run states.
pub const WAITING: u8 = 1;
pub const LAUNCHED: u8 = 2;
pub const RUNNING: u8 = 3;
pub const STOPPING: u8 = 4;

const LAUNCH: u32 = 1;
const DISCARD: u32 = 2;
const STOP: u32 = 3;
const DISCARD_BELOW: u32 = 4;
const WAKE: u32 = 5;
/// The bounds of a wake (ms from the decision) the host holds it to.
pub const MIN_WAKE_INTERVAL: i64 = 100;
pub const MAX_WAKE_AHEAD: i64 = 24 * 3600 * 1000;

/// Slot-reuse verdicts.
pub const REUSE: u8 = 1;
pub const REALLOCATE: u8 = 2;

#[inline(always)]
fn u32_at(b: &[u8], i: usize) -> u32 {
    debug_assert!(i + 4 <= b.len());
    // in bounds: every record is validated before a view is made
    unsafe { ptr::read_unaligned(b.as_ptr().add(i) as *const u32) }
}
#[inline(always)]
fn u64_at(b: &[u8], i: usize) -> u64 {
    debug_assert!(i + 8 <= b.len());
    unsafe { ptr::read_unaligned(b.as_ptr().add(i) as *const u64) }
}
#[inline(always)]
fn str_at(b: &[u8], field: usize) -> &[u8] {
    let (off, n) = (u32_at(b, field) as usize, u32_at(b, field + 4) as usize);
    unsafe { b.get_unchecked(off..off + n) }
}
#[inline(always)]
fn str_ok(b: &[u8], field: usize) -> bool {
    (u32_at(b, field) as u64) + (u32_at(b, field + 4) as u64) <= b.len() as u64
}

/// A run of a snapshot (64 bytes of the input, ABI version 4) or of a
/// reuse request (48 bytes).
#[derive(Clone, Copy)]
pub struct Run<'a> {
    rec: &'a [u8],
    at: usize,
    v4: bool, // a snapshot's run: the version 4 fields are there
}

impl<'a> Run<'a> {
    #[inline(always)]
    pub fn seq(&self) -> u64 { u64_at(self.rec, self.at) }
    #[inline(always)]
    pub fn submitted_at(&self) -> i64 { u64_at(self.rec, self.at + 8) as i64 }
    #[inline(always)]
    pub fn started_at(&self) -> i64 { u64_at(self.rec, self.at + 16) as i64 }
    #[inline(always)]
    pub fn priority(&self) -> i32 { u32_at(self.rec, self.at + 24) as i32 }
    #[inline(always)]
    pub fn slots(&self) -> u32 { u32_at(self.rec, self.at + 28) }
    /// The run id (bytes of the input: valid during the call).
    #[inline(always)]
    pub fn id(&self) -> &'a [u8] {
        // checked here, when read, rather than for every run before the
        // policy runs (most never read an id: they name runs by index); a
        // reference outside the record (the host never sends one) reads
        // as empty
        let (off, n) = (u32_at(self.rec, self.at + 32) as u64, u32_at(self.rec, self.at + 36) as u64);
        if off + n <= self.rec.len() as u64 {
            unsafe { self.rec.get_unchecked(off as usize..(off + n) as usize) }
        } else {
            &[]
        }
    }
    #[inline(always)]
    pub fn state(&self) -> u8 { self.rec[self.at + 40] }
    /// When it became due (unix ms; 0 = at once, or a reuse request's run).
    #[inline(always)]
    pub fn not_before(&self) -> i64 { if self.v4 { u64_at(self.rec, self.at + 48) as i64 } else { 0 } }
    /// Its attempt (1 before any retry), of max_attempts (0 in a reuse request).
    #[inline(always)]
    pub fn attempt(&self) -> u32 { if self.v4 { u32_at(self.rec, self.at + 56) } else { 0 } }
    #[inline(always)]
    pub fn max_attempts(&self) -> u32 { if self.v4 { u32_at(self.rec, self.at + 60) } else { 0 } }
    /// How many labels it has (see Snapshot::label, Snapshot::labels).
    #[inline(always)]
    pub fn n_labels(&self) -> usize {
        if self.v4 { (self.rec[self.at + 42] as usize) | (self.rec[self.at + 43] as usize) << 8 } else { 0 }
    }
    #[inline(always)]
    fn first_label(&self) -> usize { u32_at(self.rec, self.at + 44) as usize }
    /// The run's index in its snapshot (active runs first, then waiting).
    #[inline(always)]
    fn index(&self) -> u64 { ((self.at - 64) / 64) as u64 }
}

/// A checked string reference of the record: outside it reads as empty.
#[inline(always)]
fn view(b: &[u8], field: usize) -> &[u8] {
    let (off, n) = (u32_at(b, field) as u64, u32_at(b, field + 4) as u64);
    if off + n <= b.len() as u64 {
        unsafe { b.get_unchecked(off as usize..(off + n) as usize) }
    } else {
        &[]
    }
}

/// Runs of a snapshot, oldest (lowest seq) first.
#[derive(Clone)]
pub struct Runs<'a> {
    rec: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Iterator for Runs<'a> {
    type Item = Run<'a>;
    #[inline(always)]
    fn next(&mut self) -> Option<Run<'a>> {
        if self.left == 0 {
            return None;
        }
        let r = Run { rec: self.rec, at: self.at, v4: true };
        self.at += 64;
        self.left -= 1;
        Some(r)
    }
    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) { (self.left, Some(self.left)) }
}
impl<'a> ExactSizeIterator for Runs<'a> {}
impl<'a> DoubleEndedIterator for Runs<'a> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Run<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(Run { rec: self.rec, at: self.at + 64 * self.left, v4: true })
    }
}

/// A serial snapshot (ABI version 4: tag 5): a zero-copy view of the input.
pub struct Snapshot<'a> {
    rec: &'a [u8],
    na: usize,
    nw: usize,
    nl: usize, // the label table
    np: usize, // the group's parameters
    nh: usize, // its recent launches
}

impl<'a> Snapshot<'a> {
    /// Validates rec as a serial snapshot (tag, counts, the group and
    /// policy strings inside the record; a run's id is checked when read).
    #[inline(always)]
    pub fn parse(rec: &'a [u8]) -> Option<Snapshot<'a>> {
        if rec.len() < 64 || u32_at(rec, 0) != 5 {
            return None;
        }
        let (na, nw) = (u32_at(rec, 32) as usize, u32_at(rec, 36) as usize);
        let (nl, np, nh) = (u32_at(rec, 48) as usize, u32_at(rec, 52) as usize, u32_at(rec, 56) as usize);
        if 64u64 + 64 * (na as u64 + nw as u64) + 16 * (nl as u64 + np as u64 + nh as u64) > rec.len() as u64 {
            return None;
        }
        if !str_ok(rec, 16) || !str_ok(rec, 24) {
            return None;
        }
        // run ids, labels and parameters are checked when read
        Some(Snapshot { rec, na, nw, nl, np, nh })
    }
    /// max_active (0 reads as 1).
    #[inline(always)]
    pub fn max_active(&self) -> u32 { u32_at(self.rec, 4).max(1) }
    #[inline(always)]
    pub fn now(&self) -> i64 { u64_at(self.rec, 8) as i64 }
    #[inline(always)]
    pub fn group(&self) -> &'a [u8] { str_at(self.rec, 16) }
    #[inline(always)]
    pub fn policy(&self) -> &'a [u8] { str_at(self.rec, 24) }
    #[inline(always)]
    pub fn n_active(&self) -> usize { self.na }
    #[inline(always)]
    pub fn n_waiting(&self) -> usize { self.nw }
    /// The group's WAITING runs in all (at least n_waiting).
    #[inline(always)]
    pub fn waiting_total(&self) -> usize { (u32_at(self.rec, 40) as usize).max(self.nw) }
    /// The waiting list is a window: the group's oldest and newest runs.
    #[inline(always)]
    pub fn truncated(&self) -> bool { self.waiting_total() > self.nw }
    /// The active runs (LAUNCHED, RUNNING, STOPPING), oldest first.
    #[inline(always)]
    pub fn active(&self) -> Runs<'a> { Runs { rec: self.rec, at: 64, left: self.na } }
    /// The waiting runs (the window), oldest first.
    #[inline(always)]
    pub fn waiting(&self) -> Runs<'a> { Runs { rec: self.rec, at: 64 + 64 * self.na, left: self.nw } }
    #[inline(always)]
    pub fn active_at(&self, i: usize) -> Run<'a> { assert!(i < self.na); Run { rec: self.rec, at: 64 + 64 * i, v4: true } }
    #[inline(always)]
    pub fn waiting_at(&self, i: usize) -> Run<'a> {
        assert!(i < self.nw);
        Run { rec: self.rec, at: 64 + 64 * (self.na + i), v4: true }
    }
    #[inline(always)]
    fn labels_at(&self) -> usize { 64 + 64 * (self.na + self.nw) }
    /// Entry i of the label table: (key, value), empty beyond it.
    #[inline(always)]
    fn label_entry(&self, i: usize) -> (&'a [u8], &'a [u8]) {
        if i >= self.nl {
            return (&[], &[]);
        }
        let at = self.labels_at() + 16 * i;
        (view(self.rec, at), view(self.rec, at + 8))
    }
    /// Label j of run r (j < r.n_labels()): (key, value), sorted by key.
    #[inline(always)]
    pub fn run_label(&self, r: &Run, j: usize) -> (&'a [u8], &'a [u8]) {
        if j >= r.n_labels() {
            return (&[], &[]);
        }
        self.label_entry(r.first_label() + j)
    }
    /// The value of run r's label key, if it has one.
    pub fn label(&self, r: &Run, key: &[u8]) -> Option<&'a [u8]> {
        (0..r.n_labels()).map(|j| self.run_label(r, j)).find(|l| l.0 == key).map(|l| l.1)
    }
    /// The group's policy parameter name (group set --param), if set.
    pub fn param(&self, name: &[u8]) -> Option<&'a [u8]> {
        let at = self.labels_at() + 16 * self.nl;
        (0..self.np).map(|i| (view(self.rec, at + 16 * i), view(self.rec, at + 16 * i + 8))).find(|p| p.0 == name).map(|p| p.1)
    }
    /// A parameter as a non-negative integer, def when unset or not one.
    pub fn param_u64(&self, name: &[u8], def: u64) -> u64 { self.param(name).map(|v| parse_u64(v, def)).unwrap_or(def) }
    /// The group's recent launches, oldest first.
    #[inline(always)]
    pub fn n_launches(&self) -> usize { self.nh }
    #[inline(always)]
    fn launch_rec(&self, i: usize) -> usize { self.labels_at() + 16 * (self.nl + self.np) + 16 * i }
    /// When launch i happened (unix ms).
    pub fn launch_at(&self, i: usize) -> i64 { if i < self.nh { u64_at(self.rec, self.launch_rec(i)) as i64 } else { 0 } }
    /// The value of label key of the run launch i launched, if any.
    pub fn launch_label(&self, i: usize, key: &[u8]) -> Option<&'a [u8]> {
        if i >= self.nh {
            return None;
        }
        let (first, n) = (u32_at(self.rec, self.launch_rec(i) + 8) as usize, u32_at(self.rec, self.launch_rec(i) + 12) as usize);
        (0..n).map(|j| self.label_entry(first + j)).find(|l| l.0 == key).map(|l| l.1)
    }
}

/// The serial decision being written (tag 2), in place in the output
/// buffer: one action per run at most, plus one discard_below. Actions name
/// their run by its index in the snapshot (the indexed form of ABI version
/// 3): no id is copied.
pub struct Decision<'a> {
    out: &'a mut [u8],
    n: usize,
    max: usize,
    str_end: usize,
    below: bool,
    wake: i64, // asked (0: none), written last
    // the last reason written and where: a reason repeated from the
    // previous action (a constant per kind, usually) is written once
    why: (*const u8, usize),
    why_at: u32,
}

impl<'a> Decision<'a> {
    #[inline(always)]
    fn new(out: &'a mut [u8], max: usize) -> Decision<'a> {
        // one more slot than max: a wake, written by finish
        Decision { out, n: 0, max, str_end: 16 + 20 * (max + 1), below: false, wake: 0, why: (ptr::null(), 0), why_at: 0 }
    }
    #[inline(always)]
    fn put32(&mut self, i: usize, v: u32) { unsafe { ptr::write_unaligned(self.out.as_mut_ptr().add(i) as *mut u32, v) } }
    #[inline(always)]
    fn put64(&mut self, i: usize, v: u64) { unsafe { ptr::write_unaligned(self.out.as_mut_ptr().add(i) as *mut u64, v) } }
    #[inline(always)]
    fn add(&mut self, kind: u32, r: u64, why: &str) {
        if self.n >= self.max {
            return; // more actions than runs: the host would refuse it anyway
        }
        let a = 16 + 20 * self.n;
        self.put32(a, kind);
        self.put64(a + 4, r); // the run's index, or discard_below's seq
        let why = &why.as_bytes()[..why.len().min(MAX_REASON)];
        if (why.as_ptr(), why.len()) != self.why {
            self.why = (why.as_ptr(), why.len());
            self.why_at = self.str_end as u32;
            // room: the writer was sized for a full reason per action
            unsafe { ptr::copy_nonoverlapping(why.as_ptr(), self.out.as_mut_ptr().add(self.str_end), why.len()) };
            self.str_end += why.len();
        }
        let at = self.why_at;
        self.put32(a + 12, at);
        self.put32(a + 16, why.len() as u32);
        self.n += 1;
    }
    /// Launches (or discards) a WAITING run, stops a LAUNCHED or RUNNING
    /// one: r is a run of this call's snapshot.
    #[inline(always)]
    pub fn launch(&mut self, r: &Run, why: &str) { self.add(LAUNCH, r.index(), why) }
    #[inline(always)]
    pub fn discard(&mut self, r: &Run, why: &str) { self.add(DISCARD, r.index(), why) }
    #[inline(always)]
    pub fn stop(&mut self, r: &Run, why: &str) { self.add(STOP, r.index(), why) }
    /// Discards every WAITING run below seq that the other actions leave
    /// WAITING (once per decision; seq <= the newest waiting seq + 1).
    #[inline(always)]
    pub fn discard_below(&mut self, seq: u64, why: &str) {
        if !self.below {
            self.below = true;
            self.add(DISCARD_BELOW, seq, why)
        }
    }
    /// Asks to be decided again at unix ms t (ABI version 4; the earliest
    /// of several calls counts; the host holds it to MIN_WAKE_INTERVAL ..
    /// MAX_WAKE_AHEAD from the decision).
    #[inline(always)]
    pub fn wake_at(&mut self, t: i64) {
        if t != 0 && (self.wake == 0 || t < self.wake) {
            self.wake = t;
        }
    }
    /// Actions written so far.
    #[inline(always)]
    pub fn len(&self) -> usize { self.n }
    #[inline(always)]
    pub fn is_empty(&self) -> bool { self.n == 0 }

    /// Closes the record and returns its length. The action slots not
    /// written stay as a gap before the strings, which the host never
    /// reads (strings are located by offset): cheaper than moving them.
    #[inline(always)]
    fn finish(mut self) -> usize {
        if self.wake != 0 {
            let a = 16 + 20 * self.n; // the slot reserved after max
            self.put32(a, WAKE);
            self.put64(a + 4, self.wake as u64);
            self.put64(a + 12, 0);
            self.n += 1;
        }
        self.put32(0, 2);
        let n = self.n as u32;
        self.put32(4, n);
        self.put64(8, 1); // flags: the runs are named by index
        self.str_end
    }
}

/// A task slot of a reuse request.
#[derive(Clone, Copy)]
pub struct Slot<'a> {
    rec: &'a [u8],
    at: usize,
}

impl<'a> Slot<'a> {
    #[inline(always)]
    pub fn task(&self) -> u32 { u32_at(self.rec, self.at) }
    #[inline(always)]
    pub fn index(&self) -> u32 { u32_at(self.rec, self.at + 4) }
    #[inline(always)]
    pub fn worker(&self) -> &'a [u8] { str_at(self.rec, self.at + 8) }
    #[inline(always)]
    pub fn token(&self) -> &'a [u8] { str_at(self.rec, self.at + 16) }
    /// The slot's worker is alive.
    #[inline(always)]
    pub fn alive(&self) -> bool { self.rec[self.at + 24] & 1 != 0 }
    /// The slot still holds the run with its assignment token.
    #[inline(always)]
    pub fn held(&self) -> bool { self.rec[self.at + 24] & 2 != 0 }
}

/// A reuse request (tag 3).
pub struct ReuseRequest<'a> {
    rec: &'a [u8],
    ns: usize,
}

impl<'a> ReuseRequest<'a> {
    #[inline(always)]
    pub fn parse(rec: &'a [u8]) -> Option<ReuseRequest<'a>> {
        if rec.len() < 80 || u32_at(rec, 0) != 3 {
            return None;
        }
        let ns = u32_at(rec, 4) as usize;
        if 80u64 + 32 * ns as u64 > rec.len() as u64 || !str_ok(rec, 16) || !str_ok(rec, 64) {
            return None;
        }
        for i in 0..ns {
            if !str_ok(rec, 80 + 32 * i + 8) || !str_ok(rec, 80 + 32 * i + 16) {
                return None;
            }
        }
        Some(ReuseRequest { rec, ns })
    }
    #[inline(always)]
    pub fn now(&self) -> i64 { u64_at(self.rec, 8) as i64 }
    #[inline(always)]
    pub fn group(&self) -> &'a [u8] { str_at(self.rec, 16) }
    #[inline(always)]
    pub fn run(&self) -> Run<'a> { Run { rec: self.rec, at: 32, v4: false } }
    #[inline(always)]
    pub fn n_slots(&self) -> usize { self.ns }
    #[inline(always)]
    pub fn slot(&self, i: usize) -> Slot<'a> { assert!(i < self.ns); Slot { rec: self.rec, at: 80 + 32 * i } }
    #[inline(always)]
    pub fn slots(&self) -> impl Iterator<Item = Slot<'a>> + 'a {
        let rec = self.rec;
        (0..self.ns).map(move |i| Slot { rec, at: 80 + 32 * i })
    }
}

/// The reuse decision being written (tag 4): one verdict per slot, or fail.
pub struct ReuseDecision<'a> {
    out: &'a mut [u8],
    n: usize,
    max: usize,
    fail: bool,
    reason: &'static str,
}

impl<'a> ReuseDecision<'a> {
    /// The next slot's verdict (REUSE or REALLOCATE).
    #[inline(always)]
    pub fn verdict(&mut self, v: u8) {
        if self.n < self.max {
            self.out[24 + self.n] = v;
            self.n += 1;
        }
    }
    /// Fails the whole run (verdicts are ignored).
    #[inline(always)]
    pub fn fail(&mut self, why: &'static str) {
        self.fail = true;
        self.reason = why;
    }
    #[inline(always)]
    fn finish(self) -> usize {
        let end = 24 + self.n;
        let why = &self.reason.as_bytes()[..self.reason.len().min(MAX_REASON)];
        self.out[end..end + why.len()].copy_from_slice(why);
        let w = |o: &mut [u8], i: usize, v: u32| o[i..i + 4].copy_from_slice(&v.to_le_bytes());
        w(self.out, 0, 4);
        w(self.out, 4, self.fail as u32);
        w(self.out, 8, if why.is_empty() { 0 } else { end as u32 });
        w(self.out, 12, why.len() as u32);
        w(self.out, 16, if self.fail { 0 } else { self.n as u32 });
        w(self.out, 20, 0);
        end + why.len()
    }
}

/// A run waiting for slots, of an allocation snapshot (48 bytes of the input).
#[derive(Clone, Copy)]
pub struct AllocRun<'a> {
    rec: &'a [u8],
    at: usize,
}

impl<'a> AllocRun<'a> {
    /// Its seq: the namespace-wide submit counter (FIFO order).
    #[inline(always)]
    pub fn seq(&self) -> u64 { u64_at(self.rec, self.at) }
    /// When its launch was applied (unix ms).
    #[inline(always)]
    pub fn launched_at(&self) -> i64 { u64_at(self.rec, self.at + 8) as i64 }
    #[inline(always)]
    pub fn priority(&self) -> i32 { u32_at(self.rec, self.at + 16) as i32 }
    /// The slots it needs, all at once (0 in the record reads as 1).
    #[inline(always)]
    pub fn slots(&self) -> u32 { u32_at(self.rec, self.at + 20).max(1) }
    /// Its id (checked when read: a reference outside the record reads as empty).
    #[inline(always)]
    pub fn id(&self) -> &'a [u8] { view(self.rec, self.at + 24) }
    #[inline(always)]
    pub fn group(&self) -> &'a [u8] { view(self.rec, self.at + 32) }
    /// How many labels it has (AllocationSnapshot::run_label, label).
    #[inline(always)]
    pub fn n_labels(&self) -> usize { (self.rec[self.at + 44] as usize) | (self.rec[self.at + 45] as usize) << 8 }
    #[inline(always)]
    fn first_label(&self) -> usize { u32_at(self.rec, self.at + 40) as usize }
    /// Its index in the snapshot's runs.
    #[inline(always)]
    pub fn index(&self) -> usize { (self.at - 48) / 48 }
    /// How many labels a worker must carry to take it (placement, ABI
    /// version 5: AllocationSnapshot::run_require).
    #[inline(always)]
    pub fn n_require(&self) -> usize { (self.rec[self.at + 46] as usize) | (self.rec[self.at + 47] as usize) << 8 }
}

/// A live worker of an allocation snapshot.
#[derive(Clone, Copy)]
pub struct WorkerCapacity<'a> {
    /// Its identity.
    pub worker: &'a [u8],
    /// The slots it registered.
    pub slots: u32,
    /// Of them free now.
    pub free: u32,
}

/// What one group (`key` empty, `value` the group) or one label value
/// (`key` the label) holds of the namespace's slots now, over its RUNNING
/// and STOPPING runs.
#[derive(Clone, Copy)]
pub struct SlotUsage<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Slots in use.
    pub slots: u32,
    /// Runs holding them.
    pub runs: u32,
}

/// An allocation snapshot (tag 6): the LAUNCHED runs waiting for slots,
/// the live workers, the slots in use per group and per label value, and
/// the namespace's parameters. A zero-copy view of the input.
pub struct AllocationSnapshot<'a> {
    rec: &'a [u8],
    nr: usize,
    nw: usize,
    nu: usize,
    nl: usize,
    np: usize,
}

impl<'a> AllocationSnapshot<'a> {
    /// Validates rec as an allocation snapshot (tag and counts; strings
    /// are checked when read).
    #[inline(always)]
    pub fn parse(rec: &'a [u8]) -> Option<AllocationSnapshot<'a>> {
        if rec.len() < 48 || u32_at(rec, 0) != 6 {
            return None;
        }
        let (nr, nw, nu) = (u32_at(rec, 4) as usize, u32_at(rec, 32) as usize, u32_at(rec, 36) as usize);
        let (nl, np) = (u32_at(rec, 40) as usize, u32_at(rec, 44) as usize);
        let at = 48u64 + 48 * nr as u64 + 32 * nw as u64 + 24 * nu as u64 + 16 * (nl as u64 + np as u64);
        // the preference table (version 6): n_prefer, 4 reserved bytes, the entries
        if at + 8 > rec.len() as u64 || at + 8 + 24 * u32_at(rec, at as usize) as u64 > rec.len() as u64 {
            return None;
        }
        Some(AllocationSnapshot { rec, nr, nw, nu, nl, np })
    }
    /// Unix ms, Redis time.
    #[inline(always)]
    pub fn now(&self) -> i64 { u64_at(self.rec, 8) as i64 }
    /// Free slots on live workers.
    #[inline(always)]
    pub fn free(&self) -> u32 { u32_at(self.rec, 16) }
    /// All slots of live workers.
    #[inline(always)]
    pub fn total(&self) -> u32 { u32_at(self.rec, 20) }
    /// The runs waiting for slots in all (at least n_runs): more makes the
    /// runs a window, the first `oldest()` the queue's oldest, the rest
    /// its newest.
    #[inline(always)]
    pub fn launched_total(&self) -> usize { (u32_at(self.rec, 24) as usize).max(self.nr) }
    #[inline(always)]
    pub fn oldest(&self) -> usize { (u32_at(self.rec, 28) as usize).min(self.nr) }
    #[inline(always)]
    pub fn n_runs(&self) -> usize { self.nr }
    /// Run i (i < n_runs), seq ascending within each part of the window.
    #[inline(always)]
    pub fn run(&self, i: usize) -> AllocRun<'a> {
        assert!(i < self.nr);
        AllocRun { rec: self.rec, at: 48 + 48 * i }
    }
    /// The runs, in the snapshot's order.
    #[inline(always)]
    pub fn runs(&self) -> impl Iterator<Item = AllocRun<'a>> + 'a {
        let rec = self.rec;
        (0..self.nr).map(move |i| AllocRun { rec, at: 48 + 48 * i })
    }
    #[inline(always)]
    fn workers_at(&self) -> usize { 48 + 48 * self.nr }
    #[inline(always)]
    fn usage_at(&self) -> usize { self.workers_at() + 16 * self.nw }
    #[inline(always)]
    fn labels_at(&self) -> usize { self.usage_at() + 24 * self.nu }
    /// Label j of run r (j < r.n_labels()): (key, value), sorted by key.
    #[inline(always)]
    pub fn run_label(&self, r: &AllocRun, j: usize) -> (&'a [u8], &'a [u8]) {
        let i = r.first_label() + j;
        if j >= r.n_labels() || i >= self.nl {
            return (&[], &[]);
        }
        let at = self.labels_at() + 16 * i;
        (view(self.rec, at), view(self.rec, at + 8))
    }
    /// The value of run r's label key, if it has one.
    pub fn label(&self, r: &AllocRun, key: &[u8]) -> Option<&'a [u8]> {
        (0..r.n_labels()).map(|j| self.run_label(r, j)).find(|l| l.0 == key).map(|l| l.1)
    }
    #[inline(always)]
    fn table_label(&self, i: usize) -> (&'a [u8], &'a [u8]) {
        if i >= self.nl {
            return (&[], &[]);
        }
        let at = self.labels_at() + 16 * i;
        (view(self.rec, at), view(self.rec, at + 8))
    }
    /// Requirement j of run r (j < r.n_require()): a label (key, value) a
    /// worker must carry to take it, sorted by key (placement, version 5).
    #[inline(always)]
    pub fn run_require(&self, r: &AllocRun, j: usize) -> (&'a [u8], &'a [u8]) {
        if j >= r.n_require() {
            return (&[], &[]);
        }
        self.table_label(r.first_label() + r.n_labels() + j)
    }
    #[inline(always)]
    fn profile_at(&self, i: usize) -> usize { self.labels_at() + 16 * (self.nl + self.np) + 16 * i }
    /// How many labels worker i carries (placement, version 5).
    #[inline(always)]
    pub fn worker_n_labels(&self, i: usize) -> usize {
        assert!(i < self.nw);
        let at = self.profile_at(i);
        (self.rec[at + 4] as usize) | (self.rec[at + 5] as usize) << 8
    }
    /// Label j of worker i (j < worker_n_labels(i)), sorted by key.
    #[inline(always)]
    pub fn worker_label_at(&self, i: usize, j: usize) -> (&'a [u8], &'a [u8]) {
        if j >= self.worker_n_labels(i) {
            return (&[], &[]);
        }
        self.table_label(u32_at(self.rec, self.profile_at(i)) as usize + j)
    }
    /// The value of worker i's label key, if it carries it.
    pub fn worker_label(&self, i: usize, key: &[u8]) -> Option<&'a [u8]> {
        (0..self.worker_n_labels(i)).map(|j| self.worker_label_at(i, j)).find(|l| l.0 == key).map(|l| l.1)
    }
    /// The groups worker i serves: names or patterns ('*' matches any
    /// text), comma-separated; empty: every group.
    #[inline(always)]
    pub fn worker_groups(&self, i: usize) -> &'a [u8] {
        assert!(i < self.nw);
        view(self.rec, self.profile_at(i) + 8)
    }
    /// Whether worker i serves group.
    pub fn serves(&self, i: usize, group: &[u8]) -> bool {
        let gs = self.worker_groups(i);
        gs.is_empty() || gs.split(|&c| c == b',').any(|p| glob(p, group))
    }
    #[inline(always)]
    fn prefs_at(&self) -> usize { self.profile_at(self.nw) }
    /// How many preferences the snapshot's runs have in all (version 6).
    #[inline(always)]
    pub fn n_prefer(&self) -> usize { u32_at(self.rec, self.prefs_at()) as usize }
    /// Preference k (k < n_prefer): (run index, key, value, weight 1 to
    /// 1000), a label the run would rather its worker carried (soft); runs
    /// ascending, each run's sorted by key.
    #[inline(always)]
    pub fn prefer(&self, k: usize) -> (usize, &'a [u8], &'a [u8], u32) {
        assert!(k < self.n_prefer());
        let at = self.prefs_at() + 8 + 24 * k;
        (u32_at(self.rec, at) as usize, view(self.rec, at + 8), view(self.rec, at + 16), u32_at(self.rec, at + 4))
    }
    /// Worker i's score for run r: the sum of the weights of r's
    /// preferences it carries (0: none, or r has none).
    pub fn score(&self, i: usize, r: &AllocRun) -> u32 {
        let run = (r.at - 48) / 48;
        (0..self.n_prefer())
            .map(|k| self.prefer(k))
            .filter(|p| p.0 == run && self.worker_label(i, p.1) == Some(p.2))
            .map(|p| p.3)
            .sum()
    }
    /// Whether worker i may take run r: it serves r's group and carries
    /// every label r requires (its free slots aside).
    pub fn takes(&self, i: usize, r: &AllocRun) -> bool {
        self.serves(i, r.group())
            && (0..r.n_require()).all(|j| {
                let q = self.run_require(r, j);
                self.worker_label(i, q.0) == Some(q.1)
            })
    }
    #[inline(always)]
    pub fn n_workers(&self) -> usize { self.nw }
    /// Live worker i (by identity).
    #[inline(always)]
    pub fn worker(&self, i: usize) -> WorkerCapacity<'a> {
        assert!(i < self.nw);
        let at = self.workers_at() + 16 * i;
        WorkerCapacity { worker: view(self.rec, at), slots: u32_at(self.rec, at + 8), free: u32_at(self.rec, at + 12) }
    }
    pub fn workers(&self) -> impl Iterator<Item = WorkerCapacity<'a>> + '_ { (0..self.nw).map(move |i| self.worker(i)) }
    #[inline(always)]
    pub fn n_usage(&self) -> usize { self.nu }
    /// Usage entry i: the groups first, then the label values, each part
    /// most slots first.
    #[inline(always)]
    pub fn usage(&self, i: usize) -> SlotUsage<'a> {
        assert!(i < self.nu);
        let at = self.usage_at() + 24 * i;
        SlotUsage {
            key: view(self.rec, at),
            value: view(self.rec, at + 8),
            slots: u32_at(self.rec, at + 16),
            runs: u32_at(self.rec, at + 20),
        }
    }
    pub fn usages(&self) -> impl Iterator<Item = SlotUsage<'a>> + '_ { (0..self.nu).map(move |i| self.usage(i)) }
    /// The slots a group (label empty, value the group) or a label value
    /// holds now (0 when none).
    pub fn used(&self, label: &[u8], value: &[u8]) -> u32 {
        self.usages().find(|u| u.key == label && u.value == value).map(|u| u.slots).unwrap_or(0)
    }
    /// The namespace's allocation parameter name (`namespace set --param`,
    /// `--fair-label`, `--weights`), if set.
    pub fn param(&self, name: &[u8]) -> Option<&'a [u8]> {
        let at = self.labels_at() + 16 * self.nl;
        (0..self.np).map(|i| (view(self.rec, at + 16 * i), view(self.rec, at + 16 * i + 8))).find(|p| p.0 == name).map(|p| p.1)
    }
    /// A parameter as a non-negative integer, def when unset or not one.
    pub fn param_u64(&self, name: &[u8], def: u64) -> u64 { self.param(name).map(|v| parse_u64(v, def)).unwrap_or(def) }
}

/// Whether s matches pattern p, where '*' matches any text.
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si, mut star, mut mark) = (0usize, 0usize, usize::MAX, 0usize);
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = pi;
            pi += 1;
            mark = si;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if star != usize::MAX {
            pi = star + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// v as a non-negative decimal integer, def when empty or not one.
pub fn parse_u64(v: &[u8], def: u64) -> u64 {
    if !v.is_empty() && v.len() <= 19 && v.iter().all(|c| c.is_ascii_digit()) {
        v.iter().fold(0u64, |x, c| x * 10 + (c - b'0') as u64)
    } else {
        def
    }
}

/// The allocation decision being written (tag 7), in place: the order, by
/// run index, in which the runs get slots. A run not named waits.
pub struct AllocationDecision<'a> {
    out: &'a mut [u8],
    n: usize,
    max: usize,
    placed: bool,
}

/// In [`AllocationDecision::place`]: the host chooses the run's worker.
pub const HOST_CHOOSES: u32 = u32::MAX;

impl<'a> AllocationDecision<'a> {
    #[inline(always)]
    fn get(&self, k: usize) -> u32 { u32_at(self.out, 16 + 4 * k) }
    #[inline(always)]
    fn set(&mut self, k: usize, v: u32) { unsafe { ptr::write_unaligned(self.out.as_mut_ptr().add(16 + 4 * k) as *mut u32, v) } }
    // the worker of entry k, kept past the room of a full order until finish
    #[inline(always)]
    fn worker_of(&self, k: usize) -> u32 { u32_at(self.out, 16 + 4 * self.max + 4 * k) }
    #[inline(always)]
    fn set_worker(&mut self, k: usize, w: u32) {
        let at = 16 + 4 * self.max + 4 * k;
        unsafe { ptr::write_unaligned(self.out.as_mut_ptr().add(at) as *mut u32, w) }
    }
    #[inline(always)]
    fn swap(&mut self, a: usize, b: usize) {
        let (x, y) = (self.get(a), self.get(b));
        self.set(a, y);
        self.set(b, x);
        let (x, y) = (self.worker_of(a), self.worker_of(b));
        self.set_worker(a, y);
        self.set_worker(b, x);
    }
    /// Run i of the snapshot gets slots next. An index past the runs is
    /// dropped; one pushed twice makes the host refuse the whole order.
    #[inline(always)]
    pub fn push(&mut self, i: usize) { self.place(i, HOST_CHOOSES) }
    /// Run i of the snapshot gets slots next, all of them on worker w (an
    /// index into the snapshot's workers; placement, ABI version 5), or
    /// HOST_CHOOSES. A worker that may not take the run (takes) or has too
    /// few free slots for the runs placed on it makes the host refuse the
    /// whole decision.
    #[inline(always)]
    pub fn place(&mut self, i: usize, w: u32) {
        if i < self.max && self.n < self.max {
            let n = self.n;
            self.set(n, i as u32);
            self.set_worker(n, w);
            self.placed |= w != HOST_CHOOSES;
            self.n += 1;
        }
    }
    /// The worker of the k-th run pushed (k < len): HOST_CHOOSES unless placed.
    #[inline(always)]
    pub fn worker_at(&self, k: usize) -> u32 {
        assert!(k < self.n);
        self.worker_of(k)
    }
    /// Indices pushed so far.
    #[inline(always)]
    pub fn len(&self) -> usize { self.n }
    #[inline(always)]
    pub fn is_empty(&self) -> bool { self.n == 0 }
    /// The k-th index pushed (k < len).
    #[inline(always)]
    pub fn at(&self, k: usize) -> usize {
        assert!(k < self.n);
        self.get(k) as usize
    }
    /// Sorts the order pushed so far by cmp of the runs it names: a heap
    /// sort, in place, O(n log n), not stable (break ties, by seq for one).
    pub fn sort_by<F: FnMut(&AllocRun, &AllocRun) -> core::cmp::Ordering>(&mut self, s: &AllocationSnapshot, mut cmp: F) {
        let mut before = |x: u32, y: u32| cmp(&s.run(x as usize), &s.run(y as usize)) == core::cmp::Ordering::Less;
        let mut n = self.n;
        for i in (0..n / 2).rev() {
            self.sift(&mut before, i, n);
        }
        while n > 1 {
            n -= 1;
            self.swap(0, n);
            self.sift(&mut before, 0, n);
        }
    }
    // sift: the heap below at (a max-heap of "comes last") made whole again
    fn sift<G: FnMut(u32, u32) -> bool>(&mut self, before: &mut G, mut at: usize, n: usize) {
        loop {
            let mut c = 2 * at + 1;
            if c >= n {
                return;
            }
            if c + 1 < n && before(self.get(c), self.get(c + 1)) {
                c += 1;
            }
            let (x, y) = (self.get(at), self.get(c));
            if !before(x, y) {
                return;
            }
            self.swap(at, c);
            at = c;
        }
    }
    #[inline(always)]
    fn finish(mut self) -> usize {
        self.set_header();
        if !self.placed {
            return 16 + 4 * self.n;
        }
        // the workers follow the order (n_place = n)
        let n = self.n;
        for k in 0..n {
            let w = self.worker_of(k);
            unsafe { ptr::write_unaligned(self.out.as_mut_ptr().add(16 + 4 * n + 4 * k) as *mut u32, w) }
        }
        unsafe { ptr::write_unaligned(self.out.as_mut_ptr().add(8) as *mut u32, n as u32) }
        16 + 8 * n
    }
    #[inline(always)]
    fn set_header(&mut self) {
        let n = self.n as u32;
        unsafe {
            ptr::write_unaligned(self.out.as_mut_ptr() as *mut u32, 7);
            ptr::write_unaligned(self.out.as_mut_ptr().add(4) as *mut u32, n);
            ptr::write_unaligned(self.out.as_mut_ptr().add(8) as *mut u64, 0);
        }
    }
}

/// A serial policy: append every action it wants for the snapshot.
pub trait SerialPolicy {
    fn decide(s: &Snapshot, d: &mut Decision);
}

/// A slot-reuse policy: one verdict per slot, in order, or fail.
pub trait ReusePolicy {
    fn decide(r: &ReuseRequest, d: &mut ReuseDecision);
}

/// An allocation policy: push the runs that should get slots, in order.
pub trait AllocationPolicy {
    fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision);
}

// ---- buffers and exports ----

/// Output buffers are at most this large (the host's memory cap is 32 MiB).
const MAX_BUF: usize = 64 << 20;

#[doc(hidden)]
pub struct Buffers {
    inp: *mut u8,
    in_cap: usize,
    out: *mut u8,
    out_cap: usize,
}

#[doc(hidden)]
pub static mut BUFS: Buffers = Buffers { inp: ptr::null_mut(), in_cap: 0, out: ptr::null_mut(), out_cap: 0 };

#[cfg(target_arch = "wasm32")]
fn grow(size: usize) -> Option<(*mut u8, usize)> {
    let pages = ((size + 65535) / 65536).max(1);
    let old = core::arch::wasm32::memory_grow(0, pages);
    if old == usize::MAX {
        return None;
    }
    Some(((old * 65536) as *mut u8, pages * 65536))
}

#[cfg(not(target_arch = "wasm32"))]
fn grow(_size: usize) -> Option<(*mut u8, usize)> { None }

#[doc(hidden)]
#[inline(always)]
pub fn input(size: i32) -> *mut u8 {
    if size < 0 || size as usize > MAX_BUF {
        return ptr::null_mut();
    }
    unsafe {
        if BUFS.inp.is_null() || size as usize > BUFS.in_cap {
            match grow(size as usize) {
                Some((p, cap)) => {
                    BUFS.inp = p;
                    BUFS.in_cap = cap;
                }
                None => return ptr::null_mut(),
            }
        }
        BUFS.inp
    }
}

#[inline(always)]
fn out_buf(need: usize) -> Option<&'static mut [u8]> {
    if need > MAX_BUF {
        return None;
    }
    unsafe {
        if BUFS.out.is_null() || need > BUFS.out_cap {
            let (p, cap) = grow(need)?;
            BUFS.out = p;
            BUFS.out_cap = cap;
        }
        Some(core::slice::from_raw_parts_mut(BUFS.out, BUFS.out_cap))
    }
}

const FAIL: i64 = 1; // ptr 0, error code 1: malformed input

#[inline(always)]
fn located(p: *const u8, n: usize) -> i64 { (((p as usize as u64) << 32) | n as u64) as i64 }

#[inline(always)]
fn in_record(len: i32) -> Option<&'static [u8]> {
    unsafe {
        if BUFS.inp.is_null() || len < 0 || len as usize > BUFS.in_cap {
            return None;
        }
        Some(core::slice::from_raw_parts(BUFS.inp, len as usize))
    }
}

/// Decides a serial snapshot (a run of the exports, also for tests):
/// rec in, the encoded decision written to out.
#[inline(always)]
pub fn decide_serial_into<P: SerialPolicy>(rec: &[u8], out: &mut [u8]) -> Option<usize> {
    let s = Snapshot::parse(rec)?;
    let max = s.na + s.nw + 1;
    if out.len() < serial_out_size(&s) {
        return None;
    }
    let mut d = Decision::new(out, max);
    P::decide(&s, &mut d);
    Some(d.finish())
}

#[inline(always)]
fn serial_out_size(s: &Snapshot) -> usize {
    let max = s.na + s.nw + 1;
    16 + 20 * (max + 1) + MAX_REASON * max
}

#[doc(hidden)]
#[inline(always)]
pub fn decide_serial<P: SerialPolicy>(len: i32) -> i64 {
    let rec = match in_record(len) {
        Some(r) => r,
        None => return FAIL,
    };
    let s = match Snapshot::parse(rec) {
        Some(s) => s,
        None => return FAIL,
    };
    let out = match out_buf(serial_out_size(&s)) {
        Some(o) => o,
        None => return FAIL,
    };
    let max = s.na + s.nw + 1;
    let p = out.as_ptr();
    let mut d = Decision::new(out, max);
    P::decide(&s, &mut d);
    let n = d.finish();
    located(p, n)
}

/// Decides a reuse request (a run of the exports, also for tests).
#[inline(always)]
pub fn decide_reuse_into<P: ReusePolicy>(rec: &[u8], out: &mut [u8]) -> Option<usize> {
    let r = ReuseRequest::parse(rec)?;
    if out.len() < 24 + r.ns + MAX_REASON {
        return None;
    }
    let max = r.ns;
    let mut d = ReuseDecision { out, n: 0, max, fail: false, reason: "" };
    P::decide(&r, &mut d);
    Some(d.finish())
}

#[doc(hidden)]
#[inline(always)]
pub fn decide_reuse<P: ReusePolicy>(len: i32) -> i64 {
    let rec = match in_record(len) {
        Some(r) => r,
        None => return FAIL,
    };
    let r = match ReuseRequest::parse(rec) {
        Some(r) => r,
        None => return FAIL,
    };
    let out = match out_buf(24 + r.ns + MAX_REASON) {
        Some(o) => o,
        None => return FAIL,
    };
    let p = out.as_ptr();
    let max = r.ns;
    let mut d = ReuseDecision { out, n: 0, max, fail: false, reason: "" };
    P::decide(&r, &mut d);
    let n = d.finish();
    located(p, n)
}

/// Decides an allocation snapshot (a run of the exports, also for tests):
/// rec in, the encoded decision written to out.
#[inline(always)]
pub fn decide_allocation_into<P: AllocationPolicy>(rec: &[u8], out: &mut [u8]) -> Option<usize> {
    let s = AllocationSnapshot::parse(rec)?;
    if out.len() < 16 + 8 * s.nr {
        return None;
    }
    let mut d = AllocationDecision { out, n: 0, max: s.nr, placed: false };
    P::decide(&s, &mut d);
    Some(d.finish())
}

#[doc(hidden)]
#[inline(always)]
pub fn decide_allocation<P: AllocationPolicy>(len: i32) -> i64 {
    let rec = match in_record(len) {
        Some(r) => r,
        None => return FAIL,
    };
    let s = match AllocationSnapshot::parse(rec) {
        Some(s) => s,
        None => return FAIL,
    };
    let out = match out_buf(16 + 8 * s.nr) {
        Some(o) => o,
        None => return FAIL,
    };
    let p = out.as_ptr();
    let mut d = AllocationDecision { out, n: 0, max: s.nr, placed: false };
    P::decide(&s, &mut d);
    let n = d.finish();
    located(p, n)
}

/// Exports a serial policy: `wasmsched_sdk::serial_policy!(MyPolicy);`
#[macro_export]
macro_rules! serial_policy {
    ($p:ty) => {
        $crate::__exports!(1);
        #[no_mangle]
        pub extern "C" fn wasmsched_decide(len: i32) -> i64 { $crate::decide_serial::<$p>(len) }
    };
}

/// Exports a slot-reuse policy: `wasmsched_sdk::reuse_policy!(MyPolicy);`
#[macro_export]
macro_rules! reuse_policy {
    ($p:ty) => {
        $crate::__exports!(2);
        #[no_mangle]
        pub extern "C" fn wasmsched_decide(len: i32) -> i64 { $crate::decide_reuse::<$p>(len) }
    };
}

/// Exports an allocation policy: `wasmsched_sdk::allocation_policy!(MyPolicy);`
#[macro_export]
macro_rules! allocation_policy {
    ($p:ty) => {
        $crate::__exports!(3);
        #[no_mangle]
        pub extern "C" fn wasmsched_decide(len: i32) -> i64 { $crate::decide_allocation::<$p>(len) }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __exports {
    ($kind:expr) => {
        #[no_mangle]
        pub extern "C" fn wasmsched_abi_version() -> i32 { $crate::ABI_VERSION }
        #[no_mangle]
        pub extern "C" fn wasmsched_kind() -> i32 { $kind }
        #[no_mangle]
        pub extern "C" fn wasmsched_input(size: i32) -> *mut u8 { $crate::input(size) }
        /// The SDK and the source language, for `wasmsched policy inspect`.
        #[link_section = "wasmsched_sdk"]
        #[used]
        static WASMSCHED_SDK: [u8; 4] = *b"rust";
    };
}

#[cfg(all(target_arch = "wasm32", feature = "panic-handler"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! { core::arch::wasm32::unreachable() }

// memcmp and bcmp for the wasm build: a byte-slice comparison (`==` or
// `cmp` of two `&[u8]`, as the readers' label and parameter lookups and a
// policy's own comparisons do) compiles to a call of memcmp, which a
// no_std module would otherwise import from "env", and the host refuses
// any import but WASI's. A cdylib exports them too (two exports the host
// never calls). Volatile reads keep LLVM from turning the loop back into
// a call of memcmp.
#[doc(hidden)]
#[cfg(all(target_arch = "wasm32", feature = "panic-handler"))]
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        let (x, y) = (ptr::read_volatile(a.add(i)), ptr::read_volatile(b.add(i)));
        if x != y {
            return x as i32 - y as i32;
        }
        i += 1;
    }
    0
}

#[doc(hidden)]
#[cfg(all(target_arch = "wasm32", feature = "panic-handler"))]
#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 { memcmp(a, b, n) }

/// Records for native tests of a policy: build a snapshot, decide it with
/// [`decide_serial_into`], read the actions back.
pub mod testing {
    /// A run for [`snapshot`]: (id, seq, state).
    pub type R<'a> = (&'a str, u64, u8);

    /// Encodes a serial snapshot into buf (returns its length): max_active,
    /// active and waiting runs (seq ascending), waiting_total (0 = all).
    pub fn snapshot(buf: &mut [u8], max_active: u32, active: &[R], waiting: &[R], waiting_total: u32) -> usize {
        let n = active.len() + waiting.len();
        let mut s = 64 + 64 * n; // version 4: no labels, parameters or launches
        let put = |b: &mut [u8], i: usize, v: &[u8]| b[i..i + v.len()].copy_from_slice(v);
        put(buf, 0, &5u32.to_le_bytes());
        put(buf, 4, &max_active.to_le_bytes());
        put(buf, 32, &(active.len() as u32).to_le_bytes());
        put(buf, 36, &(waiting.len() as u32).to_le_bytes());
        put(buf, 40, &waiting_total.to_le_bytes());
        for (i, r) in active.iter().chain(waiting.iter()).enumerate() {
            let at = 64 + 64 * i;
            put(buf, at, &r.1.to_le_bytes());
            put(buf, at + 28, &1u32.to_le_bytes());
            put(buf, at + 32, &(s as u32).to_le_bytes());
            put(buf, at + 36, &(r.0.len() as u32).to_le_bytes());
            buf[at + 40] = r.2;
            put(buf, s, r.0.as_bytes());
            s += r.0.len();
        }
        s
    }

    /// The i-th action of the decision out of the snapshot inp: (kind, the
    /// run's id or "", seq, reason). The id is the snapshot's run at the
    /// index the action names.
    pub fn action<'a>(inp: &'a [u8], out: &'a [u8], i: usize) -> (u32, &'a [u8], u64, &'a [u8]) {
        let u = |b: &[u8], j: usize| u32::from_le_bytes([b[j], b[j + 1], b[j + 2], b[j + 3]]);
        assert_eq!(u(out, 8), 1, "flags: the runs are named by index");
        let a = 16 + 20 * i;
        let why = &out[u(out, a + 12) as usize..(u(out, a + 12) + u(out, a + 16)) as usize];
        if u(out, a) == 4 || u(out, a) == 5 {
            let seq = u64::from_le_bytes(out[a + 4..a + 12].try_into().unwrap());
            (u(out, a), &[], seq, why)
        } else {
            let r = 64 + 64 * u(out, a + 4) as usize;
            assert!(r + 64 <= 64 + 64 * (u(inp, 32) + u(inp, 36)) as usize, "run index out of range");
            let id = &inp[u(inp, r + 32) as usize..(u(inp, r + 32) + u(inp, r + 36)) as usize];
            (u(out, a), id, 0, why)
        }
    }

    /// The number of actions of an encoded decision.
    pub fn n_actions(out: &[u8]) -> usize { u32::from_le_bytes([out[4], out[5], out[6], out[7]]) as usize }

    /// A run for [`alloc_snapshot`].
    #[derive(Clone, Copy, Default)]
    pub struct ARun<'a> {
        pub id: &'a str,
        pub group: &'a str,
        pub seq: u64,
        pub priority: i32,
        pub slots: u32,
        /// (key, value), sorted by key
        pub labels: &'a [(&'a str, &'a str)],
        pub launched_at: i64,
        /// placement (version 5): (key, value) a worker must carry, sorted by key
        pub require: &'a [(&'a str, &'a str)],
        /// preferences (version 6): (key, value, weight), sorted by key
        pub prefer: &'a [(&'a str, &'a str, u32)],
    }

    /// An allocation snapshot for [`alloc_snapshot`] (launched_total and
    /// oldest 0: all of the runs).
    #[derive(Clone, Copy, Default)]
    pub struct ASnap<'a> {
        pub now: i64,
        pub free: u32,
        pub total: u32,
        pub launched_total: u32,
        pub oldest: u32,
        pub runs: &'a [ARun<'a>],
        /// (worker, slots, free)
        pub workers: &'a [(&'a str, u32, u32)],
        /// (key, value, slots, runs)
        pub usage: &'a [(&'a str, &'a str, u32, u32)],
        /// (name, value), sorted by name
        pub params: &'a [(&'a str, &'a str)],
        /// placement (version 5): each worker's (labels sorted by key,
        /// groups comma-separated), by index; a worker past it has none
        pub profiles: &'a [(&'a [(&'a str, &'a str)], &'a str)],
    }

    /// Encodes an allocation snapshot into buf as the host does (returns its length).
    pub fn alloc_snapshot(buf: &mut [u8], s: &ASnap) -> usize {
        let put = |b: &mut [u8], i: usize, v: &[u8]| b[i..i + v.len()].copy_from_slice(v);
        let nl: usize = s.runs.iter().map(|r| r.labels.len() + r.require.len()).sum::<usize>()
            + s.profiles.iter().take(s.workers.len()).map(|p| p.0.len()).sum::<usize>();
        let (nr, nw, nu, np) = (s.runs.len(), s.workers.len(), s.usage.len(), s.params.len());
        let wat = 48 + 48 * nr;
        let (uat, lat) = (wat + 16 * nw, wat + 16 * nw + 24 * nu);
        let pat = lat + 16 * nl;
        let fat = pat + 16 * np;
        let qat = fat + 16 * nw;
        let nq: usize = s.runs.iter().map(|r| r.prefer.len()).sum();
        let mut at = qat + 8 + 24 * nq;
        let mut st = |b: &mut [u8], field: usize, v: &str| {
            put(b, field, &(at as u32).to_le_bytes());
            put(b, field + 4, &(v.len() as u32).to_le_bytes());
            put(b, at, v.as_bytes());
            at += v.len();
        };
        for b in buf[..qat + 8 + 24 * nq].iter_mut() {
            *b = 0;
        }
        put(buf, qat, &(nq as u32).to_le_bytes());
        let mut q = 0usize;
        put(buf, 0, &6u32.to_le_bytes());
        put(buf, 4, &(nr as u32).to_le_bytes());
        put(buf, 8, &s.now.to_le_bytes());
        put(buf, 16, &s.free.to_le_bytes());
        put(buf, 20, &s.total.to_le_bytes());
        put(buf, 24, &(if s.launched_total > 0 { s.launched_total } else { nr as u32 }).to_le_bytes());
        put(buf, 28, &(if s.oldest > 0 { s.oldest } else { nr as u32 }).to_le_bytes());
        put(buf, 32, &(nw as u32).to_le_bytes());
        put(buf, 36, &(nu as u32).to_le_bytes());
        put(buf, 40, &(nl as u32).to_le_bytes());
        put(buf, 44, &(np as u32).to_le_bytes());
        let mut label = 0usize;
        for (i, r) in s.runs.iter().enumerate() {
            let p = 48 + 48 * i;
            put(buf, p, &r.seq.to_le_bytes());
            put(buf, p + 8, &r.launched_at.to_le_bytes());
            put(buf, p + 16, &r.priority.to_le_bytes());
            put(buf, p + 20, &r.slots.to_le_bytes());
            st(buf, p + 24, r.id);
            st(buf, p + 32, r.group);
            put(buf, p + 40, &(label as u32).to_le_bytes());
            put(buf, p + 44, &(r.labels.len() as u16).to_le_bytes());
            put(buf, p + 46, &(r.require.len() as u16).to_le_bytes());
            for l in r.labels.iter().chain(r.require.iter()) {
                st(buf, lat + 16 * label, l.0);
                st(buf, lat + 16 * label + 8, l.1);
                label += 1;
            }
            for p in r.prefer {
                let e = qat + 8 + 24 * q;
                put(buf, e, &(i as u32).to_le_bytes());
                put(buf, e + 4, &p.2.to_le_bytes());
                st(buf, e + 8, p.0);
                st(buf, e + 16, p.1);
                q += 1;
            }
        }
        for (i, w) in s.workers.iter().enumerate() {
            st(buf, wat + 16 * i, w.0);
            put(buf, wat + 16 * i + 8, &w.1.to_le_bytes());
            put(buf, wat + 16 * i + 12, &w.2.to_le_bytes());
            let (labels, groups) = s.profiles.get(i).copied().unwrap_or((&[], ""));
            put(buf, fat + 16 * i, &(label as u32).to_le_bytes());
            put(buf, fat + 16 * i + 4, &(labels.len() as u16).to_le_bytes());
            for l in labels {
                st(buf, lat + 16 * label, l.0);
                st(buf, lat + 16 * label + 8, l.1);
                label += 1;
            }
            st(buf, fat + 16 * i + 8, groups);
        }
        for (i, u) in s.usage.iter().enumerate() {
            st(buf, uat + 24 * i, u.0);
            st(buf, uat + 24 * i + 8, u.1);
            put(buf, uat + 24 * i + 16, &u.2.to_le_bytes());
            put(buf, uat + 24 * i + 20, &u.3.to_le_bytes());
        }
        for (i, p) in s.params.iter().enumerate() {
            st(buf, pat + 16 * i, p.0);
            st(buf, pat + 16 * i + 8, p.1);
        }
        at
    }

    /// The run indices of an encoded allocation decision, in order.
    pub fn order(out: &[u8]) -> impl Iterator<Item = usize> + '_ {
        let u = |b: &[u8], j: usize| u32::from_le_bytes([b[j], b[j + 1], b[j + 2], b[j + 3]]) as usize;
        assert_eq!(u(out, 0), 7, "not an allocation decision");
        (0..u(out, 4)).map(move |k| u(out, 16 + 4 * k))
    }

    /// The workers of an encoded allocation decision, by entry of the
    /// order (HOST_CHOOSES for each when it names none).
    pub fn placed(out: &[u8]) -> impl Iterator<Item = u32> + '_ {
        let u = |b: &[u8], j: usize| u32::from_le_bytes([b[j], b[j + 1], b[j + 2], b[j + 3]]);
        assert_eq!(u(out, 0), 7, "not an allocation decision");
        let (n, np) = (u(out, 4) as usize, u(out, 8) as usize);
        assert!(np == 0 || np == n, "{} workers for an order of {}", np, n);
        (0..n).map(move |k| if np == 0 { super::HOST_CHOOSES } else { u(out, 16 + 4 * n + 4 * k) })
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{action, n_actions, snapshot};
    use super::*;

    struct All;
    impl SerialPolicy for All {
        fn decide(s: &Snapshot, d: &mut Decision) {
            for r in s.waiting() {
                d.launch(&r, "go");
            }
            d.discard_below(s.waiting().next().map(|r| r.seq()).unwrap_or(1), "old");
            d.discard_below(99, "twice: ignored");
        }
    }

    #[test]
    fn writer_names_runs_by_index() {
        let (mut inp, mut out) = ([0u8; 4096], [0u8; 16384]);
        let n = snapshot(&mut inp, 3, &[("a1", 1, RUNNING)], &[("w2", 2, WAITING), ("w3", 3, WAITING)], 0);
        let m = decide_serial_into::<All>(&inp[..n], &mut out).unwrap();
        let (inp, out) = (&inp[..n], &out[..m]);
        assert_eq!(n_actions(out), 3);
        assert_eq!(action(inp, out, 0), (1, &b"w2"[..], 0, &b"go"[..]));
        assert_eq!(action(inp, out, 1), (1, &b"w3"[..], 0, &b"go"[..]));
        assert_eq!(action(inp, out, 2), (4, &b""[..], 2, &b"old"[..]));
        assert_eq!(u32::from_le_bytes(out[20..24].try_into().unwrap()), 1, "w2 is run 1 (after the active a1)");
        // a repeated reason is written once: 5 action slots reserved (one
        // per run, a discard_below, a wake), then "go" and "old"
        assert_eq!(m, 16 + 20 * 5 + 2 + 3);
    }

    struct Later;
    impl SerialPolicy for Later {
        fn decide(s: &Snapshot, d: &mut Decision) {
            d.wake_at(s.now() + 5000);
            d.wake_at(s.now() + 9000); // the earliest counts
        }
    }

    #[test]
    fn a_wake_is_the_last_action() {
        let (mut inp, mut out) = ([0u8; 4096], [0u8; 16384]);
        let n = snapshot(&mut inp, 1, &[], &[("w1", 1, WAITING)], 0);
        inp[8..16].copy_from_slice(&1000i64.to_le_bytes());
        let m = decide_serial_into::<Later>(&inp[..n], &mut out).unwrap();
        let out = &out[..m];
        assert_eq!(n_actions(out), 1);
        assert_eq!(action(&inp[..n], out, 0), (5, &b""[..], 6000, &b""[..]));
    }

    #[test]
    fn run_ids_are_checked_when_read() {
        let mut inp = [0u8; 4096];
        let n = snapshot(&mut inp, 1, &[], &[("w1", 2, WAITING), ("w2", 3, WAITING)], 0);
        assert_eq!(Snapshot::parse(&inp[..n]).unwrap().waiting_at(1).id(), b"w2");
        // w2's id now runs one byte past the end of the record
        let at = 64 + 64 + 32;
        inp[at..at + 4].copy_from_slice(&((n - 1) as u32).to_le_bytes());
        assert_eq!(Snapshot::parse(&inp[..n]).unwrap().waiting_at(1).id(), b"");
        inp[at..at + 4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert_eq!(Snapshot::parse(&inp[..n]).unwrap().waiting_at(1).id(), b"");
    }

    #[test]
    fn malformed_input_is_refused() {
        let mut inp = [0u8; 4096];
        let n = snapshot(&mut inp, 1, &[], &[("w", 2, WAITING)], 0);
        assert!(Snapshot::parse(&inp[..60]).is_none(), "short");
        inp[0] = 9;
        assert!(Snapshot::parse(&inp[..n]).is_none(), "wrong tag");
    }

    // ---- serial, ABI version 4: labels, parameters, launches ----
    #[test]
    fn serial_v4_readers() {
        // one waiting run with labels region=eu, tenant=b; parameters
        // limit=42 and period=5s; one launch, labelled tenant=b (the label
        // table's entry 1); encoded by hand (abi/ABI.md "Serial snapshot")
        let mut b = std::vec![0u8; 4096];
        let (labels, params, launches) = (128usize, 160usize, 192usize);
        let mut at = launches + 16;
        let put = |b: &mut [u8], i: usize, v: &[u8]| b[i..i + v.len()].copy_from_slice(v);
        let mut st = |b: &mut [u8], field: usize, v: &str| {
            put(b, field, &(at as u32).to_le_bytes());
            put(b, field + 4, &(v.len() as u32).to_le_bytes());
            put(b, at, v.as_bytes());
            at += v.len();
        };
        put(&mut b, 0, &5u32.to_le_bytes());
        put(&mut b, 4, &1u32.to_le_bytes());
        put(&mut b, 36, &1u32.to_le_bytes());
        put(&mut b, 48, &2u32.to_le_bytes());
        put(&mut b, 52, &2u32.to_le_bytes());
        put(&mut b, 56, &1u32.to_le_bytes());
        st(&mut b, 16, "nightly");
        st(&mut b, 24, "mine");
        put(&mut b, 64, &7u64.to_le_bytes());
        st(&mut b, 64 + 32, "w1");
        b[64 + 40] = WAITING;
        b[64 + 42] = 2;
        for (i, (k, v)) in [("region", "eu"), ("tenant", "b"), ("limit", "42"), ("period", "5s")].iter().enumerate() {
            st(&mut b, labels + 16 * i, k); // (params follow the labels: entries 2 and 3)
            st(&mut b, labels + 16 * i + 8, v);
        }
        put(&mut b, launches, &1234u64.to_le_bytes());
        put(&mut b, launches + 8, &1u32.to_le_bytes());
        put(&mut b, launches + 12, &1u32.to_le_bytes());
        let n = at;
        assert_eq!(params, labels + 32);
        {
            let s = Snapshot::parse(&b[..n]).unwrap();
            let w = s.waiting_at(0);
            assert_eq!((s.group(), s.policy(), w.id(), w.n_labels()), (&b"nightly"[..], &b"mine"[..], &b"w1"[..], 2));
            assert_eq!(s.label(&w, b"tenant"), Some(&b"b"[..]));
            assert_eq!(s.label(&w, b"region"), Some(&b"eu"[..]));
            assert_eq!(s.label(&w, b"zone"), None);
            assert_eq!(s.run_label(&w, 1), (&b"tenant"[..], &b"b"[..]));
            assert_eq!(s.run_label(&w, 2), (&b""[..], &b""[..]));
            assert_eq!(s.param(b"period"), Some(&b"5s"[..]));
            assert_eq!(s.param(b"tenant"), None, "a label is not a parameter");
            assert_eq!((s.param_u64(b"limit", 1), s.param_u64(b"period", 1), s.param_u64(b"none", 9)), (42, 1, 9));
            assert_eq!((s.n_launches(), s.launch_at(0), s.launch_label(0, b"tenant")), (1, 1234, Some(&b"b"[..])));
            assert_eq!(s.launch_label(0, b"region"), None);
        }
        // tenant's value now runs past the end of the record: it reads as empty
        put(&mut b, labels + 16 + 8, &(n as u32).to_le_bytes());
        let s = Snapshot::parse(&b[..n]).unwrap();
        assert_eq!(s.label(&s.waiting_at(0), b"tenant"), Some(&b""[..]));
    }

    // ---- allocation ----
    use super::testing::{alloc_snapshot, order, ARun, ASnap};
    use std::cell::RefCell;
    use std::string::String;
    use std::vec::Vec;

    std::thread_local! {
        static SEEN: RefCell<Vec<String>> = RefCell::new(Vec::new());
        static ASK: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    }
    fn text(b: &[u8]) -> String { String::from_utf8_lossy(b).into_owned() }

    /// Records what it reads, pushes the order the test asks.
    struct Probe;
    impl AllocationPolicy for Probe {
        fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision) {
            let mut seen = std::vec![std::format!(
                "now={} free={} total={} launched={} oldest={} runs={}",
                s.now(), s.free(), s.total(), s.launched_total(), s.oldest(), s.n_runs()
            )];
            for r in s.runs() {
                let labels: Vec<String> = (0..r.n_labels()).map(|j| s.run_label(&r, j)).map(|l| text(l.0) + "=" + &text(l.1)).collect();
                seen.push(std::format!(
                    "{} {} seq={} at={} prio={} slots={} idx={} [{}] tenant={:?}",
                    text(r.id()), text(r.group()), r.seq(), r.launched_at(), r.priority(), r.slots(), r.index(),
                    labels.join(","), s.label(&r, b"tenant").map(text)
                ));
            }
            for w in s.workers() {
                seen.push(std::format!("worker {} {}/{}", text(w.worker), w.free, w.slots));
            }
            for u in s.usages() {
                seen.push(std::format!("usage {}/{} {}/{}", text(u.key), text(u.value), u.slots, u.runs));
            }
            seen.push(std::format!(
                "used a={} ga={} zz={} weights={:?} limit={} bad={}",
                s.used(b"tenant", b"a"), s.used(b"", b"ga"), s.used(b"tenant", b"zz"),
                s.param(b"weights").map(text), s.param_u64(b"limit", 7), s.param_u64(b"weights", 7)
            ));
            SEEN.with(|x| *x.borrow_mut() = seen);
            ASK.with(|a| {
                for &i in a.borrow().iter() {
                    d.push(i)
                }
            });
        }
    }

    fn probe(snap: &ASnap, ask: &[usize]) -> (Vec<String>, Vec<usize>, usize) {
        let (mut inp, mut out) = (std::vec![0u8; 8192], std::vec![0u8; 4096]);
        let n = alloc_snapshot(&mut inp, snap);
        ASK.with(|a| *a.borrow_mut() = ask.to_vec());
        let m = decide_allocation_into::<Probe>(&inp[..n], &mut out).unwrap();
        (SEEN.with(|x| x.borrow().clone()), order(&out[..m]).collect(), m)
    }

    const L1: &[(&str, &str)] = &[("region", "eu"), ("tenant", "b")];
    fn snap3<'a>(runs: &'a [ARun<'a>]) -> ASnap<'a> {
        ASnap {
            now: 99, free: 3, total: 12, launched_total: 9, oldest: 2, runs,
            workers: &[("w-1", 4, 1), ("w-2", 8, 2)],
            usage: &[("", "ga", 5, 2), ("tenant", "a", 3, 1)],
            params: &[("fair_label", "tenant"), ("limit", "42"), ("weights", "a=2,b=1")],
            ..ASnap::default()
        }
    }
    fn runs3() -> [ARun<'static>; 3] {
        [
            ARun { id: "r0", group: "ga", seq: 11, launched_at: 1000, ..ARun::default() },
            ARun { id: "r1", group: "gb", seq: 12, priority: -4, slots: 3, labels: L1, launched_at: 1234, ..ARun::default() },
            ARun { id: "r2", group: "gb", seq: 13, slots: 1, ..ARun::default() },
        ]
    }

    #[test]
    fn allocation_readers() {
        let runs = runs3();
        let (seen, ord, m) = probe(&snap3(&runs), &[2, 0, 1]);
        assert_eq!(ord, [2, 0, 1]);
        assert_eq!(m, 16 + 4 * 3); // (no worker named: no placement table)
        assert_eq!(
            seen,
            [
                "now=99 free=3 total=12 launched=9 oldest=2 runs=3",
                "r0 ga seq=11 at=1000 prio=0 slots=1 idx=0 [] tenant=None",
                "r1 gb seq=12 at=1234 prio=-4 slots=3 idx=1 [region=eu,tenant=b] tenant=Some(\"b\")",
                "r2 gb seq=13 at=0 prio=0 slots=1 idx=2 [] tenant=None",
                "worker w-1 1/4",
                "worker w-2 2/8",
                "usage /ga 5/2",
                "usage tenant/a 3/1",
                "used a=3 ga=5 zz=0 weights=Some(\"a=2,b=1\") limit=42 bad=7",
            ]
        );
        // launched_total below the runs reads as their count, oldest above it as it
        let s = ASnap { launched_total: 1, oldest: 50, ..snap3(&runs) };
        assert_eq!(probe(&s, &[]).0[0], "now=99 free=3 total=12 launched=3 oldest=3 runs=3");
    }

    #[test]
    fn allocation_placement() {
        // requirements, worker profiles, takes, and a decision that names workers
        const GPU: &[(&str, &str)] = &[("gpu", "yes")];
        const ZA: &[(&str, &str)] = &[("zone", "a")];
        const ZB: &[(&str, &str)] = &[("gpu", "yes"), ("zone", "b")];
        // preferences (version 6): p0 prefers zone a (5) and gpu (2), p2 zone b (1)
        let runs = [
            ARun { id: "p0", group: "etl-daily", seq: 1, slots: 1, prefer: &[("gpu", "yes", 2), ("zone", "a", 5)], ..Default::default() },
            ARun { id: "p1", group: "train", seq: 2, slots: 2, labels: L1, require: GPU, ..Default::default() },
            ARun { id: "p2", group: "report", seq: 3, slots: 1, prefer: &[("zone", "b", 1)], ..Default::default() },
        ];
        let workers: &[(&str, u32, u32)] = &[("a1", 4, 4), ("b1", 4, 4), ("c1", 2, 2)];
        let profiles: &[(&[(&str, &str)], &str)] = &[(ZA, ""), (ZB, "train,etl-*"), (&[], "*-daily")];
        let snap = ASnap { free: 10, total: 10, runs: &runs, workers, profiles, ..Default::default() };
        let (mut inp, mut out) = (std::vec![0u8; 8192], std::vec![0u8; 4096]);
        let n = alloc_snapshot(&mut inp, &snap);
        let s = AllocationSnapshot::parse(&inp[..n]).unwrap();
        let r1 = s.run(1);
        assert_eq!((r1.n_require(), s.run_require(&r1, 0)), (1, (&b"gpu"[..], &b"yes"[..])));
        assert_eq!(s.label(&r1, b"tenant"), Some(&b"b"[..]), "labels are still read apart from requirements");
        assert_eq!((s.worker_n_labels(1), s.worker_label(1, b"zone"), s.worker_groups(1)), (2, Some(&b"b"[..]), &b"train,etl-*"[..]));
        let takes: String = (0..3).flat_map(|w| (0..3).map(move |i| (w, i))).map(|(w, i)| if s.takes(w, &s.run(i)) { '1' } else { '0' }).collect();
        assert_eq!(takes, "101110100");
        assert_eq!((s.n_prefer(), s.prefer(0)), (3, (0, &b"gpu"[..], &b"yes"[..], 2)));
        assert_eq!(s.prefer(2), (2, &b"zone"[..], &b"b"[..], 1));
        let scores: Vec<u32> = (0..3).flat_map(|w| (0..3).map(move |i| (w, i))).map(|(w, i)| s.score(w, &s.run(i))).collect();
        assert_eq!(scores, [5, 0, 0, 2, 0, 1, 0, 0, 0]);
        assert!(AllocationSnapshot::parse(&inp[..n - 1]).is_some(), "strings are checked when read");
        assert!(glob(b"a*b*c", b"axxbyyc") && !glob(b"a*b*c", b"axxcyyb") && glob(b"*", b"") && !glob(b"etl", b"etl-x"));

        struct Placer;
        impl AllocationPolicy for Placer {
            fn decide(_: &AllocationSnapshot, d: &mut AllocationDecision) {
                d.place(2, HOST_CHOOSES);
                d.place(1, 1);
                d.place(0, 2);
                // sorting keeps each run's worker: by index
                let (n, mut ks) = (d.len(), std::vec::Vec::new());
                for k in 0..n {
                    ks.push((d.at(k), d.worker_at(k)));
                }
                assert_eq!(ks, [(2, HOST_CHOOSES), (1, 1), (0, 2)]);
            }
        }
        let m = decide_allocation_into::<Placer>(&inp[..n], &mut out).unwrap();
        assert_eq!(m, 16 + 8 * 3);
        assert_eq!(order(&out[..m]).collect::<Vec<_>>(), [2, 1, 0]);
        assert_eq!(super::testing::placed(&out[..m]).collect::<Vec<_>>(), [HOST_CHOOSES, 1, 2]);

        struct Sorted;
        impl AllocationPolicy for Sorted {
            fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision) {
                d.place(2, 0);
                d.place(0, 2);
                d.push(1);
                d.sort_by(s, |a, b| a.seq().cmp(&b.seq()));
            }
        }
        let m = decide_allocation_into::<Sorted>(&inp[..n], &mut out).unwrap();
        assert_eq!(order(&out[..m]).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(super::testing::placed(&out[..m]).collect::<Vec<_>>(), [2, HOST_CHOOSES, 0]);
    }

    #[test]
    fn allocation_order_is_bounded() {
        let runs = runs3();
        // an index past the runs is dropped; at most one entry per run
        let (_, ord, _) = probe(&snap3(&runs), &[7, 1, 3, 0, 2, 1]);
        assert_eq!(ord, [1, 0, 2]);
    }

    #[test]
    fn allocation_malformed_input_is_refused() {
        let runs = runs3();
        let (mut inp, mut out) = ([0u8; 4096], [0u8; 4096]);
        let n = alloc_snapshot(&mut inp, &snap3(&runs));
        assert!(AllocationSnapshot::parse(&inp[..n]).is_some());
        assert!(AllocationSnapshot::parse(&inp[..40]).is_none(), "short");
        assert!(AllocationSnapshot::parse(&inp[..96]).is_none(), "3 runs do not fit");
        assert!(decide_allocation_into::<Probe>(&inp[..n], &mut out[..20]).is_none(), "no room for the order");
        inp[0] = 5;
        assert!(AllocationSnapshot::parse(&inp[..n]).is_none(), "a serial snapshot's tag");
        inp[0] = 6;
        // r1's id now runs past the end of the record: it reads as empty
        inp[48 + 48 + 24..48 + 48 + 28].copy_from_slice(&((n - 1) as u32).to_le_bytes());
        let s = AllocationSnapshot::parse(&inp[..n]).unwrap();
        assert_eq!(s.run(1).id(), b"");
        assert_eq!(s.run(1).group(), b"gb");
    }

    struct ByPriority;
    impl AllocationPolicy for ByPriority {
        fn decide(s: &AllocationSnapshot, d: &mut AllocationDecision) {
            for i in 0..s.n_runs() {
                d.push(i);
            }
            d.sort_by(s, |a, b| b.priority().cmp(&a.priority()).then(a.seq().cmp(&b.seq())));
        }
    }

    #[test]
    fn allocation_sort_by() {
        let ids: Vec<String> = (0..300).map(|i| std::format!("m{}", i)).collect();
        let runs: Vec<ARun> = (0..300u64)
            .map(|i| ARun { id: &ids[i as usize], group: "g", seq: (i * 7919) % 1009, priority: ((i * 37) % 11) as i32 - 5, slots: 1, ..ARun::default() })
            .collect();
        let (mut inp, mut out) = (std::vec![0u8; 1 << 16], std::vec![0u8; 4096]);
        for k in [0usize, 1, 2, 3, 17, 300] {
            let n = alloc_snapshot(&mut inp, &ASnap { free: 1, runs: &runs[..k], ..ASnap::default() });
            let m = decide_allocation_into::<ByPriority>(&inp[..n], &mut out).unwrap();
            let mut want: Vec<usize> = (0..k).collect();
            want.sort_by(|&a, &b| runs[b].priority.cmp(&runs[a].priority).then(runs[a].seq.cmp(&runs[b].seq)));
            assert_eq!(order(&out[..m]).collect::<Vec<_>>(), want, "{} runs", k);
        }
    }
}
