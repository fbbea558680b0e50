// Test helpers of the wasmsched AssemblyScript SDK ("wasmsched/testing"):
// build the records the host sends (serial snapshot, reuse request,
// allocation snapshot) in AssemblyScript, decide them with a policy
// function, and read the decision back, without a host. Tests are exported
// functions named test*; `node test/run.mjs FILE.ts` (this folder's
// runner) compiles FILE with the SDK and runs them (docs/sdk-assemblyscript.md).
//
//     import { SnapshotBuilder, decideSerialWith } from "wasmsched/testing";
//     import { decide } from "./policy";
//     export function testLaunchesTheOldest(): void {
//       const b = new SnapshotBuilder();
//       b.waiting("r1", 1); b.waiting("r2", 2);
//       assert(decideSerialWith(b, decide).toString() == "launch r1 (oldest waiting run, below max_active)");
//     }
//
// The helpers allocate: they are for tests, not for a policy's decision path.

import {
  Snapshot, Decision, ReuseRequest, ReuseDecision, AllocSnapshot, AllocDecision,
  decideSerialBuf, decideReuseBuf, decideAllocationBuf, serialOutSize, reuseOutSize, allocationOutSize,
  WAITING, RUNNING, HOST_CHOOSES,
} from "./index";

/** A record under construction: fixed parts, then strings, in one growing buffer. */
class Writer {
  buf: Uint8Array = new Uint8Array(0);
  strs: Array<string> = [];
  at: Array<usize> = []; // where each string's reference goes

  constructor(size: i32) { this.buf = new Uint8Array(size); }
  get base(): usize { return this.buf.dataStart; }
  u8(off: i32, v: u8): void { store<u8>(this.base + <usize>off, v); }
  u16(off: i32, v: u16): void { store<u16>(this.base + <usize>off, v); }
  u32(off: i32, v: u32): void { store<u32>(this.base + <usize>off, v); }
  u64(off: i32, v: u64): void { store<u64>(this.base + <usize>off, v); }
  str(off: i32, s: string): void { this.strs.push(s); this.at.push(<usize>off); }
  /** Appends the strings and fills in their references; returns the record. */
  finish(): Uint8Array {
    let size = this.buf.length;
    for (let i = 0; i < this.strs.length; i++) size += String.UTF8.byteLength(this.strs[i]);
    const out = new Uint8Array(size);
    memory.copy(out.dataStart, this.base, <usize>this.buf.length);
    let end = this.buf.length;
    for (let i = 0; i < this.strs.length; i++) {
      const s = this.strs[i];
      const n = String.UTF8.byteLength(s);
      String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, out.dataStart + <usize>end);
      store<u32>(out.dataStart + this.at[i], <u32>end);
      store<u32>(out.dataStart + this.at[i] + 4, <u32>n);
      end += n;
    }
    return out;
  }
}

/** A run of a test snapshot: set what the test needs, the rest is zero. */
export class RunSpec {
  id: string;
  seq: u64;
  state: u8;
  submittedAt: i64 = 0;
  startedAt: i64 = 0;
  priority: i32 = 0;
  slots: u32 = 1;
  notBefore: i64 = 0;
  attempt: u32 = 1;
  maxAttempts: u32 = 1;
  labels: Array<string> = []; // key, value, key, value, ... sorted by key

  constructor(id: string, seq: u64, state: u8) { this.id = id; this.seq = seq; this.state = state; }
  /** Adds a label (give them sorted by key, as the host does). */
  label(key: string, value: string): RunSpec { this.labels.push(key); this.labels.push(value); return this; }
}

/** A serial snapshot (tag 5) under construction. */
export class SnapshotBuilder {
  group: string = "g";
  policy: string = "test";
  maxActive: u32 = 1;
  now: i64 = 1700000000000;
  /** 0: the waiting list is all of them; more: it is a window. */
  waitingTotal: u32 = 0;
  waitingOldest: u32 = 0;
  activeRuns: Array<RunSpec> = [];
  waitingRuns: Array<RunSpec> = [];
  params: Array<string> = []; // name, value, ... sorted by name
  launchAt: Array<i64> = [];
  launchLabels: Array<Array<string>> = [];

  /** An active run (RUNNING unless state says LAUNCHED or STOPPING). */
  active(id: string, seq: u64, state: u8 = RUNNING): RunSpec {
    const r = new RunSpec(id, seq, state);
    this.activeRuns.push(r);
    return r;
  }
  /** A waiting run (give them seq ascending). */
  waiting(id: string, seq: u64): RunSpec {
    const r = new RunSpec(id, seq, WAITING);
    this.waitingRuns.push(r);
    return r;
  }
  /** A group parameter (give them sorted by name). */
  param(name: string, value: string): SnapshotBuilder { this.params.push(name); this.params.push(value); return this; }
  /** A recent launch (oldest first), with its run's labels (key, value, ...). */
  launch(at: i64, labels: Array<string> = []): SnapshotBuilder { this.launchAt.push(at); this.launchLabels.push(labels); return this; }

  /** The runs in the snapshot's order: active, then waiting. */
  run(i: i32): RunSpec { return i < this.activeRuns.length ? this.activeRuns[i] : this.waitingRuns[i - this.activeRuns.length]; }

  /** The record the host would send. */
  build(): Uint8Array {
    const na = this.activeRuns.length, nw = this.waitingRuns.length;
    let nl = 0;
    for (let i = 0; i < na + nw; i++) nl += this.run(i).labels.length / 2;
    for (let i = 0; i < this.launchLabels.length; i++) nl += this.launchLabels[i].length / 2;
    const np = this.params.length / 2, nh = this.launchAt.length;
    const w = new Writer(64 + 64 * (na + nw) + 16 * (nl + np + nh));
    w.u32(0, 5);
    w.u32(4, this.maxActive);
    w.u64(8, <u64>this.now);
    w.str(16, this.group);
    w.str(24, this.policy);
    w.u32(32, <u32>na);
    w.u32(36, <u32>nw);
    w.u32(40, this.waitingTotal);
    w.u32(44, this.waitingOldest);
    w.u32(48, <u32>nl);
    w.u32(52, <u32>np);
    w.u32(56, <u32>nh);
    const labels = 64 + 64 * (na + nw);
    let li = 0;
    for (let i = 0; i < na + nw; i++) {
      const r = this.run(i), o = 64 + 64 * i;
      w.u64(o, r.seq);
      w.u64(o + 8, <u64>r.submittedAt);
      w.u64(o + 16, <u64>r.startedAt);
      w.u32(o + 24, <u32>r.priority);
      w.u32(o + 28, r.slots);
      w.str(o + 32, r.id);
      w.u8(o + 40, r.state);
      w.u16(o + 42, <u16>(r.labels.length / 2));
      w.u32(o + 44, <u32>li);
      w.u64(o + 48, <u64>r.notBefore);
      w.u32(o + 56, r.attempt);
      w.u32(o + 60, r.maxAttempts);
      for (let j = 0; j < r.labels.length; j += 2) {
        w.str(labels + 16 * li, r.labels[j]);
        w.str(labels + 16 * li + 8, r.labels[j + 1]);
        li++;
      }
    }
    const launchFirst = new Array<i32>(nh);
    for (let i = 0; i < nh; i++) {
      launchFirst[i] = li;
      const ls = this.launchLabels[i];
      for (let j = 0; j < ls.length; j += 2) {
        w.str(labels + 16 * li, ls[j]);
        w.str(labels + 16 * li + 8, ls[j + 1]);
        li++;
      }
    }
    const params = labels + 16 * nl;
    for (let i = 0; i < np; i++) {
      w.str(params + 16 * i, this.params[2 * i]);
      w.str(params + 16 * i + 8, this.params[2 * i + 1]);
    }
    const launches = params + 16 * np;
    for (let i = 0; i < nh; i++) {
      w.u64(launches + 16 * i, <u64>this.launchAt[i]);
      w.u32(launches + 16 * i + 8, <u32>launchFirst[i]);
      w.u32(launches + 16 * i + 12, <u32>(this.launchLabels[i].length / 2));
    }
    return w.finish();
  }
}

/** A serial decision, read back. */
export class SerialResult {
  out: Uint8Array;
  len: u32;
  b: SnapshotBuilder;
  constructor(out: Uint8Array, len: u32, b: SnapshotBuilder) { this.out = out; this.len = len; this.b = b; }
  private a(i: i32): usize { return this.out.dataStart + 16 + 20 * <usize>i; }
  /** Actions, the wake included. */
  get length(): i32 { return <i32>load<u32>(this.out.dataStart + 4); }
  /** 1 launch, 2 discard, 3 stop, 4 discard_below, 5 wake. */
  kind(i: i32): u32 { return load<u32>(this.a(i)); }
  /** The run an action of kind 1 to 3 names. */
  runId(i: i32): string { return this.b.run(<i32>load<u32>(this.a(i) + 4)).id; }
  /** A discard_below's seq, or a wake's time. */
  value(i: i32): i64 { return load<i64>(this.a(i) + 4); }
  reason(i: i32): string {
    const off = load<u32>(this.a(i) + 12), n = load<u32>(this.a(i) + 16);
    return String.UTF8.decodeUnsafe(this.out.dataStart + <usize>off, <usize>n);
  }
  /** "launch r1 (why); discard_below 5 (why); wake 1700000000100". */
  toString(): string {
    const parts = new Array<string>();
    for (let i = 0; i < this.length; i++) {
      const k = this.kind(i);
      if (k == 5) { parts.push("wake " + this.value(i).toString()); continue; }
      const what = k == 4 ? "discard_below " + this.value(i).toString() : (k == 1 ? "launch " : k == 2 ? "discard " : "stop ") + this.runId(i);
      parts.push(what + " (" + this.reason(i) + ")");
    }
    return parts.join("; ");
  }
}

/** Decides the snapshot b with policy, as the host would ask it. */
export function decideSerialWith(b: SnapshotBuilder, policy: (s: Snapshot, d: Decision) => void): SerialResult {
  const rec = b.build();
  const need = serialOutSize(rec.dataStart, <u32>rec.length);
  assert(need > 0, "the test snapshot does not decode");
  const out = new Uint8Array(<i32>need);
  const n = decideSerialBuf(rec.dataStart, <u32>rec.length, out.dataStart, policy);
  return new SerialResult(out, n, b);
}

/** A reuse request (tag 3) under construction: a restored run and its slots. */
export class ReuseBuilder {
  now: i64 = 1700000000000;
  group: string = "g";
  run: RunSpec = new RunSpec("r1", 1, RUNNING);
  private slots: Array<string> = []; // worker, token per slot
  private meta: Array<u32> = []; // task, index, flags per slot

  /** A task slot, in task order: alive (the worker is), held (still with the run's token). */
  slot(task: u32, index: u32, worker: string, alive: bool, held: bool, token: string = "tok"): ReuseBuilder {
    this.slots.push(worker); this.slots.push(token);
    this.meta.push(task); this.meta.push(index); this.meta.push((alive ? 1 : 0) | (held ? 2 : 0));
    return this;
  }
  build(): Uint8Array {
    const ns = this.meta.length / 3;
    const w = new Writer(80 + 32 * ns);
    w.u32(0, 3);
    w.u32(4, <u32>ns);
    w.u64(8, <u64>this.now);
    w.str(16, this.group);
    const r = this.run;
    w.u64(32, r.seq);
    w.u64(40, <u64>r.submittedAt);
    w.u64(48, <u64>r.startedAt);
    w.u32(56, <u32>r.priority);
    w.u32(60, r.slots);
    w.str(64, r.id);
    w.u8(72, r.state);
    for (let i = 0; i < ns; i++) {
      const o = 80 + 32 * i;
      w.u32(o, this.meta[3 * i]);
      w.u32(o + 4, this.meta[3 * i + 1]);
      w.str(o + 8, this.slots[2 * i]);
      w.str(o + 16, this.slots[2 * i + 1]);
      w.u8(o + 24, <u8>this.meta[3 * i + 2]);
    }
    return w.finish();
  }
}

/** A reuse decision, read back. */
export class ReuseResult {
  out: Uint8Array;
  constructor(out: Uint8Array) { this.out = out; }
  get failed(): bool { return load<u32>(this.out.dataStart + 4) == 1; }
  get length(): i32 { return <i32>load<u32>(this.out.dataStart + 16); }
  /** Slot i's verdict: REUSE or REALLOCATE. */
  verdict(i: i32): u8 { return load<u8>(this.out.dataStart + 24 + <usize>i); }
  reason(): string {
    const off = load<u32>(this.out.dataStart + 8), n = load<u32>(this.out.dataStart + 12);
    return String.UTF8.decodeUnsafe(this.out.dataStart + <usize>off, <usize>n);
  }
}

/** Decides the reuse request b with policy. */
export function decideReuseWith(b: ReuseBuilder, policy: (r: ReuseRequest, d: ReuseDecision) => void): ReuseResult {
  const rec = b.build();
  const need = reuseOutSize(rec.dataStart, <u32>rec.length);
  assert(need > 0, "the test reuse request does not decode");
  const out = new Uint8Array(<i32>need);
  decideReuseBuf(rec.dataStart, <u32>rec.length, out.dataStart, policy);
  return new ReuseResult(out);
}

/** A run waiting for slots in a test allocation snapshot. */
export class AllocRunSpec {
  id: string;
  group: string;
  seq: u64;
  launchedAt: i64 = 0;
  priority: i32 = 0;
  slots: u32 = 1;
  labels: Array<string> = [];
  require: Array<string> = [];
  prefer: Array<string> = []; // key, value, weight as a decimal string
  constructor(id: string, group: string, seq: u64) { this.id = id; this.group = group; this.seq = seq; }
  label(key: string, value: string): AllocRunSpec { this.labels.push(key); this.labels.push(value); return this; }
  requires(key: string, value: string): AllocRunSpec { this.require.push(key); this.require.push(value); return this; }
  prefers(key: string, value: string, weight: u32): AllocRunSpec {
    this.prefer.push(key); this.prefer.push(value); this.prefer.push(weight.toString());
    return this;
  }
}

/** A worker of a test allocation snapshot. */
export class WorkerSpec {
  id: string;
  slots: u32;
  free: u32;
  labels: Array<string> = [];
  groups: string = "";
  constructor(id: string, slots: u32, free: u32) { this.id = id; this.slots = slots; this.free = free; }
  label(key: string, value: string): WorkerSpec { this.labels.push(key); this.labels.push(value); return this; }
  serves(groups: string): WorkerSpec { this.groups = groups; return this; }
}

/** An allocation snapshot (tag 6, version 6) under construction. */
export class AllocBuilder {
  now: i64 = 1700000000000;
  launchedTotal: u32 = 0;
  oldest: u32 = 0;
  runs: Array<AllocRunSpec> = [];
  workers: Array<WorkerSpec> = [];
  usage: Array<string> = []; // key, value, slots, runs
  params: Array<string> = [];

  run(id: string, group: string, seq: u64): AllocRunSpec { const r = new AllocRunSpec(id, group, seq); this.runs.push(r); return r; }
  worker(id: string, slots: u32, free: u32): WorkerSpec { const w = new WorkerSpec(id, slots, free); this.workers.push(w); return w; }
  /** What a group (key "") or a label value holds now. */
  use(key: string, value: string, slots: u32, runs: u32): AllocBuilder {
    this.usage.push(key); this.usage.push(value); this.usage.push(slots.toString()); this.usage.push(runs.toString());
    return this;
  }
  param(name: string, value: string): AllocBuilder { this.params.push(name); this.params.push(value); return this; }

  build(): Uint8Array {
    const nr = this.runs.length, nw = this.workers.length, nu = this.usage.length / 4, np = this.params.length / 2;
    let nl = 0, nq = 0;
    for (let i = 0; i < nr; i++) { nl += (this.runs[i].labels.length + this.runs[i].require.length) / 2; nq += this.runs[i].prefer.length / 3; }
    for (let i = 0; i < nw; i++) nl += this.workers[i].labels.length / 2;
    let free: u32 = 0, total: u32 = 0;
    for (let i = 0; i < nw; i++) { free += this.workers[i].free; total += this.workers[i].slots; }
    const workers = 48 + 48 * nr, usage = workers + 16 * nw, labels = usage + 24 * nu;
    const params = labels + 16 * nl, profiles = params + 16 * np, prefs = profiles + 16 * nw;
    const w = new Writer(prefs + 8 + 24 * nq);
    w.u32(0, 6);
    w.u32(4, <u32>nr);
    w.u64(8, <u64>this.now);
    w.u32(16, free);
    w.u32(20, total);
    w.u32(24, this.launchedTotal);
    w.u32(28, this.oldest);
    w.u32(32, <u32>nw);
    w.u32(36, <u32>nu);
    w.u32(40, <u32>nl);
    w.u32(44, <u32>np);
    let li = 0;
    const label = (w: Writer, at: i32, k: string, v: string): void => { w.str(at, k); w.str(at + 8, v); };
    for (let i = 0; i < nr; i++) {
      const r = this.runs[i], o = 48 + 48 * i;
      w.u64(o, r.seq);
      w.u64(o + 8, <u64>r.launchedAt);
      w.u32(o + 16, <u32>r.priority);
      w.u32(o + 20, r.slots);
      w.str(o + 24, r.id);
      w.str(o + 32, r.group);
      w.u32(o + 40, <u32>li);
      w.u16(o + 44, <u16>(r.labels.length / 2));
      w.u16(o + 46, <u16>(r.require.length / 2));
      for (let j = 0; j < r.labels.length; j += 2) { label(w, labels + 16 * li, r.labels[j], r.labels[j + 1]); li++; }
      for (let j = 0; j < r.require.length; j += 2) { label(w, labels + 16 * li, r.require[j], r.require[j + 1]); li++; }
    }
    for (let i = 0; i < nw; i++) {
      const k = this.workers[i], o = workers + 16 * i;
      w.str(o, k.id);
      w.u32(o + 8, k.slots);
      w.u32(o + 12, k.free);
      const p = profiles + 16 * i;
      w.u32(p, <u32>li);
      w.u16(p + 4, <u16>(k.labels.length / 2));
      w.str(p + 8, k.groups);
      for (let j = 0; j < k.labels.length; j += 2) { label(w, labels + 16 * li, k.labels[j], k.labels[j + 1]); li++; }
    }
    for (let i = 0; i < nu; i++) {
      const o = usage + 24 * i;
      w.str(o, this.usage[4 * i]);
      w.str(o + 8, this.usage[4 * i + 1]);
      w.u32(o + 16, <u32>I32.parseInt(this.usage[4 * i + 2]));
      w.u32(o + 20, <u32>I32.parseInt(this.usage[4 * i + 3]));
    }
    for (let i = 0; i < np; i++) label(w, params + 16 * i, this.params[2 * i], this.params[2 * i + 1]);
    w.u32(prefs, <u32>nq);
    let q = 0;
    for (let i = 0; i < nr; i++) {
      const ps = this.runs[i].prefer;
      for (let j = 0; j < ps.length; j += 3) {
        const o = prefs + 8 + 24 * q;
        w.u32(o, <u32>i);
        w.u32(o + 4, <u32>I32.parseInt(ps[j + 2]));
        label(w, o + 8, ps[j], ps[j + 1]);
        q++;
      }
    }
    return w.finish();
  }
}

/** An allocation decision, read back. */
export class AllocResult {
  out: Uint8Array;
  b: AllocBuilder;
  constructor(out: Uint8Array, b: AllocBuilder) { this.out = out; this.b = b; }
  get length(): i32 { return <i32>load<u32>(this.out.dataStart + 4); }
  /** The k-th run to get slots. */
  runId(k: i32): string { return this.b.runs[<i32>load<u32>(this.out.dataStart + 16 + 4 * <usize>k)].id; }
  /** Its worker (HOST_CHOOSES when the decision names none). */
  worker(k: i32): u32 {
    const nw = load<u32>(this.out.dataStart + 8);
    return nw == 0 ? HOST_CHOOSES : load<u32>(this.out.dataStart + 16 + 4 * <usize>this.length + 4 * <usize>k);
  }
  /** "r2 r1 r3", or "r2@w0 r1@host" when workers are named. */
  toString(): string {
    const parts = new Array<string>();
    const placed = load<u32>(this.out.dataStart + 8) != 0;
    for (let k = 0; k < this.length; k++) {
      let s = this.runId(k);
      if (placed) {
        const wk = this.worker(k);
        s += "@" + (wk == HOST_CHOOSES ? "host" : this.b.workers[<i32>wk].id);
      }
      parts.push(s);
    }
    return parts.join(" ");
  }
}

/** Decides the allocation snapshot b with policy. */
export function decideAllocationWith(b: AllocBuilder, policy: (s: AllocSnapshot, d: AllocDecision) => void): AllocResult {
  const rec = b.build();
  const need = allocationOutSize(rec.dataStart, <u32>rec.length);
  assert(need > 0, "the test allocation snapshot does not decode");
  const out = new Uint8Array(<i32>need);
  decideAllocationBuf(rec.dataStart, <u32>rec.length, out.dataStart, policy);
  return new AllocResult(out, b);
}
