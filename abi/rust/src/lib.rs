//! The wasmsched plugin SDK for Rust (ABI version 3, `abi/ABI.md`).
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
//! Build with `cargo build --release --target wasm32-wasi` (see
//! docs/sdk-rust.md); the policy logic tests natively with `cargo test
//! --no-default-features` against [`testing`].
#![cfg_attr(not(test), no_std)]

use core::ptr;

/// The ABI version this SDK exports.
pub const ABI_VERSION: i32 = 4;
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
    pub fn param_u64(&self, name: &[u8], def: u64) -> u64 {
        match self.param(name) {
            Some(v) if !v.is_empty() && v.len() <= 19 && v.iter().all(|c| c.is_ascii_digit()) => {
                v.iter().fold(0u64, |x, c| x * 10 + (c - b'0') as u64)
            }
            _ => def,
        }
    }
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

/// A serial policy: append every action it wants for the snapshot.
pub trait SerialPolicy {
    fn decide(s: &Snapshot, d: &mut Decision);
}

/// A slot-reuse policy: one verdict per slot, in order, or fail.
pub trait ReusePolicy {
    fn decide(r: &ReuseRequest, d: &mut ReuseDecision);
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
}
