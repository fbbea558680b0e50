// The SDK's own tests: every reader and writer against records the test
// helpers build (node test/run.mjs).
import {
  Snapshot, Decision, ReuseRequest, ReuseDecision, AllocSnapshot, AllocDecision, AllocRun,
  strEq, strSame, strU64, strDurationMs, strToString, REUSE, REALLOCATE, STOPPING, LAUNCHED, HOST_CHOOSES,
} from "wasmsched";
import { SnapshotBuilder, decideSerialWith, ReuseBuilder, decideReuseWith, AllocBuilder, decideAllocationWith } from "wasmsched/testing";

function eq(got: string, want: string): void {
  if (got != want) {
    assert(false, "got \"" + got + "\", want \"" + want + "\"");
  }
}

function wait(s: Snapshot, d: Decision): void {
  for (let i: u32 = 0; i < s.free() && i < s.nWaiting; i++) d.launch(s.waiting(i), "oldest");
}

export function testWaitLaunchesBelowMaxActive(): void {
  const b = new SnapshotBuilder();
  b.maxActive = 2;
  b.active("a1", 1);
  b.waiting("w1", 2);
  b.waiting("w2", 3);
  eq(decideSerialWith(b, wait).toString(), "launch w1 (oldest)");
}

// every field of the header and the runs, as the readers see them
let seen = "";
function readAll(s: Snapshot, d: Decision): void {
  const r = s.waiting(0), a = s.active(0);
  seen = strToString(s.group()) + " max " + s.maxActive().toString() + " now " + s.now().toString() +
    " total " + s.waitingTotal().toString() + " oldest " + s.waitingOldest().toString() + " truncated " + (s.truncated() ? "y" : "n") +
    " | " + strToString(s.runId(a)) + " " + a.seq.toString() + " " + a.state.toString() + " started " + a.startedAt.toString() +
    " | " + strToString(s.runId(r)) + " seq " + r.seq.toString() + " prio " + r.priority.toString() + " slots " + r.slots.toString() +
    " sub " + r.submittedAt.toString() + " nb " + r.notBefore.toString() + " att " + r.attempt.toString() + "/" + r.maxAttempts.toString() +
    " labels " + r.nLabels.toString() + " " + strToString(s.runLabelKey(r, 0)) + "=" + strToString(s.runLabelValue(r, 0)) +
    " tenant=" + strToString(s.labelValue(r, "tenant")) + " has-ref " + (s.hasLabel(r, "ref") ? "y" : "n") +
    " has-nope " + (s.hasLabel(r, "nope") ? "y" : "n") + " label9 '" + strToString(s.runLabelKey(r, 9)) + "'" +
    " | n " + s.paramU64("n", 7).toString() + " missing " + s.paramU64("missing", 7).toString() + " period " + s.paramDurationMs("period", 0).toString() +
    " word " + strToString(s.param("word")) + " has-word " + (s.hasParam("word") ? "y" : "n") +
    " | launches " + s.nLaunches.toString() + " at " + s.launchAt(1).toString() + " " + s.launchNLabels(1).toString() + " " +
    strToString(s.launchLabelKey(1, 0)) + "=" + strToString(s.launchLabelValue(1, 0)) + " past " + s.launchAt(5).toString();
  d.wakeAt(s.now() + 500);
  d.wakeAt(s.now() + 200); // the earliest is kept
  d.stop(a, "superseded: é"); // a reason in UTF-8
  d.discardBelow(r.seq, "below");
  d.discardBelow(r.seq + 1, "twice"); // at most once
}

export function testReadersSeeEveryField(): void {
  const b = new SnapshotBuilder();
  b.group = "grüppe";
  b.maxActive = 3;
  b.now = 1700000001000;
  b.waitingTotal = 40;
  b.waitingOldest = 1;
  const a = b.active("a1", 3);
  a.startedAt = 1699999999000;
  const r = b.waiting("w1", 5);
  r.priority = -4;
  r.slots = 2;
  r.submittedAt = 1700000000000;
  r.notBefore = 1700000000500;
  r.attempt = 2;
  r.maxAttempts = 3;
  r.label("ref", "main").label("tenant", "acme");
  b.param("n", "12").param("period", "1m30s").param("word", "héllo");
  b.launch(1699999990000, ["tenant", "x"]).launch(1699999995000, ["tenant", "acme"]);
  const got = decideSerialWith(b, readAll).toString();
  eq(seen, "grüppe max 3 now 1700000001000 total 40 oldest 1 truncated y | a1 3 3 started 1699999999000 | w1 seq 5 prio -4 slots 2 " +
    "sub 1700000000000 nb 1700000000500 att 2/3 labels 2 ref=main tenant=acme has-ref y has-nope n label9 '' | " +
    "n 12 missing 7 period 90000 word héllo has-word y | launches 2 at 1699999995000 1 tenant=acme past 0");
  eq(got, "stop a1 (superseded: é); discard_below 5 (below); wake 1700000001200");
}

function reasons(s: Snapshot, d: Decision): void {
  d.launch(s.waiting(0), "same");
  d.launch(s.waiting(1), "same"); // written once, referenced twice
  d.discard(s.waiting(2), "x".repeat(300)); // cut to 256 bytes
  d.discard(s.waiting(3), "é".repeat(200)); // cut on a character boundary: 128 of them
}

export function testReasons(): void {
  const b = new SnapshotBuilder();
  b.maxActive = 2;
  for (let i = 1; i <= 4; i++) b.waiting("w" + i.toString(), <u64>i);
  const r = decideSerialWith(b, reasons);
  eq(r.reason(0), "same");
  eq(r.reason(1), "same");
  assert(load<u32>(r.out.dataStart + 16 + 12) == load<u32>(r.out.dataStart + 36 + 12), "a repeated reason is written once");
  assert(r.reason(2).length == 256, "a long reason is cut to 256 bytes");
  eq(r.reason(3), "é".repeat(128));
}

export function testStrings(): void {
  const b = new SnapshotBuilder();
  b.param("a", "42").param("b", "0042").param("c", "-1").param("d", "18446744073709551615x").param("e", "");
  b.param("f", "250ms").param("g", "1.5s").param("h", "2h45m").param("i", "1500us").param("j", "bogus").param("k", "10");
  b.waiting("w1", 1);
  decideSerialWith(b, checkStrings);
}

function checkStrings(s: Snapshot, d: Decision): void {
  assert(strU64(s.param("a"), 9) == 42 && strU64(s.param("b"), 9) == 42, "decimal");
  assert(strU64(s.param("c"), 9) == 9 && strU64(s.param("d"), 9) == 9 && strU64(s.param("e"), 9) == 9, "not decimal");
  assert(s.paramDurationMs("f", 0) == 250 && s.paramDurationMs("g", 0) == 1500, "ms, fractions");
  assert(s.paramDurationMs("h", 0) == (2 * 3600 + 45 * 60) * 1000, "compound");
  assert(s.paramDurationMs("i", 0) == 1 && s.paramDurationMs("j", 5) == 5 && s.paramDurationMs("k", 5) == 5, "us, bogus, unitless");
  assert(strEq(s.param("a"), "42") && !strEq(s.param("a"), "4") && !strEq(s.param("a"), "420"), "strEq");
  assert(strSame(s.param("a"), s.param("a")) && !strSame(s.param("a"), s.param("b")), "strSame");
  assert(strEq(s.group(), "g") && !s.hasParam("zz") && strToString(s.param("zz")) == "", "absent");
}

export function testStoppingAndLaunched(): void {
  const b = new SnapshotBuilder();
  b.active("a1", 1, STOPPING);
  b.active("a2", 2, LAUNCHED);
  b.waiting("w1", 3);
  decideSerialWith(b, checkStates);
}

function checkStates(s: Snapshot, d: Decision): void {
  assert(s.active(0).state == STOPPING && s.active(1).state == LAUNCHED && s.nActive == 2 && s.free() == 0, "states");
  assert(!s.truncated() && s.waitingTotal() == 1, "not truncated");
}

function reuseAlive(r: ReuseRequest, d: ReuseDecision): void {
  for (let i: u32 = 0; i < r.nSlots; i++) {
    const sl = r.slot(i);
    d.verdict(sl.alive && sl.held ? REUSE : REALLOCATE);
  }
}

function reuseFail(r: ReuseRequest, d: ReuseDecision): void {
  if (!strEq(r.runId(), "r9") || !strEq(r.group(), "deploy") || !strEq(r.slotWorker(r.slot(1)), "w-b") || r.slot(1).index != 7) {
    d.fail("unexpected request");
    return;
  }
  d.fail("cannot resume " + strToString(r.runId()));
}

export function testReuse(): void {
  const b = new ReuseBuilder();
  b.group = "deploy";
  b.run.id = "r9";
  b.slot(0, 3, "w-a", true, true).slot(1, 7, "w-b", false, true).slot(2, 1, "w-c", true, false);
  const ok = decideReuseWith(b, reuseAlive);
  assert(!ok.failed && ok.length == 3, "three verdicts");
  assert(ok.verdict(0) == REUSE && ok.verdict(1) == REALLOCATE && ok.verdict(2) == REALLOCATE, "verdicts");
  const f = decideReuseWith(b, reuseFail);
  assert(f.failed && f.length == 0, "failed");
  eq(f.reason(), "cannot resume r9");
}

function byPriority(s: AllocSnapshot, a: AllocRun, b: AllocRun): bool {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.seq < b.seq;
}

function priorityFirst(s: AllocSnapshot, d: AllocDecision): void {
  for (let i: u32 = 0; i < s.nRuns; i++) d.order(i);
  d.sort(s, byPriority);
}

export function testAllocationOrder(): void {
  const b = new AllocBuilder();
  b.run("r1", "g", 1).priority = 1;
  b.run("r2", "g", 2).priority = 5;
  b.run("r3", "g", 3).priority = 1;
  b.run("r4", "g", 4).priority = 9;
  b.worker("w0", 4, 4);
  eq(decideAllocationWith(b, priorityFirst).toString(), "r4 r2 r1 r3");
}

// placement: the best-scoring worker that takes each run, else the host
function place(s: AllocSnapshot, d: AllocDecision): void {
  for (let i: u32 = 0; i < s.nRuns; i++) {
    const r = s.run(i);
    let best = HOST_CHOOSES, bestScore: i64 = -1;
    for (let w: u32 = 0; w < s.nWorkers; w++) {
      if (!s.workerTakes(w, r) || s.worker(w).free < r.slots) continue;
      const sc = <i64>s.score(r, w);
      if (sc > bestScore) { best = w; bestScore = sc; }
    }
    d.place(i, best);
  }
}

export function testAllocationPlacement(): void {
  const b = new AllocBuilder();
  b.run("r1", "web", 1).requires("zone", "a").prefers("disk", "ssd", 5);
  b.run("r2", "web", 2).prefers("disk", "ssd", 5).prefers("region", "eu", 10);
  b.run("r3", "batch", 3).slots = 2;
  b.run("r4", "web", 4).requires("zone", "z");
  b.worker("w0", 4, 4).label("disk", "hdd").label("zone", "a").serves("web,batch");
  b.worker("w1", 4, 4).label("disk", "ssd").label("region", "eu").label("zone", "b").serves("w*");
  b.worker("w2", 4, 1).label("disk", "ssd").label("zone", "a");
  eq(decideAllocationWith(b, place).toString(), "r1@w2 r2@w1 r3@w0 r4@host");
}

function readAlloc(s: AllocSnapshot, d: AllocDecision): void {
  const r = s.run(0);
  assert(s.free() == 5 && s.total() == 8 && s.nRuns == 2 && s.launchedTotal() == 10 && s.oldest() == 1, "header");
  assert(strEq(s.runId(r), "r1") && strEq(s.runGroup(r), "g") && r.slots == 1 && s.run(1).slots == 3, "runs");
  assert(strEq(s.labelValue(r, "tenant"), "acme") && s.hasLabel(r, "tenant") && !s.hasLabel(r, "zone"), "labels");
  assert(r.nRequire == 1 && strEq(s.requireKey(r, 0), "zone") && strEq(s.requireValue(r, 0), "a"), "requirements");
  assert(strEq(s.workerId(1), "w1") && s.worker(1).free == 1 && strEq(s.workerLabelValue(0, "zone"), "a"), "workers");
  assert(s.workerServes(0, s.runGroup(r)) && !s.workerServes(1, s.runGroup(r)) && strEq(s.workerGroups(1), "batch"), "groups");
  assert(s.used("", s.runGroup(r)) == 3 && s.used("tenant", s.labelValue(r, "tenant")) == 2, "usage");
  assert(strEq(s.usageKey(1), "tenant") && s.usageAt(1).runs == 1, "usage entries");
  assert(s.paramU64("weight", 0) == 3 && strEq(s.param("fair"), "tenant"), "params");
  assert(s.nPrefer() == 1 && s.prefer(0).weight == 7 && strEq(s.preferKey(0), "zone"), "preferences");
  d.order(1);
  d.order(0);
}

export function testAllocationReaders(): void {
  const b = new AllocBuilder();
  b.launchedTotal = 10;
  b.oldest = 1;
  b.run("r1", "g", 1).label("tenant", "acme").requires("zone", "a").prefers("zone", "a", 7);
  b.run("r2", "g", 2).slots = 3;
  b.worker("w0", 4, 4).label("zone", "a");
  b.worker("w1", 4, 1).serves("batch");
  b.use("", "g", 3, 2).use("tenant", "acme", 2, 1);
  b.param("fair", "tenant").param("weight", "3");
  eq(decideAllocationWith(b, readAlloc).toString(), "r2 r1");
}
