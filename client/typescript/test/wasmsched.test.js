// Tests of the client and the worker against a stand-in server (no engine:
// the Go suite runs them against a real one, tests/httpworker_test.go).
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Client, Worker, WasmschedError } from "../index.js";

const NS = "/api/v1/namespaces/default";

// stand starts a server answering from routes ("METHOD path" -> fn(req,
// res, body)) and recording every request.
async function stand(routes) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    let raw = "";
    for await (const c of req) raw += c;
    const body = raw ? JSON.parse(raw) : undefined;
    requests.push({ method: req.method, url: req.url, headers: req.headers, body });
    const fn = routes[`${req.method} ${req.url.split("?")[0]}`];
    if (!fn) return reply(res, 404, { error: `no route ${req.method} ${req.url}`, code: "not_found" });
    fn(req, res, body);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, requests, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

function reply(res, status, obj) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(obj));
}

function events(res, frames) {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  (async () => {
    for (const f of frames) res.write(typeof f === "function" ? await f() : f);
    res.end();
  })();
}

test("settings: a URL is required, from the options or WASMSCHED_URL", () => {
  const old = process.env.WASMSCHED_URL;
  delete process.env.WASMSCHED_URL;
  try {
    assert.throws(() => new Client(), /set WASMSCHED_URL/);
    assert.throws(() => new Client({ url: "127.0.0.1:8080" }), /want http:\/\/HOST:PORT/);
    process.env.WASMSCHED_URL = "http://example.invalid:1/";
    process.env.WASMSCHED_TOKEN = "tok-from-env";
    const c = new Client();
    assert.equal(c.url, "http://example.invalid:1");
    assert.equal(c.token, "tok-from-env");
  } finally {
    delete process.env.WASMSCHED_TOKEN;
    if (old === undefined) delete process.env.WASMSCHED_URL;
    else process.env.WASMSCHED_URL = old;
  }
});

test("submit sends the options, the token and the idempotency key", async () => {
  const s = await stand({ [`POST ${NS}/groups/g%201/runs`]: (req, res, b) => reply(res, 201, { id: "r1", state: "WAITING", ...b }) });
  try {
    const run = await new Client({ url: s.url, token: "secret-token" }).submit("g 1", "pay", {
      id: "r1", prefer: ["region=eu:10"], max_attempts: 3, idempotencyKey: "k1",
      traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    });
    assert.equal(run.id, "r1");
    const r = s.requests[0];
    assert.equal(r.headers.authorization, "Bearer secret-token");
    assert.equal(r.headers["idempotency-key"], "k1");
    assert.equal(r.headers.traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    assert.deepEqual(r.body, { payload: "pay", id: "r1", prefer: ["region=eu:10"], max_attempts: 3 });
  } finally {
    await s.close();
  }
});

test("errors: the server's refusal, and an unreachable server", async () => {
  const s = await stand({ [`GET ${NS}/runs/r1`]: (req, res) => reply(res, 401, { error: "unknown token", code: "unauthorized" }) });
  await assert.rejects(new Client({ url: s.url, token: "bad" }).get("r1"), (e) => {
    assert.ok(e instanceof WasmschedError);
    assert.equal(e.status, 401);
    assert.equal(e.code, "unauthorized");
    assert.match(e.message, /check WASMSCHED_TOKEN/);
    return true;
  });
  await assert.rejects(new Client({ url: s.url }).get("nope"), (e) => e.status === 404);
  await s.close();
  await assert.rejects(new Client({ url: s.url }).get("r1"), (e) => e.status === 0 && e.code === "unreachable" && /cannot reach/.test(e.message));
});

test("watch yields the runs of the stream", async () => {
  const frames = [": subscribed\n\n", 'event: run\ndata: {"id": "r1", "state": "RUNNING"}\n\n', ": ping\n\n",
    "event: missed\ndata: {}\n\n", 'event: run\ndata: {"id": "r1", "state": "SUCCEEDED"}\n\n'];
  const s = await stand({ [`GET ${NS}/events`]: (req, res) => events(res, frames) });
  try {
    const got = [];
    for await (const r of new Client({ url: s.url }).watch({ run: "r1" })) got.push(r.state);
    assert.deepEqual(got, ["RUNNING", "SUCCEEDED"]);
    assert.match(s.requests[0].url, /\/events\?run=r1$/);
  } finally {
    await s.close();
  }
});

test("a worker executes each token once, reports, aborts a stopped run and drains", async () => {
  const reports = [];
  let drained;
  const drainedP = new Promise((r) => (drained = r));
  let reported;
  const allReported = new Promise((r) => (reported = r));
  const a1 = { run: "r1", token: "t1", group: "ts", payload: "hi", attempt: 1, max_attempts: 1 };
  const a2 = { run: "r2", token: "t2", group: "ts", payload: "boom", attempt: 1, max_attempts: 1 };
  const a3 = { run: "r3", token: "t3", group: "ts", payload: "wait", attempt: 1, max_attempts: 1 };
  const report = (req, res, b) => {
    for (const { run, ...r } of b.reports) reports.push([run, r]);
    reply(res, 200, { accepted: b.reports.length, refused: [] });
    if (reports.length === 3) reported();
  };
  const s = await stand({
    [`POST ${NS}/workers`]: (req, res, b) => reply(res, 201, { id: "w-1", identity: "ts#1#x", ...b }),
    [`POST ${NS}/workers/w-1/heartbeat`]: (req, res) => reply(res, 200, { id: "w-1" }),
    [`GET ${NS}/workers/w-1/assignments`]: (req, res) => events(res, [
      `event: assign\ndata: ${JSON.stringify(a1)}\n\n`,
      `event: assign\ndata: ${JSON.stringify(a1)}\n\n`, // sent again: executed once
      `event: assign\ndata: ${JSON.stringify(a2)}\n\n`,
      `event: assign\ndata: ${JSON.stringify(a3)}\n\n`,
      `event: stop\ndata: ${JSON.stringify({ run: "r3", token: "t3" })}\n\n`,
      async () => (await drainedP, "event: drain\ndata: {}\n\nevent: deregistered\ndata: {}\n\n"),
    ]),
    [`POST ${NS}/workers/w-1/reports`]: report,
    [`DELETE ${NS}/workers/w-1`]: (req, res) => { reply(res, 202, { id: "w-1", draining: true }); drained(); },
  });
  const w = new Worker({ url: s.url, token: "wtok", slots: 3, heartbeatTtlMs: 1000, logger: () => {} });
  const calls = [];
  w.handle("ts", async (run, signal) => {
    calls.push(run.id);
    if (run.payload === "boom") throw new Error("bad payload");
    if (run.payload === "wait") {
      await new Promise((resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    }
    run.output = "printed\n";
    return run.payload.toUpperCase();
  });
  const done = w.run({ signals: false });
  await allReported;
  const got = Object.fromEntries(reports);
  assert.deepEqual(got.r1, { token: "t1", result: "HI", output: "printed\n" });
  assert.deepEqual(got.r2, { token: "t2", error: "Error: bad payload" });
  assert.deepEqual(got.r3, { token: "t3", error: "Error: stopped" });
  assert.deepEqual(calls.sort(), ["r1", "r2", "r3"]);
  w.stop();
  await done;
  assert.equal(w.seen.size, 0, "reported tokens are forgotten (the set is bounded by the runs in flight)");
  const reg = s.requests.find((r) => r.method === "POST" && r.url === `${NS}/workers`);
  assert.deepEqual(reg.body.groups, ["ts"]); // the groups it has handlers for
  assert.equal(reg.body.heartbeat_ttl_ms, 1000);
  await s.close();
});
