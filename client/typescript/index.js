// wasmsched for Node (18+): submit and execute runs of a wasmsched server
// over its HTTP API. No runtime dependencies; types in index.d.ts. The
// server URL and token come from the options or from WASMSCHED_URL and
// WASMSCHED_TOKEN. The worker protocol: docs/api.md "Workers over HTTP".

import fs from "node:fs";

/** A refusal of the server (its status, code and message), or status 0 and
 * code "unreachable" when the server could not be reached. */
export class WasmschedError extends Error {
  constructor(status, code, message) {
    super(status ? `wasmsched: ${message} (${status} ${code})` : `wasmsched: ${message}`);
    this.name = "WasmschedError";
    this.status = status;
    this.code = code;
    this.detail = message;
  }
}

function settings(o = {}) {
  const url = o.url || process.env.WASMSCHED_URL || "";
  const token = o.token ?? process.env.WASMSCHED_TOKEN ?? "";
  if (!url) {
    throw new TypeError("wasmsched: no server URL: pass { url } or set WASMSCHED_URL (e.g. http://127.0.0.1:8080)");
  }
  let u;
  try {
    u = new URL(url);
  } catch {
    u = null;
  }
  if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
    throw new TypeError(`wasmsched: server URL ${JSON.stringify(url)}: want http://HOST:PORT or https://HOST:PORT`);
  }
  return { url: url.replace(/\/+$/, ""), token };
}

/** A client of one namespace of a wasmsched server. */
export class Client {
  constructor(o = {}) {
    const s = settings(o);
    this.url = s.url;
    this.token = s.token;
    this.namespace = o.namespace || process.env.WASMSCHED_NAMESPACE || "default";
    this.timeoutMs = o.timeoutMs ?? 30000;
  }

  path(...parts) {
    return ["/api/v1/namespaces", this.namespace, ...parts].map((p, i) => (i === 0 ? p : encodeURIComponent(String(p)))).join("/");
  }

  async request(method, path, body, { headers = {}, stream = false, signal } = {}) {
    const h = { Accept: stream ? "text/event-stream" : "application/json", ...headers };
    if (body !== undefined) h["Content-Type"] = "application/json";
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    const timeout = stream ? null : AbortSignal.timeout(this.timeoutMs);
    const sig = signal && timeout ? anySignal(signal, timeout) : signal || timeout || undefined;
    let resp;
    try {
      resp = await fetch(this.url + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal: sig });
    } catch (e) {
      if (signal?.aborted) throw e;
      const why = e?.cause?.code || e?.cause?.message || e?.message || String(e);
      throw new WasmschedError(0, "unreachable", `cannot reach ${this.url}: ${why} (is the server running? check WASMSCHED_URL)`);
    }
    if (!resp.ok) {
      let b = {};
      try {
        b = await resp.json();
      } catch {
        b = {};
      }
      let message = b.error || resp.statusText || "error";
      if (resp.status === 401) message += " (check WASMSCHED_TOKEN)";
      throw new WasmschedError(resp.status, b.code || "error", message);
    }
    if (stream) return resp;
    const text = await resp.text();
    return text ? JSON.parse(text) : null;
  }

  /** Submit a run to group (made with policy wait if new) and return it. */
  submit(group, payload = "", o = {}) {
    const { idempotencyKey, traceparent, ...rest } = o;
    const body = { payload };
    for (const [k, v] of Object.entries(rest)) if (v !== undefined) body[k] = v;
    const headers = {};
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    if (traceparent) headers.traceparent = traceparent;
    return this.request("POST", this.path("groups", group, "runs"), body, { headers });
  }

  /** The run with this id. */
  get(id) {
    return this.request("GET", this.path("runs", id));
  }

  /** One page of runs, newest first: { runs, next_cursor, more }. */
  list({ group, state, labels, limit, cursor } = {}) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries({ group, state, limit, cursor })) if (v) q.append(k, String(v));
    for (const [k, v] of Object.entries(labels || {})) q.append("label", `${k}=${v}`);
    const qs = q.toString();
    return this.request("GET", this.path("runs") + (qs ? `?${qs}` : ""));
  }

  /** Stop a run (WAITING: discarded; LAUNCHED: stopped; RUNNING: stopping). */
  stop(id, reason) {
    return this.request("POST", this.path("runs", id, "stop"), reason ? { reason } : {});
  }

  /** Each run after each change of its state, as the server streams them. */
  async *watch({ group, run, signal } = {}) {
    const q = new URLSearchParams();
    if (group) q.append("group", group);
    if (run) q.append("run", run);
    const qs = q.toString();
    const resp = await this.request("GET", this.path("events") + (qs ? `?${qs}` : ""), undefined, { stream: true, signal });
    for await (const { event, data } of readEvents(resp)) {
      if (event === "run") yield JSON.parse(data);
    }
  }
}

/** Yields { event, data } of each frame of a server-sent event stream. */
export async function* readEvents(resp) {
  const decoder = new TextDecoder();
  let buf = "";
  let event = "";
  let data = [];
  for await (const chunk of resp.body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (event || data.length) yield { event: event || "message", data: data.join("\n") };
        event = "";
        data = [];
      } else if (line.startsWith(":")) {
        continue;
      } else if (line.startsWith("event:")) {
        event = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }
}

/** A worker of one namespace over HTTP: handle(group, fn), then run(). */
export class Worker {
  constructor(o = {}) {
    this.client = new Client(o);
    this.slots = o.slots ?? 1;
    this.name = o.name ?? "node";
    this.labels = o.labels ?? {};
    this.groups = o.groups;
    this.heartbeatTtlMs = o.heartbeatTtlMs ?? 10000;
    this.drainTimeoutMs = o.drainTimeoutMs ?? 30000;
    this.log = o.logger ?? ((level, msg) => process.stderr.write(`${new Date().toISOString()} ${level} wasmsched.worker: ${msg}\n`));
    this.handlers = new Map();
    this.fallback = null;
    this.id = null;
    this.running = new Map(); // token -> { run, controller, done }
    // tokens executing or not yet reported: one execution per token (a
    // reported token is never sent again, so the set stays bounded)
    this.seen = new Set();
    this.draining = false;
    this.stopped = new AbortController(); // the worker's own end
    // a file that gets "RUN TOKEN ATTEMPT" per execution start, synced (tests)
    this.journal = o.journal ?? process.env.WASMSCHED_JOURNAL ?? null;
  }

  /** fn(run, signal) handles runs of group: its value is the run's result
   * (a non-string is JSON-encoded); a throw fails the attempt; signal
   * aborts when the run must end (stop, timeout, drain). */
  handle(group, fn) {
    this.handlers.set(group, fn);
    return this;
  }

  /** fn handles the runs of every group without its own handler. */
  handleDefault(fn) {
    this.fallback = fn;
    return this;
  }

  async register() {
    let groups = this.groups;
    if (!groups && !this.fallback && this.handlers.size) groups = [...this.handlers.keys()].sort();
    const body = { name: this.name, slots: this.slots, labels: this.labels, heartbeat_ttl_ms: this.heartbeatTtlMs, drain_timeout_ms: this.drainTimeoutMs };
    if (groups?.length) body.groups = groups;
    const w = await this.client.request("POST", this.client.path("workers"), body);
    this.id = w.id;
    this.log("INFO", `registered as ${w.id} (${w.identity}), ${this.slots} slots`);
    return w;
  }

  /** Register, then execute assigned runs until SIGTERM/SIGINT (or stop());
   * then drain: no new runs, the runs in flight finish. */
  async run({ signals = true } = {}) {
    if (signals) {
      process.once("SIGTERM", () => this.stop());
      process.once("SIGINT", () => this.stop());
    }
    await this.register();
    const beat = this.beat();
    await this.stream();
    this.stopped.abort();
    await beat;
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    this.log("INFO", "worker stopped");
  }

  /** Start the drain: the server assigns no new runs; the runs in flight
   * finish (within the drain timeout), then run() returns. */
  stop() {
    if (this.draining) return;
    this.draining = true;
    this.log("INFO", `draining: ${this.running.size} runs in flight`);
    this.client.request("DELETE", this.client.path("workers", this.id)).catch((e) => {
      this.log("WARN", `drain: ${e.message}`);
      this.stopped.abort();
    });
  }

  async beat() {
    const every = Math.max(this.heartbeatTtlMs / 3, 100);
    while (!this.stopped.signal.aborted) {
      await sleep(every, this.stopped.signal);
      if (this.stopped.signal.aborted) return;
      try {
        await this.client.request("POST", this.client.path("workers", this.id, "heartbeat"), {});
      } catch (e) {
        if (e.status === 404 && !this.draining) {
          this.log("WARN", `the server no longer knows this worker (${e.detail}): registering again`);
          await this.register().catch((err) => this.log("WARN", `register: ${err.message}`));
        } else {
          this.log("WARN", `heartbeat: ${e.message}`);
        }
      }
    }
  }

  async stream() {
    let backoff = 100;
    while (!this.stopped.signal.aborted) {
      try {
        const resp = await this.client.request("GET", this.client.path("workers", this.id, "assignments"), undefined, {
          stream: true,
          signal: this.stopped.signal,
        });
        backoff = 100;
        for await (const { event, data } of readEvents(resp)) {
          if (event === "assign") this.assign(JSON.parse(data));
          else if (event === "stop") this.running.get(JSON.parse(data).token)?.controller.abort(new Error("stopped"));
          else if (event === "deregistered") {
            if (this.draining) {
              await Promise.allSettled([...this.running.values()].map((r) => r.done));
              return;
            }
            await this.register();
            break;
          }
        }
      } catch (e) {
        if (this.stopped.signal.aborted) return;
        if (e.status === 404 && !this.draining) {
          await this.register().catch((err) => this.log("WARN", `register: ${err.message}`));
        } else if (e.status === 401 || e.status === 403) {
          this.log("ERROR", `assignments: ${e.message}`);
          return;
        } else {
          this.log("WARN", `assignments: ${e.message}; reconnecting`);
        }
      }
      await sleep(backoff, this.stopped.signal);
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  assign(a) {
    if (this.seen.has(a.token)) return; // sent again after a reconnect
    this.seen.add(a.token);
    const run = {
      id: a.run,
      token: a.token,
      group: a.group,
      payload: a.payload ?? "",
      attempt: a.attempt ?? 1,
      maxAttempts: a.max_attempts ?? 1,
      timeoutMs: a.timeout_ms ?? 0,
      deadline: a.deadline ? new Date(a.deadline) : null,
      durationMs: a.duration_ms ?? 0,
      traceparent: a.traceparent ?? "",
      namespace: this.client.namespace,
      output: "",
      exitCode: null,
    };
    // progress(fraction, message): the latest, sent at most once a second
    let last = 0, pending = null, ended = false;
    const send = (f, m) => {
      const body = { token: run.token, message: String(m ?? "").slice(0, 256) };
      if (f !== undefined && f !== null) body.fraction = Math.min(Math.max(Number(f), 0), 1);
      this.client.request("POST", this.client.path("workers", this.id, "runs", run.id, "progress"), body).catch(() => {});
    };
    run.progress = (fraction, message = "") => {
      if (ended) return;
      const wait = 1000 - (Date.now() - last);
      if (pending) return void (pending.args = [fraction, message]);
      if (wait > 0) {
        pending = { args: [fraction, message] };
        setTimeout(() => {
          const p = pending;
          pending = null;
          if (ended || !p) return;
          last = Date.now();
          send(...p.args);
        }, wait).unref?.();
        return;
      }
      last = Date.now();
      send(fraction, message);
    };
    run.endProgress = () => { ended = true; };
    if (this.journal) {
      const fd = fs.openSync(this.journal, "a");
      try {
        fs.writeSync(fd, `${run.id} ${run.token} ${run.attempt}\n`);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
    }
    const controller = new AbortController();
    const entry = { run, controller, done: null };
    this.running.set(run.token, entry);
    entry.done = this.execute(run, controller.signal, this.id).finally(() => {
      run.endProgress();
      this.running.delete(run.token);
    });
  }

  async execute(run, signal, workerId) {
    const fn = this.handlers.get(run.group) ?? this.fallback;
    const report = { token: run.token };
    try {
      if (!fn) throw new Error(`no handler for group ${run.group} on this worker`);
      const result = await fn(run, signal);
      report.result = result === undefined || result === null ? "" : typeof result === "string" ? result : JSON.stringify(result);
    } catch (e) {
      report.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    }
    if (run.output) report.output = run.output;
    if (run.exitCode !== null && run.exitCode !== undefined) report.exit_code = run.exitCode;
    report.run = run.id;
    await this.report(workerId, report);
  }

  // report queues an outcome: what finished while the last request was out
  // goes in the next (POST .../reports); it resolves once sent.
  report(workerId, report) {
    return new Promise((resolve) => {
      this.outbox ??= [];
      this.outbox.push({ workerId, report, resolve });
      if (!this.sending) this.flush();
    });
  }

  async flush() {
    this.sending = true;
    while (this.outbox.length) {
      const batch = this.outbox.splice(0, 256);
      const byWorker = new Map();
      for (const b of batch) byWorker.set(b.workerId, [...(byWorker.get(b.workerId) ?? []), b.report]);
      for (const [wid, reports] of byWorker) {
        try {
          const res = await this.client.request("POST", this.client.path("workers", wid, "reports"), { reports });
          for (const r of res?.refused ?? []) this.log("WARN", `report of run ${r.run} (token ${r.token}) refused: ${r.error}`);
        } catch (e) {
          this.log("WARN", `reports of ${reports.length} runs: ${e.message}`);
        }
      }
      for (const b of batch) {
        this.seen.delete(b.report.token);
        b.resolve();
      }
    }
    this.sending = false;
  }
}

// anySignal aborts when a or b does (AbortSignal.any is Node 20.3+).
function anySignal(a, b) {
  const c = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) {
      c.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
