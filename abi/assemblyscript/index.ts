// The wasmsched plugin SDK for AssemblyScript (ABI version 6, abi/ABI.md).
//
// No allocation on the decision path, no imports but WASI's fd_write (for
// an abort's message): readers are zero-copy views of the input buffer
// (@unmanaged classes laid over the records, and string views packed in a
// u64), the decision writer encodes in place, and both buffers are
// allocated once and grown when a call needs more. A policy is one
// function and two lines of exports:
//
//     import { Snapshot, Decision, decideSerial } from "wasmsched";
//     export { wasmsched_abi_version, wasmsched_input, serialKind as wasmsched_kind } from "wasmsched";
//     export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); }
//
//     function decide(s: Snapshot, d: Decision): void {
//       const free = <i64>s.maxActive() - <i64>s.nActive;
//       for (let i: u32 = 0; <i64>i < free && i < s.nWaiting; i++) {
//         d.launch(s.waiting(i), "oldest waiting run, below max_active");
//       }
//     }
//
// A slot-reuse policy uses decideReuse and reuseKind, an allocation policy
// decideAllocation and allocationKind. `wasmsched policy build DIR` builds
// a project whose entry is DIR/assembly/index.ts, with this file as the
// package "wasmsched" (docs/sdk-assemblyscript.md).
//
// A record the host sends is checked before the policy runs (tag, counts,
// the tables inside the record); a string reference outside the record
// reads as empty, and nothing reads out of bounds.

// ---- constants ----

/** The ABI version this SDK exports. */
export const ABI_VERSION: i32 = 6;
/** Reasons are cut to this many bytes (the host's limit). */
export const MAX_REASON: i32 = 256;

/** Run states. */
export const WAITING: u8 = 1;
export const LAUNCHED: u8 = 2;
export const RUNNING: u8 = 3;
export const STOPPING: u8 = 4;

/** The bounds of a wake (ms from the decision) the host holds it to. */
export const MIN_WAKE_INTERVAL: i64 = 100;
export const MAX_WAKE_AHEAD: i64 = 24 * 3600 * 1000;

/** Slot-reuse verdicts. */
export const REUSE: u8 = 1;
export const REALLOCATE: u8 = 2;

/** An allocation decision's worker index that leaves the worker to the host. */
export const HOST_CHOOSES: u32 = 0xffffffff;

const LAUNCH: u32 = 1;
const DISCARD: u32 = 2;
const STOP: u32 = 3;
const DISCARD_BELOW: u32 = 4;
const WAKE: u32 = 5;

/** The most a record or a decision may be (the host's limit). */
const MAX_BUFFER: u64 = 64 << 20;

// ---- string views ----

/**
 * A view of UTF-8 bytes in the input: the address in the high 32 bits and
 * the length in the low ones (0: empty). Valid during the call only.
 */
export type Str = u64;

/** The empty view. */
export const EMPTY: Str = 0;

// @ts-ignore: decorator
@inline export function strPtr(s: Str): usize { return <usize>(s >>> 32); }
// @ts-ignore: decorator
@inline export function strLen(s: Str): u32 { return <u32>(s & 0xffffffff); }
// @ts-ignore: decorator
@inline function mkStr(p: usize, n: u32): Str { return (<u64>p << 32) | <u64>n; }

/** Whether s holds the bytes of lit (in UTF-8). */
export function strEq(s: Str, lit: string): bool {
  const n = strLen(s);
  const p = strPtr(s);
  const ln = lit.length;
  // the common case, an ASCII literal: compared without encoding
  if (<u32>ln == n) {
    let ascii = true;
    for (let i = 0; i < ln; i++) {
      const c = load<u16>(changetype<usize>(lit) + (<usize>i << 1));
      if (c >= 0x80) { ascii = false; break; }
      if (<u32>load<u8>(p + <usize>i) != <u32>c) return false;
    }
    if (ascii) return true;
  }
  if (<u32>String.UTF8.byteLength(lit) != n) return false;
  const tmp = scratch(n);
  String.UTF8.encodeUnsafe(changetype<usize>(lit), ln, tmp);
  return memory.compare(tmp, p, n) == 0;
}

/** Whether a and b hold the same bytes. */
export function strSame(a: Str, b: Str): bool {
  const n = strLen(a);
  return n == strLen(b) && memory.compare(strPtr(a), strPtr(b), n) == 0;
}

/** s as a non-negative decimal integer (def when empty or not one). */
export function strU64(s: Str, def: u64): u64 {
  const n = strLen(s);
  if (n == 0 || n > 19) return def;
  const p = strPtr(s);
  let x: u64 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const c = <u32>load<u8>(p + <usize>i);
    if (c < 0x30 || c > 0x39) return def;
    x = x * 10 + <u64>(c - 0x30);
  }
  return x;
}

/**
 * s as a Go duration ("300ms", "1.5s", "2m30s", "168h") in milliseconds
 * (rounded down), def when empty or not one: the form the host checks a
 * `duration` parameter against.
 */
export function strDurationMs(s: Str, def: i64): i64 {
  const n = strLen(s);
  const p = strPtr(s);
  if (n == 0) return def;
  let i: u32 = 0;
  let neg = false;
  const c0 = load<u8>(p);
  if (c0 == 0x2d || c0 == 0x2b) { neg = c0 == 0x2d; i++; }
  if (n - i == 1 && load<u8>(p + <usize>i) == 0x30) return 0; // "0"
  let total: f64 = 0;
  let any = false;
  while (i < n) {
    let v: f64 = 0, scale: f64 = 1, digits = 0, frac = false;
    for (; i < n; i++) {
      const c = load<u8>(p + <usize>i);
      if (c >= 0x30 && c <= 0x39) {
        v = v * 10 + <f64>(c - 0x30);
        if (frac) scale *= 10;
        digits++;
      } else if (c == 0x2e && !frac) {
        frac = true;
      } else break;
    }
    if (digits == 0) return def;
    let unit: f64 = 0;
    const u0: u32 = i < n ? load<u8>(p + <usize>i) : 0;
    const u1: u32 = i + 1 < n ? load<u8>(p + <usize>i + 1) : 0;
    if (u0 == 0x6e && u1 == 0x73) { unit = 1e-6; i += 2; } // ns
    else if (u0 == 0x75 && u1 == 0x73) { unit = 1e-3; i += 2; } // us
    else if (u0 == 0xc2 && u1 == 0xb5 && i + 2 < n && load<u8>(p + <usize>i + 2) == 0x73) { unit = 1e-3; i += 3; } // µs
    else if (u0 == 0x6d && u1 == 0x73) { unit = 1; i += 2; } // ms
    else if (u0 == 0x73) { unit = 1e3; i += 1; } // s
    else if (u0 == 0x6d) { unit = 60e3; i += 1; } // m
    else if (u0 == 0x68) { unit = 3600e3; i += 1; } // h
    else return def;
    total += v / scale * unit;
    any = true;
  }
  if (!any || total > 9.2e15) return def;
  const ms = <i64>Math.floor(total);
  return neg ? -ms : ms;
}

/** s decoded to a string (allocates: for tests and messages, not the decision path). */
export function strToString(s: Str): string {
  return String.UTF8.decodeUnsafe(strPtr(s), strLen(s));
}

// ---- little-endian reads of a record (wasm is little-endian) ----

// @ts-ignore: decorator
@inline function u32at(p: usize): u32 { return load<u32>(p); }
// @ts-ignore: decorator
@inline function u64at(p: usize): u64 { return load<u64>(p); }

/** A string reference (u32 offset, u32 length) at field of record b[0:len], checked: outside it reads as empty. */
function view(b: usize, len: u32, field: usize): Str {
  const off = <u64>u32at(field);
  const n = <u64>u32at(field + 4);
  if (off + n > <u64>len) return EMPTY;
  return mkStr(b + <usize>off, <u32>n);
}

/** Whether the string reference at field lies inside a record of len bytes. */
function strOK(field: usize, len: u32): bool {
  return <u64>u32at(field) + <u64>u32at(field + 4) <= <u64>len;
}

// ---- records laid over the input ----

/** A run of a serial snapshot (64 bytes) or of a reuse request (48). */
@unmanaged
export class Run {
  /** Its namespace-wide submit order. */
  seq: u64;
  /** When it was submitted (unix ms). */
  submittedAt: i64;
  /** When it started (unix ms; 0 while waiting). */
  startedAt: i64;
  priority: i32;
  slots: u32;
  idOff: u32;
  idLen: u32;
  /** WAITING, LAUNCHED, RUNNING or STOPPING. */
  state: u8;
  private _pad: u8;
  /** Its labels (a version 4 snapshot's run). */
  nLabels: u16;
  labelsFirst: u32;
  /** When it became due (unix ms; 0: at once). */
  notBefore: i64;
  /** Its attempt, of maxAttempts. */
  attempt: u32;
  maxAttempts: u32;
}

/** The group's recent launch i of a snapshot's launch table (16 bytes). */
@unmanaged
class LaunchEntry {
  at: i64;
  labelsFirst: u32;
  nLabels: u32;
}

// ---- serial snapshot (tag 5: 64-byte header and runs, then the label
// table, the group's parameters and its recent launches) ----

/** A serial snapshot: the group, its active runs and its waiting window. */
export class Snapshot {
  /** The record and its length. */
  b: usize = 0;
  len: u32 = 0;
  /** Active runs (LAUNCHED, RUNNING, STOPPING), then waiting ones, seq ascending. */
  nActive: u32 = 0;
  nWaiting: u32 = 0;
  nLabels: u32 = 0;
  nParams: u32 = 0;
  nLaunches: u32 = 0;
  labels: usize = 0;
  params: usize = 0;
  launches: usize = 0;

  /** The group's max_active (at least 1). */
  maxActive(): u32 { const m = u32at(this.b + 4); return m ? m : 1; }
  /** The host's clock (unix ms). */
  now(): i64 { return <i64>u64at(this.b + 8); }
  /** The group's name. */
  group(): Str { return view(this.b, this.len, this.b + 16); }
  /** The group's WAITING runs in all (>= nWaiting). */
  waitingTotal(): u32 { const t = u32at(this.b + 40); return t > this.nWaiting ? t : this.nWaiting; }
  /** The waiting list is a window: its oldest and its newest runs. */
  truncated(): bool { return this.waitingTotal() > this.nWaiting; }
  /** How many of the waiting list are the oldest part of the window. */
  waitingOldest(): u32 { const o = u32at(this.b + 44); return o < this.nWaiting ? o : this.nWaiting; }
  /** Active run i (i < nActive). */
  active(i: u32): Run { return changetype<Run>(this.b + 64 + 64 * <usize>i); }
  /** Waiting run i (i < nWaiting), the oldest first. */
  waiting(i: u32): Run { return changetype<Run>(this.b + 64 + 64 * (<usize>this.nActive + <usize>i)); }
  /** A run's id (checked when read: one outside the record reads as empty). */
  runId(r: Run): Str { return view(this.b, this.len, changetype<usize>(r) + 32); }
  /** Label i of run r (i < r.nLabels), by key: its key. */
  runLabelKey(r: Run, i: u32): Str { return this.entry(this.labels, this.nLabels, i < <u32>r.nLabels ? <u64>r.labelsFirst + i : 0xffffffff, 0); }
  /** Label i of run r: its value. */
  runLabelValue(r: Run, i: u32): Str { return this.entry(this.labels, this.nLabels, i < <u32>r.nLabels ? <u64>r.labelsFirst + i : 0xffffffff, 8); }
  /** Whether run r carries label key. */
  hasLabel(r: Run, key: string): bool { return find(this.b, this.len, this.labels, this.nLabels, r.labelsFirst, r.nLabels, key) != NOT_FOUND; }
  /** The value of run r's label key (empty when it has none: hasLabel tells). */
  labelValue(r: Run, key: string): Str { return found(find(this.b, this.len, this.labels, this.nLabels, r.labelsFirst, r.nLabels, key)); }
  /** Whether the group sets parameter name (group set --param). */
  hasParam(name: string): bool { return find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name) != NOT_FOUND; }
  /** The group's parameter name (empty when unset). */
  param(name: string): Str { return found(find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name)); }
  /** A parameter as a non-negative integer (def when unset or not one). */
  paramU64(name: string, def: u64): u64 {
    const v = find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name);
    return v == NOT_FOUND ? def : strU64(v, def);
  }
  /** A `duration` parameter in milliseconds (def when unset or not one). */
  paramDurationMs(name: string, def: i64): i64 {
    const v = find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name);
    return v == NOT_FOUND ? def : strDurationMs(v, def);
  }
  /** How many of the group's runs may be launched now: maxActive less the active ones (0 when none). */
  free(): u32 { const m = this.maxActive(); return this.nActive < m ? m - this.nActive : 0; }
  /** When the group's recent launch i (oldest first) was (unix ms). */
  launchAt(i: u32): i64 { return i < this.nLaunches ? changetype<LaunchEntry>(this.launches + 16 * <usize>i).at : 0; }
  /** How many labels launch i's run carried. */
  launchNLabels(i: u32): u32 { return i < this.nLaunches ? changetype<LaunchEntry>(this.launches + 16 * <usize>i).nLabels : 0; }
  /** Label j of launch i: its key, and its value. */
  launchLabelKey(i: u32, j: u32): Str { return this.entry(this.labels, this.nLabels, this.launchLabel(i, j), 0); }
  launchLabelValue(i: u32, j: u32): Str { return this.entry(this.labels, this.nLabels, this.launchLabel(i, j), 8); }

  private launchLabel(i: u32, j: u32): u64 {
    if (i >= this.nLaunches || j >= this.launchNLabels(i)) return 0xffffffff;
    return <u64>changetype<LaunchEntry>(this.launches + 16 * <usize>i).labelsFirst + j;
  }
  private entry(table: usize, n: u32, i: u64, at: usize): Str {
    return i < <u64>n ? view(this.b, this.len, table + 16 * <usize>i + at) : EMPTY;
  }
}

/** find's "no such key": a value no view takes (an address past 4 GiB). */
const NOT_FOUND: Str = 0xffffffffffffffff;
// @ts-ignore: decorator
@inline function found(v: Str): Str { return v == NOT_FOUND ? EMPTY : v; }

/** The value of key among count entries of a label table of n from first (NOT_FOUND when absent). */
function find(b: usize, len: u32, table: usize, n: u32, first: u32, count: u32, key: string): Str {
  for (let i: u32 = 0; i < count; i++) {
    const k = <u64>first + i;
    if (k >= <u64>n) break;
    const e = table + 16 * <usize>k;
    if (strEq(view(b, len, e), key)) return view(b, len, e + 8);
  }
  return NOT_FOUND;
}

// ---- serial decision writer (tag 2) ----

/**
 * A serial decision, written in place. Actions name their run by its
 * index in the snapshot (the indexed form of ABI version 3): give the Run
 * the snapshot's readers returned; no id is copied.
 */
export class Decision {
  b: usize = 0;
  runs: usize = 0;
  /** Actions written, and the slots reserved for them. */
  n: u32 = 0;
  max: u32 = 0;
  str: u32 = 0;
  below: bool = false;
  wake: i64 = 0;
  why: usize = 0;
  whyOff: u32 = 0;
  whyLen: u32 = 0;

  /** Launch a WAITING run of the snapshot. */
  launch(r: Run, why: string): void { this.add(LAUNCH, this.index(r), why); }
  /** Discard a WAITING run. */
  discard(r: Run, why: string): void { this.add(DISCARD, this.index(r), why); }
  /** Stop a LAUNCHED or RUNNING run. */
  stop(r: Run, why: string): void { this.add(STOP, this.index(r), why); }
  /**
   * Discard every WAITING run below seq that the other actions leave
   * WAITING (at most once a decision; seq <= the newest waiting seq + 1).
   */
  discardBelow(seq: u64, why: string): void {
    if (this.below) return;
    this.below = true;
    this.add(DISCARD_BELOW, seq, why);
  }
  /** Ask to be decided again at unix ms t (the earliest of several calls). */
  wakeAt(t: i64): void {
    if (t != 0 && (this.wake == 0 || t < this.wake)) this.wake = t;
  }
  /** How many actions were written. */
  get length(): u32 { return this.n; }

  private index(r: Run): u64 { return <u64>((changetype<usize>(r) - this.runs) / 64); }
  private add(kind: u32, ref: u64, why: string): void {
    if (this.n >= this.max) return; // more actions than runs: the host would refuse it anyway
    const a = this.b + 16 + 20 * <usize>this.n;
    store<u32>(a, kind);
    store<u64>(a + 4, ref);
    // a reason repeated from the previous action (the common case: one
    // literal per kind) is written once and referenced again
    const w = changetype<usize>(why);
    if (w != this.why) {
      const n = writeReason(this.b + <usize>this.str, why);
      this.why = w;
      this.whyOff = this.str;
      this.whyLen = n;
      this.str += n;
    }
    store<u32>(a + 12, this.whyOff);
    store<u32>(a + 16, this.whyLen);
    this.n++;
  }
}

// The UTF-8 of the reasons that are literals (in the module's static data,
// below __heap_base: their addresses never change), encoded once each and
// copied afterwards: REASONS entries of (the literal's address, the bytes'
// address, their length), found by the address's hash.
const REASONS: u32 = 64;
let reasonCache: usize = 0;

/** Writes why in UTF-8 at dst, cut to MAX_REASON bytes on a character boundary; returns its length. */
function writeReason(dst: usize, why: string): u32 {
  const w = changetype<usize>(why);
  if (w < __heap_base) {
    if (reasonCache == 0) {
      reasonCache = heap.alloc(<usize>REASONS * 12);
      memory.fill(reasonCache, 0, <usize>REASONS * 12);
    }
    let h = <u32>((w >>> 2) * 0x9e3779b1) >>> 26; // 6 bits: REASONS slots
    for (let k: u32 = 0; k < REASONS; k++) {
      const e = reasonCache + 12 * <usize>((h + k) & (REASONS - 1));
      const key = load<u32>(e);
      if (key == <u32>w) {
        const n = load<u32>(e + 8);
        memory.copy(dst, <usize>load<u32>(e + 4), <usize>n);
        return n;
      }
      if (key == 0) {
        const n = encodeReason(dst, why);
        const p = heap.alloc(<usize>n);
        memory.copy(p, dst, <usize>n);
        store<u32>(e, <u32>w);
        store<u32>(e + 4, <u32>p);
        store<u32>(e + 8, n);
        return n;
      }
    }
  }
  return encodeReason(dst, why);
}

function encodeReason(dst: usize, why: string): u32 {
  const n = String.UTF8.byteLength(why);
  if (n <= MAX_REASON) {
    return <u32>String.UTF8.encodeUnsafe(changetype<usize>(why), why.length, dst);
  }
  const tmp = scratch(<u32>n);
  String.UTF8.encodeUnsafe(changetype<usize>(why), why.length, tmp);
  let cut = MAX_REASON;
  while (cut > 0 && (load<u8>(tmp + <usize>cut) & 0xc0) == 0x80) cut--;
  memory.copy(dst, tmp, <usize>cut);
  return <u32>cut;
}

// ---- reuse request (tag 3) and decision (tag 4) ----

/** A task slot of a reuse request (32 bytes). */
@unmanaged
export class TaskSlot {
  task: u32;
  /** The slot's index on its worker. */
  index: u32;
  workerOff: u32;
  workerLen: u32;
  tokenOff: u32;
  tokenLen: u32;
  flags: u8;
  /** The worker is alive. */
  get alive(): bool { return (this.flags & 1) != 0; }
  /** The slot is still held with the run's token. */
  get held(): bool { return (this.flags & 2) != 0; }
}

/** A restored run's slots after a failover: reuse or reallocate each. */
export class ReuseRequest {
  b: usize = 0;
  len: u32 = 0;
  nSlots: u32 = 0;
  now(): i64 { return <i64>u64at(this.b + 8); }
  group(): Str { return view(this.b, this.len, this.b + 16); }
  /** The restored run. */
  run(): Run { return changetype<Run>(this.b + 32); }
  /** Its id. */
  runId(): Str { return view(this.b, this.len, this.b + 64); }
  /** Slot i, in task order. */
  slot(i: u32): TaskSlot { return changetype<TaskSlot>(this.b + 80 + 32 * <usize>i); }
  /** The worker of slot s. */
  slotWorker(s: TaskSlot): Str { return view(this.b, this.len, changetype<usize>(s) + 8); }
}

/** A reuse decision: one verdict per slot, or fail the run. */
export class ReuseDecision {
  b: usize = 0;
  n: u32 = 0;
  max: u32 = 0;
  failed: bool = false;
  reason: string | null = null;
  /** The next slot's verdict: REUSE (only a slot alive and held) or REALLOCATE. */
  verdict(v: u8): void {
    if (this.n >= this.max) return;
    store<u8>(this.b + 24 + <usize>this.n, v);
    this.n++;
  }
  /** Fail the whole run (the verdicts are ignored). */
  fail(why: string): void { this.failed = true; this.reason = why; }
}

// ---- allocation snapshot (tag 6) and decision (tag 7) ----

/** A LAUNCHED run waiting for slots (48 bytes). */
@unmanaged
export class AllocRun {
  seq: u64;
  launchedAt: i64;
  priority: i32;
  private _slots: u32;
  idOff: u32;
  idLen: u32;
  groupOff: u32;
  groupLen: u32;
  labelsFirst: u32;
  /** Its labels, then (version 5) its requirements, in the label table. */
  nLabels: u16;
  nRequire: u16;
  /** The slots it needs, all at once. */
  get slots(): u32 { return this._slots ? this._slots : 1; }
}

/** A live worker of an allocation snapshot (16 bytes). */
@unmanaged
export class AllocWorker {
  idOff: u32;
  idLen: u32;
  /** The slots it registered, and how many are free. */
  slots: u32;
  free: u32;
}

/** What a group (key empty, value the group) or a label value holds now (24 bytes). */
@unmanaged
export class AllocUsage {
  keyOff: u32;
  keyLen: u32;
  valueOff: u32;
  valueLen: u32;
  slots: u32;
  runs: u32;
}

/** A worker's profile (ABI version 5, 16 bytes): its labels and groups. */
@unmanaged
class Profile {
  labelsFirst: u32;
  nLabels: u16;
  private _r: u16;
  groupsOff: u32;
  groupsLen: u32;
}

/** A run's preference (ABI version 6, 24 bytes). */
@unmanaged
export class Preference {
  /** The run's index in the snapshot. */
  run: u32;
  /** 1 to 1000. */
  weight: u32;
  keyOff: u32;
  keyLen: u32;
  valueOff: u32;
  valueLen: u32;
}

/** The runs waiting for slots, the live workers, what is in use, the namespace's parameters. */
export class AllocSnapshot {
  b: usize = 0;
  len: u32 = 0;
  nRuns: u32 = 0;
  nWorkers: u32 = 0;
  nUsage: u32 = 0;
  nLabels: u32 = 0;
  nParams: u32 = 0;
  workers: usize = 0;
  usage: usize = 0;
  labels: usize = 0;
  params: usize = 0;
  profiles: usize = 0;
  prefs: usize = 0;

  now(): i64 { return <i64>u64at(this.b + 8); }
  /** Free slots on live workers, and all of their slots. */
  free(): u32 { return u32at(this.b + 16); }
  total(): u32 { return u32at(this.b + 20); }
  /** The runs waiting for slots in all (>= nRuns: more makes the runs a window). */
  launchedTotal(): u32 { const t = u32at(this.b + 24); return t > this.nRuns ? t : this.nRuns; }
  /** How many of the runs are the queue's oldest (the rest its newest). */
  oldest(): u32 { const o = u32at(this.b + 28); return o < this.nRuns ? o : this.nRuns; }
  /** Run i (i < nRuns). */
  run(i: u32): AllocRun { return changetype<AllocRun>(this.b + 48 + 48 * <usize>i); }
  runId(r: AllocRun): Str { return view(this.b, this.len, changetype<usize>(r) + 24); }
  runGroup(r: AllocRun): Str { return view(this.b, this.len, changetype<usize>(r) + 32); }
  runLabelKey(r: AllocRun, i: u32): Str { return this.entry(i < <u32>r.nLabels ? <u64>r.labelsFirst + i : 0xffffffff, 0); }
  runLabelValue(r: AllocRun, i: u32): Str { return this.entry(i < <u32>r.nLabels ? <u64>r.labelsFirst + i : 0xffffffff, 8); }
  hasLabel(r: AllocRun, key: string): bool { return find(this.b, this.len, this.labels, this.nLabels, r.labelsFirst, r.nLabels, key) != NOT_FOUND; }
  labelValue(r: AllocRun, key: string): Str { return found(find(this.b, this.len, this.labels, this.nLabels, r.labelsFirst, r.nLabels, key)); }
  /** What a worker must carry to take run r (version 5): requirement i's key and value. */
  requireKey(r: AllocRun, i: u32): Str { return this.entry(this.reqAt(r, i), 0); }
  requireValue(r: AllocRun, i: u32): Str { return this.entry(this.reqAt(r, i), 8); }
  /** Live worker i. */
  worker(i: u32): AllocWorker { return changetype<AllocWorker>(this.workers + 16 * <usize>i); }
  workerId(i: u32): Str { return i < this.nWorkers ? view(this.b, this.len, this.workers + 16 * <usize>i) : EMPTY; }
  /** Usage entry i: the groups first, then the label values, each most slots first. */
  usageAt(i: u32): AllocUsage { return changetype<AllocUsage>(this.usage + 24 * <usize>i); }
  usageKey(i: u32): Str { return i < this.nUsage ? view(this.b, this.len, this.usage + 24 * <usize>i) : EMPTY; }
  usageValue(i: u32): Str { return i < this.nUsage ? view(this.b, this.len, this.usage + 24 * <usize>i + 8) : EMPTY; }
  /** The slots a group (label "", value the group) or a label value holds now. */
  used(label: string, value: Str): u32 {
    for (let i: u32 = 0; i < this.nUsage; i++) {
      if (strEq(this.usageKey(i), label) && strSame(this.usageValue(i), value)) return this.usageAt(i).slots;
    }
    return 0;
  }
  /** The namespace's allocation parameter name (empty when unset). */
  hasParam(name: string): bool { return find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name) != NOT_FOUND; }
  param(name: string): Str { return found(find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name)); }
  paramU64(name: string, def: u64): u64 {
    const v = find(this.b, this.len, this.params, this.nParams, 0, this.nParams, name);
    return v == NOT_FOUND ? def : strU64(v, def);
  }
  /** Worker i's labels (version 5). */
  workerNLabels(i: u32): u32 { return i < this.nWorkers ? <u32>this.profile(i).nLabels : 0; }
  workerLabelValue(i: u32, key: string): Str {
    if (i >= this.nWorkers) return EMPTY;
    const p = this.profile(i);
    return found(find(this.b, this.len, this.labels, this.nLabels, p.labelsFirst, p.nLabels, key));
  }
  /** The groups worker i serves (names or patterns with '*', comma-separated; empty: every group). */
  workerGroups(i: u32): Str { return i < this.nWorkers ? view(this.b, this.len, changetype<usize>(this.profile(i)) + 8) : EMPTY; }
  /** Whether worker i serves group g. */
  workerServes(i: u32, g: Str): bool {
    if (i >= this.nWorkers) return false;
    const gs = this.workerGroups(i);
    const n = strLen(gs);
    if (n == 0) return true;
    const p = strPtr(gs);
    for (let a: u32 = 0; a < n;) {
      let e = a;
      while (e < n && load<u8>(p + <usize>e) != 0x2c) e++;
      if (glob(p + <usize>a, e - a, strPtr(g), strLen(g))) return true;
      a = e + 1;
    }
    return false;
  }
  /** Whether worker i may take run r: it serves r's group and carries every label r requires. */
  workerTakes(i: u32, r: AllocRun): bool {
    if (!this.workerServes(i, this.runGroup(r))) return false;
    const p = this.profile(i);
    for (let j: u32 = 0; j < <u32>r.nRequire; j++) {
      const qk = this.requireKey(r, j), qv = this.requireValue(r, j);
      let ok = false;
      for (let k: u32 = 0; k < <u32>p.nLabels && !ok; k++) {
        const e = <u64>p.labelsFirst + k;
        ok = strSame(this.entry(e, 0), qk) && strSame(this.entry(e, 8), qv);
      }
      if (!ok) return false;
    }
    return true;
  }
  /** Preferences (version 6): every run's, runs ascending. */
  nPrefer(): u32 { return u32at(this.prefs); }
  prefer(k: u32): Preference { return changetype<Preference>(this.prefs + 8 + 24 * <usize>k); }
  preferKey(k: u32): Str { return k < this.nPrefer() ? view(this.b, this.len, this.prefs + 8 + 24 * <usize>k + 8) : EMPTY; }
  preferValue(k: u32): Str { return k < this.nPrefer() ? view(this.b, this.len, this.prefs + 8 + 24 * <usize>k + 16) : EMPTY; }
  /** Worker i's score for run r: the sum of the weights of r's preferences it carries. */
  score(r: AllocRun, i: u32): u32 {
    if (i >= this.nWorkers) return 0;
    const run = <u32>((changetype<usize>(r) - this.b - 48) / 48);
    const p = this.profile(i);
    let score: u32 = 0;
    const n = this.nPrefer();
    for (let k: u32 = 0; k < n; k++) {
      const q = this.prefer(k);
      if (q.run != run) {
        if (q.run > run) break;
        continue;
      }
      const qk = this.preferKey(k), qv = this.preferValue(k);
      for (let j: u32 = 0; j < <u32>p.nLabels; j++) {
        const e = <u64>p.labelsFirst + j;
        if (strSame(this.entry(e, 0), qk)) {
          if (strSame(this.entry(e, 8), qv)) score += q.weight;
          break;
        }
      }
    }
    return score;
  }

  private profile(i: u32): Profile { return changetype<Profile>(this.profiles + 16 * <usize>i); }
  private reqAt(r: AllocRun, i: u32): u64 { return i < <u32>r.nRequire ? <u64>r.labelsFirst + <u64>r.nLabels + i : 0xffffffff; }
  private entry(i: u64, at: usize): Str {
    return i < <u64>this.nLabels ? view(this.b, this.len, this.labels + 16 * <usize>i + at) : EMPTY;
  }
}

/** Whether g (gn bytes) matches pattern p (pn bytes; '*' matches any text). */
function glob(p: usize, pn: u32, g: usize, gn: u32): bool {
  let pi: u32 = 0, gi: u32 = 0, star = pn, mark: u32 = 0;
  while (gi < gn) {
    if (pi < pn && load<u8>(p + <usize>pi) == 0x2a) { star = pi++; mark = gi; }
    else if (pi < pn && load<u8>(p + <usize>pi) == load<u8>(g + <usize>gi)) { pi++; gi++; }
    else if (star < pn) { pi = star + 1; gi = ++mark; }
    else return false;
  }
  while (pi < pn && load<u8>(p + <usize>pi) == 0x2a) pi++;
  return pi == pn;
}

/** The order "a comes before b" of AllocDecision.sort. */
export type Before = (s: AllocSnapshot, a: AllocRun, b: AllocRun) => bool;

/** An allocation decision: the order in which runs get slots, and optionally their workers. */
export class AllocDecision {
  b: usize = 0;
  n: u32 = 0;
  max: u32 = 0;
  placed: bool = false;
  /** Run i of the snapshot gets slots next, on worker w (all of its slots there) or HOST_CHOOSES. */
  place(i: u32, w: u32): void {
    if (i >= this.max || this.n >= this.max) return;
    store<u32>(this.b + 16 + 4 * <usize>this.n, i);
    store<u32>(this.b + 16 + 4 * <usize>this.max + 4 * <usize>this.n, w); // moved after the order at the end
    if (w != HOST_CHOOSES) this.placed = true;
    this.n++;
  }
  /** Run i of the snapshot gets slots next (the host chooses the worker). */
  order(i: u32): void { this.place(i, HOST_CHOOSES); }
  get length(): u32 { return this.n; }
  /** The k-th index written. */
  at(k: u32): u32 { return k < this.n ? u32at(this.b + 16 + 4 * <usize>k) : 0; }
  /**
   * Sorts the order written so far so that run a comes before run b when
   * before(s, a, b): a heap sort in place, O(n log n), not stable (break
   * ties, by seq for one); a run's worker moves with it.
   */
  sort(s: AllocSnapshot, before: Before): void {
    let n = this.n;
    for (let i: u32 = n / 2; i > 0; i--) this.sift(s, before, i - 1, n);
    while (n > 1) {
      n--;
      this.swap(0, n);
      this.sift(s, before, 0, n);
    }
  }
  private sift(s: AllocSnapshot, before: Before, at: u32, n: u32): void {
    const o = this.b + 16;
    for (;;) {
      let c: u32 = 2 * at + 1;
      if (c >= n) return;
      // a max-heap of "comes last": the child that comes later
      if (c + 1 < n && before(s, s.run(load<u32>(o + 4 * <usize>c)), s.run(load<u32>(o + 4 * <usize>(c + 1))))) c++;
      if (!before(s, s.run(load<u32>(o + 4 * <usize>at)), s.run(load<u32>(o + 4 * <usize>c)))) return;
      this.swap(at, c);
      at = c;
    }
  }
  private swap(a: u32, b: u32): void {
    const o = this.b + 16, w = this.b + 16 + 4 * <usize>this.max;
    let x = load<u32>(o + 4 * <usize>a);
    store<u32>(o + 4 * <usize>a, load<u32>(o + 4 * <usize>b));
    store<u32>(o + 4 * <usize>b, x);
    x = load<u32>(w + 4 * <usize>a);
    store<u32>(w + 4 * <usize>a, load<u32>(w + 4 * <usize>b));
    store<u32>(w + 4 * <usize>b, x);
  }
}

// ---- checking a record and deciding into a buffer (what the exports
// run, and what tests call) ----

/** The output room a decision of the serial snapshot b[0:n] needs, 0 if b is not a valid one. */
export function serialOutSize(b: usize, n: u32): u64 {
  if (n < 64 || u32at(b) != 5) return 0;
  const na = <u64>u32at(b + 32), nw = <u64>u32at(b + 36);
  const nl = <u64>u32at(b + 48), np = <u64>u32at(b + 52), nh = <u64>u32at(b + 56);
  if (64 + 64 * (na + nw) + 16 * (nl + np + nh) > <u64>n) return 0;
  if (!strOK(b + 16, n) || !strOK(b + 24, n)) return 0;
  const max = na + nw + 2;
  return 16 + 20 * max + <u64>MAX_REASON * max;
}

let snap: Snapshot | null = null;
let dec: Decision | null = null;

/** Decides the valid serial snapshot b[0:n] with policy into out; returns the decision's length. */
export function decideSerialBuf(b: usize, n: u32, out: usize, policy: (s: Snapshot, d: Decision) => void): u32 {
  let s = snap;
  if (!s) { s = new Snapshot(); snap = s; }
  let d = dec;
  if (!d) { d = new Decision(); dec = d; }
  const na = u32at(b + 32), nw = u32at(b + 36);
  const nl = u32at(b + 48), np = u32at(b + 52), nh = u32at(b + 56);
  s.b = b; s.len = n; s.nActive = na; s.nWaiting = nw;
  s.nLabels = nl; s.nParams = np; s.nLaunches = nh;
  s.labels = b + 64 + 64 * (<usize>na + <usize>nw);
  s.params = s.labels + 16 * <usize>nl;
  s.launches = s.params + 16 * <usize>np;
  const max = na + nw + 1; // one more slot for a wake
  d.b = out; d.runs = b + 64; d.n = 0; d.max = max; d.str = 16 + 20 * (max + 1);
  d.below = false; d.wake = 0; d.why = 0; d.whyOff = 0; d.whyLen = 0;
  policy(s, d);
  if (d.wake != 0) { // the last action: kind 5, its time where a reference goes
    const a = out + 16 + 20 * <usize>d.n;
    store<u32>(a, WAKE);
    store<u64>(a + 4, <u64>d.wake);
    store<u64>(a + 12, 0);
    d.n++;
  }
  // the string area stays after the slots reserved: the slots not written
  // are a gap the host never reads (strings are located by offset)
  store<u32>(out, 2);
  store<u32>(out + 4, d.n);
  store<u64>(out + 8, 1); // flags: DecisionRunIndex
  return d.str;
}

/** The output room a decision of the reuse request b[0:n] needs, 0 if b is not a valid one. */
export function reuseOutSize(b: usize, n: u32): u64 {
  if (n < 80 || u32at(b) != 3) return 0;
  const ns = <u64>u32at(b + 4);
  if (80 + 32 * ns > <u64>n) return 0;
  if (!strOK(b + 16, n) || !strOK(b + 64, n)) return 0;
  for (let i: u64 = 0; i < ns; i++) {
    const sl = b + 80 + 32 * <usize>i;
    if (!strOK(sl + 8, n) || !strOK(sl + 16, n)) return 0;
  }
  return 24 + ns + <u64>MAX_REASON;
}

let req: ReuseRequest | null = null;
let rdec: ReuseDecision | null = null;

/** Decides the valid reuse request b[0:n] with policy into out; returns the decision's length. */
export function decideReuseBuf(b: usize, n: u32, out: usize, policy: (r: ReuseRequest, d: ReuseDecision) => void): u32 {
  let r = req;
  if (!r) { r = new ReuseRequest(); req = r; }
  let d = rdec;
  if (!d) { d = new ReuseDecision(); rdec = d; }
  r.b = b; r.len = n; r.nSlots = u32at(b + 4);
  d.b = out; d.n = 0; d.max = r.nSlots; d.failed = false; d.reason = null;
  policy(r, d);
  const end: u32 = 24 + d.n;
  let rn: u32 = 0;
  const why = d.reason;
  if (why !== null) rn = writeReason(out + <usize>end, why);
  store<u32>(out, 4);
  store<u32>(out + 4, d.failed ? 1 : 0);
  store<u32>(out + 8, rn ? end : 0);
  store<u32>(out + 12, rn);
  store<u32>(out + 16, d.failed ? 0 : d.n);
  store<u32>(out + 20, 0);
  return end + rn;
}

/** The output room a decision of the allocation snapshot b[0:n] needs, 0 if b is not a valid one. */
export function allocationOutSize(b: usize, n: u32): u64 {
  if (n < 48 || u32at(b) != 6) return 0;
  const nr = <u64>u32at(b + 4), nw = <u64>u32at(b + 32), nu = <u64>u32at(b + 36);
  const nl = <u64>u32at(b + 40), np = <u64>u32at(b + 44);
  const at = 48 + 48 * nr + 32 * nw + 24 * nu + 16 * (nl + np);
  if (at + 8 > <u64>n || at + 8 + 24 * <u64>u32at(b + <usize>at) > <u64>n) return 0;
  return 16 + 8 * nr;
}

let asnap: AllocSnapshot | null = null;
let adec: AllocDecision | null = null;

/** Decides the valid allocation snapshot b[0:n] with policy into out; returns the decision's length. */
export function decideAllocationBuf(b: usize, n: u32, out: usize, policy: (s: AllocSnapshot, d: AllocDecision) => void): u32 {
  let s = asnap;
  if (!s) { s = new AllocSnapshot(); asnap = s; }
  let d = adec;
  if (!d) { d = new AllocDecision(); adec = d; }
  const nr = u32at(b + 4), nw = u32at(b + 32), nu = u32at(b + 36);
  const nl = u32at(b + 40), np = u32at(b + 44);
  s.b = b; s.len = n; s.nRuns = nr; s.nWorkers = nw; s.nUsage = nu; s.nLabels = nl; s.nParams = np;
  s.workers = b + 48 + 48 * <usize>nr;
  s.usage = s.workers + 16 * <usize>nw;
  s.labels = s.usage + 24 * <usize>nu;
  s.params = s.labels + 16 * <usize>nl;
  s.profiles = s.params + 16 * <usize>np;
  s.prefs = s.profiles + 16 * <usize>nw;
  d.b = out; d.n = 0; d.max = nr; d.placed = false;
  policy(s, d);
  store<u32>(out, 7);
  store<u32>(out + 4, d.n);
  store<u64>(out + 8, 0);
  if (!d.placed) return 16 + 4 * d.n;
  // the workers, written past the room of a full order, follow the order
  store<u32>(out + 8, d.n);
  memory.copy(out + 16 + 4 * <usize>d.n, out + 16 + 4 * <usize>d.max, 4 * <usize>d.n);
  return 16 + 8 * d.n;
}

// ---- buffers and exports ----

let inBuf: usize = 0;
let inCap: u32 = 0;
let outBuf: usize = 0;
let outCap: u32 = 0;
let tmpBuf: usize = 0;
let tmpCap: u32 = 0;

/** grow returns a buffer of at least size bytes at p (cap: its size), reallocated when too small. */
// @ts-ignore: decorator
@inline function grown(p: usize, cap: u32, size: u32): usize {
  return p != 0 && size <= cap ? p : 0;
}

/** A scratch buffer of n bytes (string comparisons of non-ASCII text, long reasons). */
function scratch(n: u32): usize {
  if (tmpBuf == 0 || n > tmpCap) {
    tmpCap = n < 256 ? 256 : n;
    tmpBuf = heap.alloc(<usize>tmpCap);
  }
  return tmpBuf;
}

let paramsDecl: usize = 0;
let paramsLen: u32 = 0;

/**
 * The group parameters a policy reads, for its optional wasmsched_params
 * export: one line a parameter, six tab-separated fields (name, type
 * int|duration|bool|string, default, min, max, a line of doc; abi/ABI.md),
 * checked by the host at group set, push and activation:
 *
 *     export function wasmsched_params(): i64 {
 *       return declareParams("period\tduration\t1s\t1ms\t168h\tthe quiet period\n");
 *     }
 */
export function declareParams(decl: string): i64 {
  if (paramsDecl == 0) {
    const n = String.UTF8.byteLength(decl);
    paramsDecl = heap.alloc(<usize>n);
    String.UTF8.encodeUnsafe(changetype<usize>(decl), decl.length, paramsDecl);
    paramsLen = <u32>n;
  }
  return paramsLen == 0 ? 0 : <i64>((<u64>paramsDecl << 32) | <u64>paramsLen);
}

/** The ABI version (export it as wasmsched_abi_version). */
export function wasmsched_abi_version(): i32 { return ABI_VERSION; }
/** The policy kinds (export one as wasmsched_kind). */
export function serialKind(): i32 { return 1; }
export function reuseKind(): i32 { return 2; }
export function allocationKind(): i32 { return 3; }

/** The input buffer of at least size bytes (export it as wasmsched_input). */
export function wasmsched_input(size: i32): usize {
  if (size < 0 || <u64>size > MAX_BUFFER) return 0;
  if (grown(inBuf, inCap, <u32>size) == 0) {
    const cap: u32 = size < 65536 ? 65536 : <u32>size;
    inBuf = heap.alloc(<usize>cap);
    inCap = cap;
  }
  return inBuf;
}

/** ptr 0, error code 1: malformed input. */
const FAIL: i64 = 1;

function outFor(need: u64): usize {
  if (need == 0 || need > MAX_BUFFER) return 0;
  if (grown(outBuf, outCap, <u32>need) == 0) {
    const cap: u32 = need < 65536 ? 65536 : <u32>need;
    outBuf = heap.alloc(<usize>cap);
    outCap = cap;
  }
  return outBuf;
}

// @ts-ignore: decorator
@inline function result(out: usize, m: u32): i64 { return <i64>((<u64>out << 32) | <u64>m); }

/** wasmsched_decide of a serial policy: export function wasmsched_decide(len: i32): i64 { return decideSerial(len, decide); } */
export function decideSerial(len: i32, policy: (s: Snapshot, d: Decision) => void): i64 {
  if (inBuf == 0 || len < 8 || <u32>len > inCap) return FAIL;
  const out = outFor(serialOutSize(inBuf, <u32>len));
  if (out == 0) return FAIL;
  return result(out, decideSerialBuf(inBuf, <u32>len, out, policy));
}

/** wasmsched_decide of a slot-reuse policy. */
export function decideReuse(len: i32, policy: (r: ReuseRequest, d: ReuseDecision) => void): i64 {
  if (inBuf == 0 || len < 8 || <u32>len > inCap) return FAIL;
  const out = outFor(reuseOutSize(inBuf, <u32>len));
  if (out == 0) return FAIL;
  return result(out, decideReuseBuf(inBuf, <u32>len, out, policy));
}

/** wasmsched_decide of an allocation policy. */
export function decideAllocation(len: i32, policy: (s: AllocSnapshot, d: AllocDecision) => void): i64 {
  if (inBuf == 0 || len < 8 || <u32>len > inCap) return FAIL;
  const out = outFor(allocationOutSize(inBuf, <u32>len));
  if (out == 0) return FAIL;
  return result(out, decideAllocationBuf(inBuf, <u32>len, out, policy));
}

// ---- abort, trace and seed: AssemblyScript's env imports, replaced (the
// host refuses every import but WASI's) ----

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_write")
declare function fd_write(fd: i32, iovs: usize, iovsLen: i32, written: usize): i32;

/** Writes s to the guest's stderr, which the host keeps with a trap's error. */
function stderr(s: string): void {
  const n = String.UTF8.byteLength(s);
  const p = heap.alloc(<usize>n + 16);
  String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, p + 16);
  store<u32>(p, <u32>(p + 16));
  store<u32>(p + 4, <u32>n);
  fd_write(2, p, 1, p + 8);
}

/**
 * The abort of a guest (a failed assert, an index out of range, throw):
 * its message to stderr, then a trap, which the host reports with it
 * (`--use abort=wasmsched/index/wsAbort`, as policy build passes).
 */
export function wsAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let m = "abort";
  if (message !== null) m += ": " + message;
  if (fileName !== null) m += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  stderr(m + "\n");
  unreachable();
}

/** trace() writes its message to stderr (`--use trace=...`). */
export function wsTrace(message: string, n: i32 = 0, a0: f64 = 0, a1: f64 = 0, a2: f64 = 0, a3: f64 = 0, a4: f64 = 0): void {
  let m = "trace: " + message;
  if (n > 0) m += " " + a0.toString();
  if (n > 1) m += " " + a1.toString();
  if (n > 2) m += " " + a2.toString();
  if (n > 3) m += " " + a3.toString();
  if (n > 4) m += " " + a4.toString();
  stderr(m + "\n");
}

/** Math.random's seed (`--use seed=...`): a constant, so a policy decides the same on every host. */
export function wsSeed(): f64 { return 0x5eed; }
