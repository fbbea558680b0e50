// wasmsched operator UI: plain JavaScript, no build step. It reads the
// HTTP API (/api/v1) and follows changes by server-sent events (one
// EventSource per page load), re-rendering the current view in place.
"use strict";

const state = { ns: localStorage.getItem("wasmsched.ns") || "", scope: "read", es: null, view: null, timer: null };

const $ = (sel, el = document) => el.querySelector(sel);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const when = (t) => (t ? new Date(t).toLocaleString() : "-"); // date and time: lists span days
const labelList = (m) => Object.keys(m).sort().map((k) => `<span class="label mono">${esc(k)}=${esc(m[k])}</span>`).join(" ");
const badge = (s) => `<span class="state ${esc(s)}" data-state="${esc(s)}">${esc(s)}</span>`;
// stateOf is a run's state badge, a delayed WAITING run (not_before ahead,
// a retry's backoff) marked as such with when it is due
const stateOf = (r) => badge(r.state) + (r.state === "WAITING" && r.not_before && new Date(r.not_before) > Date.now()
  ? ` <span class="muted" data-delayed="${esc(r.id)}">delayed until ${esc(when(r.not_before))}</span>` : "");
const ms = (n) => (n >= 60000 ? `${Math.round(n / 6000) / 10}m` : n >= 1000 ? `${Math.round(n / 100) / 10}s` : `${Math.round(n)}ms`);
const runLink = (id) => `<a href="#/runs/${encodeURIComponent(id)}" data-run-link="${esc(id)}">${esc(id)}</a>`;
const groupLink = (g) => `<a href="#/groups/${encodeURIComponent(g)}">${esc(g)}</a>`;
const nsPath = (p) => `/api/v1/namespaces/${encodeURIComponent(state.ns)}${p}`;

class HTTPError extends Error {
  constructor(status, body) { super(body.error || `HTTP ${status}`); this.status = status; this.code = body.code; }
}

async function api(path, opts = {}) {
  const res = await fetch(path, { credentials: "same-origin", headers: { "Content-Type": "application/json" }, ...opts });
  const body = await res.json().catch(() => ({}));
  if (res.status === 401) { showLogin(); throw new HTTPError(401, body); }
  if (!res.ok) throw new HTTPError(res.status, body);
  return body;
}

function showLogin(msg) {
  const d = $("#login");
  $("#login-error").textContent = msg || "";
  if (!d.open) d.showModal();
}

$("#login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const res = await fetch("/ui/login", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token: $("#login-token").value }) });
  if (!res.ok) { showLogin("That token is not accepted."); return; }
  $("#login").close();
  await start();
});

// --- views ---

const views = {
  async overview(main) {
    const [o, sr] = await Promise.all([api(nsPath("/overview")), api(nsPath("/series?window=1h"))]);
    const { leader, slots } = o;
    const total = slots.free + slots.assigned + (slots.draining || 0);
    const pct = total ? Math.round((100 * slots.assigned) / total) : 0;
    paint(main, `<h1>Overview: ${esc(o.namespace)}</h1>
      <div class="cards">
        <div class="card"><div class="k">leader</div><div class="v mono" id="leader-identity">${esc(leader.identity || "none")}</div>
          <div class="muted">epoch <span id="leader-epoch">${leader.epoch}</span>${leader.since ? " since " + when(leader.since) : ""}</div></div>
        <div class="card"><div class="k">slots in use</div><div class="v">${slots.assigned} / ${total}</div>
          <div class="bar"><span style="width:${pct}%"></span></div>
          ${slots.draining ? `<div class="muted" id="ov-draining">${slots.draining} free on draining workers (not offered)</div>` : ""}</div>
        <div class="card"><div class="k">groups</div><div class="v">${o.groups}</div></div>
        <div class="card"><div class="k">waiting runs</div><div class="v" id="ov-waiting">${o.waiting}</div></div>
        <div class="card"><div class="k">active runs</div><div class="v" id="ov-active">${o.active}</div></div>
      </div>
      <h2>The last hour</h2>
      <div class="charts" id="ov-charts">
        ${chart(sr, "launches and finishes per 10 s", [["launches", "#2f6fde"], ["finishes", "#2e8b57"]])}
        ${chart(sr, "waiting and active runs", [["waiting", "#999"], ["active", "#2f6fde"]])}
        ${chart(sr, "slots in use", [["slots_used", "#e67e22"], ["slots_total", "#ccc"]])}</div>
      ${allocationTable(o.allocation, o.allocation.usage, "ov-allocation")}
      <h2>Workers</h2>
      <table><thead><tr><th>worker</th><th>alive</th><th>slots</th><th>runs on its slots</th></tr></thead><tbody>
      ${slots.workers.map((w) => `<tr><td><span class="mono">${esc(w.identity)}</span>${w.labels ? ` ${labelList(w.labels)}` : ""}${w.groups ? ` <span class=muted>serves ${esc(w.groups.join(", "))}</span>` : ""}</td><td>${w.alive ? "yes" : "<span class=error>no</span>"}${w.draining ? " <span class=muted>(draining: takes no new run)</span>" : ""}</td>
        <td>${w.slots.filter((s) => s.run).length} / ${w.slots.length}</td>
        <td>${w.slots.filter((s) => s.run).map((s) => `#${s.index} ${runLink(s.run)}`).join(", ") || "-"}</td></tr>`).join("") ||
        `<tr><td colspan=4 class=muted>no workers registered</td></tr>`}
      </tbody></table>`);
  },

  async groups(main) {
    const { groups } = await api(nsPath("/groups"));
    paint(main, `<h1>Groups</h1>
      <table><thead><tr><th>group</th><th>policy</th><th class=num>max_active</th><th class=num>active</th><th class=num>waiting</th><th>latest decision</th></tr></thead><tbody>
      ${groups.map((g) => {
        const d = g.latest_decision;
        return `<tr data-group="${esc(g.name)}"><td>${groupLink(g.name)}</td><td>${esc(g.policy)}</td><td class=num>${g.max_active}</td>
          <td class=num>${g.active}</td><td class=num>${g.waiting}</td>
          <td>${d ? `${when(d.at)}: ${esc(d.policy)} ${esc(d.policy_version)}: ${d.launched} launched, ${d.discarded} discarded, ${d.stopped} stopped` : "-"}</td></tr>`;
      }).join("") || `<tr><td colspan=6 class=muted>no groups yet</td></tr>`}
      </tbody></table>`);
  },

  async group(main, name) {
    const [g, { policies }, recent, sr, al] = await Promise.all([api(nsPath(`/groups/${encodeURIComponent(name)}`)), api(nsPath("/policies")),
      api(nsPath(`/runs?group=${encodeURIComponent(name)}&limit=40`)), api(nsPath(`/series?group=${encodeURIComponent(name)}&window=1h`)),
      api(nsPath(`/allocation?group=${encodeURIComponent(name)}`))]);
    const runRow = (r) => `<tr data-run="${esc(r.id)}"><td>${runLink(r.id)}</td><td class=num>${r.seq}</td><td>${badge(r.state)}</td>
      <td class=num>${r.priority}</td><td>${(r.assignments || []).map((a) => `<span class=mono>${esc(a.worker)}#${a.slot}</span>`).join(" ") || "-"}</td>
      <td><a href="#/runs/${encodeURIComponent(r.id)}/explain" data-explain="${esc(r.id)}">explain</a></td></tr>`;
    // a group's detail lists are left out when empty (client.Group)
    g.active_runs = g.active_runs || []; g.queue = g.queue || []; g.decisions = g.decisions || [];
    paint(main, `<h1>Group ${esc(g.name)}</h1>
      <dl class="kv"><dt>policy</dt><dd id="group-policy">${esc(g.policy)}${g.latest_decision ? ` <span class=mono>${esc(g.latest_decision.policy_version)}</span>` : ""}</dd><dt>max_active</dt><dd>${g.max_active}</dd>
        <dt>window</dt><dd>${g.window}</dd><dt>active / waiting</dt><dd>${g.active} / ${g.waiting}${g.delayed ? ` (+${g.delayed} not due yet)` : ""}</dd>
        ${g.run_timeout_ms || g.max_attempts > 1 ? `<dt>run defaults</dt><dd id="group-run-defaults">${g.run_timeout_ms ? "timeout " + ms(g.run_timeout_ms) : ""}${g.max_attempts > 1 ? ` ${g.max_attempts} attempts` : ""}</dd>` : ""}
        <dt>retention</dt><dd>${g.retention === "default" ? "namespace default" : esc(g.retention)}</dd>
        <dt>state</dt><dd id="group-paused">${g.paused ? `paused since ${esc(g.paused_at)} by ${esc(g.paused_by)}` : "deciding"}</dd>
        ${Object.keys(g.params || {}).length ? `<dt>params</dt><dd id="group-params">${labelList(g.params)}</dd>` : ""}
        ${Object.keys(g.require || {}).length ? `<dt>requires</dt><dd id="group-require">${labelList(g.require)} <span class=muted>(its runs go only to workers with these labels)</span></dd>` : ""}
        ${(g.prefer || []).length ? `<dt>prefers</dt><dd id="group-prefer">${esc(g.prefer.join(", "))} <span class=muted>(its runs go to workers with these labels first)</span></dd>` : ""}
        ${g.same_worker ? `<dt>same worker</dt><dd id="group-same-worker">yes <span class=muted>(all of a run's slots on one worker)</span></dd>` : ""}
        ${g.wake_at ? `<dt>wake</dt><dd id="group-wake">the policy decides again at ${when(g.wake_at)}</dd>` : ""}</dl>
      ${state.scope === "admin" ? `<p class="inline" id="group-controls">
        <button class="secondary" data-group-action="${g.paused ? "resume" : "pause"}">${g.paused ? "Resume" : "Pause"}</button>
        <button class="secondary" data-group-action="discard" data-confirm="Discard every waiting run of ${esc(g.name)}?">Discard waiting</button>
        <button class="secondary" data-group-action="stop" data-confirm="Stop every active run of ${esc(g.name)}?">Stop active</button>
        <button class="secondary" data-group-action="retry" id="group-retry" data-confirm="Retry every FAILED run of ${esc(g.name)}?">Retry failed</button>
        <a id="group-failed" href="#/runs?${new URLSearchParams({ group: g.name, state: "FAILED" })}">failed runs</a>
        <button class="secondary" id="group-drain" title="pause, discard the waiting runs, stop the active ones: then the group can be deleted">Drain</button>
        <input id="bulk-label" placeholder="only label k=v" title="discard and stop only the runs with this label"></p>
      <form class="inline" id="submit-form"><b>Submit a run</b>
        <input name="id" placeholder="id (generated)"><input name="priority" type="number" placeholder="priority">
        <input name="duration" placeholder="duration ms (simulate)"><input name="payload" placeholder="payload">
        <input name="labels" placeholder="labels k=v k=v" title="space-separated key=value pairs">
        <button type="submit">Submit</button><span id="submit-result" class="muted" data-keep></span></form>` : ""}
      <h2>Active runs</h2>
      <table><thead><tr><th>run</th><th class=num>seq</th><th>state</th><th class=num>prio</th><th>slots</th><th></th></tr></thead>
        <tbody id="group-active">${g.active_runs.map(runRow).join("") || `<tr><td colspan=6 class=muted>none</td></tr>`}</tbody></table>
      ${al.allocation.fair_label ? allocationTable(al, al.group || [], "group-allocation") : ""}
      <h2>Queue (${g.queue_total || 0} waiting${g.queue_truncated ? ", showing the oldest and newest" : ""})</h2>
      <table><thead><tr><th>run</th><th class=num>seq</th><th>state</th><th class=num>prio</th><th>slots</th><th></th></tr></thead>
        <tbody id="group-queue">${g.queue.map(runRow).join("") || `<tr><td colspan=6 class=muted>empty</td></tr>`}</tbody></table>
      <h2>The last hour</h2>
      <div class="charts" id="group-charts">
        ${chart(sr, "waiting and active runs", [["waiting", "#999"], ["active", "#2f6fde"]])}
        ${chart(sr, "launches and finishes per 10 s", [["launches", "#2f6fde"], ["finishes", "#2e8b57"]])}
        ${chart(sr, "wait before launch, p50 and p95 (ms)", [["wait_p50_ms", "#2e8b57"], ["wait_p95_ms", "#c0392b"]])}</div>
      <h2>Timeline (the last ${recent.runs.length} runs)</h2>
      <div id="group-timeline">${timeline(recent.runs)}</div>
      <h2>Latest decisions</h2>
      <table><thead><tr><th>at</th><th>decision</th><th>policy</th><th class=num>launched</th><th class=num>discarded</th><th class=num>stopped</th></tr></thead><tbody>
        ${g.decisions.map((d) => `<tr><td>${when(d.at)}</td><td class=mono>${esc(d.id)}</td><td>${esc(d.policy)} ${esc(d.policy_version)}</td>
          <td class=num>${d.launched}</td><td class=num>${d.discarded}</td><td class=num>${d.stopped}</td></tr>`).join("") || `<tr><td colspan=6 class=muted>none yet</td></tr>`}</tbody></table>
      ${g.active_runs.some((r) => r.decision) ? `<h2>Why the active runs were launched</h2><ul>${g.active_runs.filter((r) => r.decision).map((r) => `<li>${runLink(r.id)}: ${esc(r.decision.action)}: ${esc(r.decision.reason || "-")}</li>`).join("")}</ul>` : ""}
      <h2>Dry-run another policy on this group</h2>
      <form class="inline" id="dryrun-form"><select id="dryrun-policy">${policies.filter((p) => p.kind === "serial").map((p) => `<option>${esc(p.name)}</option>`).join("")}</select>
        <button type="submit">Dry-run</button><span class="muted">read-only: nothing is written</span></form>
      <div id="dryrun-result" data-keep></div>`);
    const pairs = (text) => { // "k=v k=v" -> {k: v}
      const m = {};
      for (const p of (text || "").trim().split(/\s+/).filter(Boolean)) {
        const i = p.indexOf("=");
        if (i < 1) throw new Error(`label ${p}: want key=value`);
        m[p.slice(0, i)] = p.slice(i + 1);
      }
      return m;
    };
    main.querySelectorAll("button[data-group-action]").forEach((b) => b.addEventListener("click", async () => {
      const action = b.dataset.groupAction, bulk = action === "discard" || action === "stop" || action === "retry";
      try {
        const labels = bulk ? pairs($("#bulk-label").value) : {};
        const only = Object.keys(labels).length ? ` with label ${Object.entries(labels).map(([k, v]) => k + "=" + v).join(" ")}` : "";
        if (b.dataset.confirm && !confirm(b.dataset.confirm.replace(/\?$/, only + "?"))) return;
        const res = await api(nsPath(`/groups/${encodeURIComponent(name)}/${action}`), { method: "POST", body: JSON.stringify({ labels }) });
        if (bulk) alert(`${res.runs} run(s) ${{ discard: "discarded", stop: "asked to stop", retry: "FAILED, retried" }[action]}${only}`);
      } catch (err) { alert(err.message); }
      render();
    }));
    const drain = $("#group-drain");
    if (drain) drain.addEventListener("click", async () => {
      if (!confirm(`Drain ${name}: pause it, discard its waiting runs and stop its active ones?`)) return;
      try {
        const g = (a) => api(nsPath(`/groups/${encodeURIComponent(name)}/${a}`), { method: "POST", body: JSON.stringify({}) });
        await g("pause");
        const d = await g("discard"), st = await g("stop");
        alert(`${name}: paused, ${d.runs} waiting run(s) discarded, ${st.runs} active run(s) asked to stop`);
      } catch (err) { alert(err.message); }
      render();
    });
    const sub = $("#submit-form");
    if (sub) sub.addEventListener("submit", async (e) => {
      e.preventDefault();
      const f = new FormData(sub);
      try {
        const body = { labels: pairs(f.get("labels")) };
        if (f.get("id")) body.id = f.get("id");
        if (f.get("priority")) body.priority = Number(f.get("priority"));
        if (f.get("duration")) body.duration_ms = Number(f.get("duration"));
        if (f.get("payload")) body.payload = f.get("payload");
        const run = await api(nsPath(`/groups/${encodeURIComponent(name)}/runs`), { method: "POST", body: JSON.stringify(body) });
        show("submit-result", `submitted ${runLink(run.id)}`, "muted");
      } catch (err) { show("submit-result", esc(err.message), "error"); }
    });
    $("#dryrun-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      show("dryrun-result", `<p class=muted>running ${esc($("#dryrun-policy").value)} on the group's snapshot...</p>`);
      try {
        const d = await api(nsPath(`/groups/${encodeURIComponent(name)}/dry-run`), { method: "POST", body: JSON.stringify({ policy: $("#dryrun-policy").value }) });
        show("dryrun-result", `<p>${esc(d.policy)} is <b>${esc(d.outcome)}</b>${d.errors.length ? ": " + esc(d.errors.join("; ")) : ""}; active policy ${esc(d.active.policy)}.</p>
          <table><thead><tr><th>run</th><th>active decides</th><th>candidate decides</th></tr></thead><tbody>
          ${(d.diff || []).map((x) => `<tr><td>${esc(x.run)}</td><td>${esc(x.active)}</td><td>${esc(x.candidate)}</td></tr>`).join("") || `<tr><td colspan=3 class=diff-same>the same decision</td></tr>`}</tbody></table>`);
      } catch (err) { show("dryrun-result", `<p class=error>${esc(err.message)}</p>`); }
    });
  },

  async runs(main, _id, query) {
    const q = new URLSearchParams(query);
    const p = await api(nsPath(`/runs?${q}`));
    const filt = (k) => esc(q.get(k) || "");
    paint(main, `<h1>Runs</h1>
      <form class="inline" id="runs-filter"><input name="group" placeholder="group" value="${filt("group")}">
        <input name="label" placeholder="label k=v" value="${filt("label")}" title="only runs with this label (key=value)">
        <select name="state"><option value="">any state</option>${["WAITING", "LAUNCHED", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED", "DISCARDED"]
          .map((s) => `<option ${q.get("state") === s ? "selected" : ""}>${s}</option>`).join("")}</select>
        <button type="submit">Filter</button></form>
      <table><thead><tr><th>run</th><th>group</th><th class=num>seq</th><th>state</th><th>policy</th><th>submitted</th><th>reason</th></tr></thead>
        <tbody id="runs-body">${p.runs.map(runsRow).join("") || `<tr><td colspan=7 class=muted>no runs</td></tr>`}</tbody></table>
      <div class="pager">${q.get("cursor") ? `<a href="#/runs">first page</a>` : ""}
        ${p.next_cursor ? `<a id="next-page" href="#/runs?${new URLSearchParams({ ...Object.fromEntries(q), cursor: p.next_cursor })}">next page</a>` : ""}</div>`);
    $("#runs-filter").addEventListener("submit", (e) => {
      e.preventDefault();
      const f = new URLSearchParams(new FormData(e.target));
      for (const [k, v] of [...f]) if (!v) f.delete(k);
      location.hash = `#/runs?${f}`;
    });
  },

  async run(main, id) {
    const r = await api(nsPath(`/runs/${encodeURIComponent(id)}`));
    const d = r.decision;
    paint(main, `<h1>Run ${esc(r.id)} ${badge(r.state)}</h1>
      <dl class="kv" id="run-record"><dt>group</dt><dd>${groupLink(r.group)}</dd><dt>seq</dt><dd>${r.seq}</dd><dt>state</dt><dd id="run-state">${stateOf(r)}</dd>
        <dt>slots</dt><dd>${r.slots}</dd><dt>priority</dt><dd>${r.priority}</dd><dt>launched by</dt><dd>${esc(r.policy || "-")} ${esc(r.policy_version)}</dd>
        <dt>payload</dt><dd id="run-payload" class=mono>${r.payload ? esc(r.payload.length > 2000 ? r.payload.slice(0, 2000) + "…" : r.payload) : "-"}</dd>
        <dt>submitted</dt><dd>${when(r.submitted_at)}</dd><dt>started</dt><dd>${when(r.started_at)}</dd><dt>finished</dt><dd>${when(r.finished_at)}</dd>
        <dt>reason</dt><dd>${esc(r.reason || "-")}</dd>
        ${Object.keys(r.labels || {}).length ? `<dt>labels</dt><dd id="run-labels">${labelList(r.labels)}</dd>` : ""}
        ${r.progress ? `<dt>progress</dt><dd id="run-progress">${r.progress.fraction == null ? "" : `<progress max=1 value="${r.progress.fraction}"></progress> ${Math.round(r.progress.fraction * 100)}% `}${esc(r.progress.message)} <span class=muted>(${when(r.progress.at)})</span></dd>` : ""}
        ${runPlacement(r)}
        ${r.not_before ? `<dt>not before</dt><dd id="run-not-before">${esc(when(r.not_before))}${r.state === "WAITING" && new Date(r.not_before) > Date.now() ? ` (${r.attempt > 1 ? "retry due" : "due"} in ${ms(new Date(r.not_before) - Date.now())})` : ""}</dd>` : ""}
        ${r.timeout_ms ? `<dt>timeout</dt><dd>${ms(r.timeout_ms)}${r.deadline ? ", deadline " + esc(when(r.deadline)) : ""}</dd>` : ""}
        ${r.max_attempts > 1 ? `<dt>attempt</dt><dd id="run-attempt">${r.attempt} of ${r.max_attempts}</dd>` : ""}
        ${r.schedule ? `<dt>schedule</dt><dd><a href="#/schedules">${esc(r.schedule)}</a></dd>` : ""}
        ${r.exit_code !== null ? `<dt>exit code</dt><dd id="run-exit-code">${r.exit_code}</dd>` : ""}
        ${r.started_at && r.finished_at ? `<dt>ran for</dt><dd>${ms(new Date(r.finished_at) - new Date(r.started_at))}</dd>` : ""}
        ${r.result ? `<dt>result</dt><dd id="run-result" class=mono>${esc(r.result.length > 2000 ? r.result.slice(0, 2000) + "…" : r.result)}</dd>` : ""}
        ${(r.assignments || []).length ? `<dt>slots held</dt><dd>${r.assignments.map((a) => `<span class=mono>${esc(a.worker)}#${a.slot}</span>`).join(" ")}</dd>` : ""}</dl>
      ${r.output ? `<h2>Output (last 4 KiB)</h2><pre id="run-output">${esc(r.output)}</pre>` : ""}
      ${r.attempts.length ? `<h2>Attempts</h2><table id="run-attempts"><thead><tr><th class=num>attempt</th><th>outcome</th><th>worker</th><th>started</th><th>finished</th><th>reason</th></tr></thead><tbody>
        ${r.attempts.map((a) => `<tr><td class=num>${a.n}</td><td>${badge(a.outcome)}</td><td class=mono>${esc(a.worker)}</td><td>${when(a.started_at)}</td><td>${when(a.finished_at)}</td><td>${esc(a.reason)}</td></tr>`).join("")}</tbody></table>` : ""}
      <h2>Decision trail</h2>
      ${d ? `<dl class="kv" id="run-decision"><dt>decision</dt><dd class=mono>${esc(d.id)} (epoch ${d.epoch})</dd><dt>at</dt><dd>${when(d.at)}</dd>
        <dt>action</dt><dd>${esc(d.action)}</dd><dt>by</dt><dd>${esc(d.policy)} ${esc(d.policy_version)} (${d.policy_registry ? "registry v" + d.policy_registry : "built-in"}, sha256 <span class=mono>${esc(d.policy_sha256.slice(0, 16))}</span>)</dd>
        <dt>because</dt><dd>${esc(d.reason || "-")}</dd></dl>` : `<p class=muted>No policy decision has moved this run yet.</p>`}
      <p><a href="#/runs/${encodeURIComponent(r.id)}/explain">Explain this run</a>
        ${["WAITING", "LAUNCHED", "RUNNING"].includes(r.state) && state.scope === "admin" ? ` · <button class="secondary" id="run-stop">Stop</button>` : ""}
        ${["FAILED", "STOPPED"].includes(r.state) && state.scope === "admin" ? ` · <button class="secondary" id="run-retry">Retry</button>` : ""}</p>`);
    const retry = $("#run-retry");
    if (retry) retry.addEventListener("click", async () => {
      if (!confirm(`Retry run ${id}? It goes back to WAITING as attempt ${r.attempt + 1}.`)) return;
      try {
        await api(nsPath(`/runs/${encodeURIComponent(id)}/retry`), { method: "POST" });
      } catch (err) { alert(err.message); }
      render();
    });
    const stop = $("#run-stop");
    if (stop) stop.addEventListener("click", async () => {
      const reason = prompt(`Stop run ${id}? Reason (recorded with the run):`, "stopped from the web UI");
      if (reason === null) return; // cancelled
      try {
        await api(nsPath(`/runs/${encodeURIComponent(id)}/stop`), { method: "POST", body: JSON.stringify({ reason }) });
      } catch (err) { alert(err.message); }
      render();
    });
  },

  async explain(main, id) {
    const x = await api(nsPath(`/runs/${encodeURIComponent(id)}/explain`));
    paint(main, `<h1>Why is ${runLink(x.run.id)} ${badge(x.run.state)}?</h1>
      <div class="why" id="explain-why">${esc(x.why)}</div>
      ${x.place ? `<dl class="kv"><dt>place</dt><dd>${x.place} of ${x.waiting} waiting (1 = next)</dd>
        <dt>active</dt><dd>${(x.active || []).length} of max_active ${x.max_active}: ${(x.active || []).map((a) => runLink(a.id) + " " + badge(a.state)).join(", ") || "none"}</dd>
        <dt>policy</dt><dd>${esc(x.policy)}</dd><dt>the policy now</dt><dd>${x.now ? esc(x.now) + " " + esc(x.now_reason || "") : "no action for it"}</dd>
        <dt>in the policy's window</dt><dd>${x.in_window ? "yes" : "no"}</dd></dl>` : ""}
      <p><a href="#/groups/${encodeURIComponent(x.run.group)}">group ${esc(x.run.group)}</a></p>`);
  },

  async schedules(main) {
    const { schedules } = await api(nsPath("/schedules"));
    const admin = state.scope === "admin";
    paint(main, `<h1>Schedules</h1>
      <table><thead><tr><th>name</th><th>group</th><th>cron</th><th>zone</th><th>next</th><th>last run</th><th class=num>submitted</th><th class=num>missed</th><th></th></tr></thead>
        <tbody id="schedules-body">${schedules.map((c) => `<tr data-schedule="${esc(c.name)}"><td>${esc(c.name)}</td><td>${groupLink(c.group)}</td><td class=mono>${esc(c.cron)}</td>
          <td>${esc(c.tz || "UTC")}</td><td>${c.paused ? "paused" : esc(c.next || "-")}</td><td>${c.last_run ? runLink(c.last_run) : "-"}</td>
          <td class=num>${c.submitted}</td><td class=num>${c.missed}</td>
          <td>${admin ? `<button class="secondary" data-sched-action="${c.paused ? "resume" : "pause"}" data-name="${esc(c.name)}">${c.paused ? "Resume" : "Pause"}</button>` : ""}</td></tr>`).join("")
          || `<tr><td colspan=9 class=muted>no schedules (wasmsched schedule set NAME --group G --cron EXPR)</td></tr>`}</tbody></table>
      <p class=muted>Of the ticks missed while no leader ran, the latest is submitted once; the others count as missed.</p>`);
    main.querySelectorAll("button[data-sched-action]").forEach((b) => b.addEventListener("click", async () => {
      try {
        await api(nsPath(`/schedules/${encodeURIComponent(b.dataset.name)}/${b.dataset.schedAction}`), { method: "POST", body: "{}" });
      } catch (err) { alert(err.message); }
      render();
    }));
  },

  async policies(main) {
    const { policies } = await api(nsPath("/policies"));
    const admin = state.scope === "admin";
    paint(main, `<h1>Policies</h1>${policies.map((p) => `
      <h2 data-policy="${esc(p.name)}">${esc(p.name)} <span class=muted>(${esc(p.kind || "?")})</span> · active version: <span class="policy-active" data-policy-active="${esc(p.name)}">${p.active ? "v" + p.active : p.builtin ? "the built-in" : "none"}</span></h2>
      ${p.versions.length ? `<table><thead><tr><th class=num>version</th><th>sha256</th><th>pushed</th><th>by</th><th>note</th></tr></thead><tbody>
        ${p.versions.map((v) => `<tr><td class=num>v${v.version}${v.version === p.active ? " (active)" : ""}</td><td class=mono>${esc(v.sha256.slice(0, 16))}</td>
          <td>${when(v.pushed_at)}</td><td>${esc(v.who)}</td><td>${esc(v.note)}</td></tr>`).join("")}</tbody></table>` : `<p class=muted>${p.builtin ? "built-in only; no version pushed" : ""}</p>`}
      ${admin && p.versions.length ? `<form class="inline" data-activate="${esc(p.name)}"><select>${p.versions.filter((v) => !v.deleted).map((v) => v.version)
          .map((v) => `<option value="${v}">v${v}</option>`).join("")}</select><button type="submit">Activate</button>
        ${p.versions.filter((v) => !v.deleted).length > 1 || (p.builtin && p.active) ? `<button type="button" class="secondary" data-rollback="${esc(p.name)}">Roll back</button>` : ""}</form>` : ""}
      ${p.history.length ? `<details><summary>history (${p.history.length})</summary><ul>${p.history.map((h) => `<li>${when(h.at)} ${esc(h.action)} v${h.version} by ${esc(h.who)} ${esc(h.note)}</li>`).join("")}</ul></details>` : ""}
    `).join("")}${admin ? "" : `<p class=muted>Activate and roll back need an admin token.</p>`}`);
    main.querySelectorAll("form[data-activate]").forEach((f) => f.addEventListener("submit", async (e) => {
      e.preventDefault();
      await api(nsPath(`/policies/${encodeURIComponent(f.dataset.activate)}/activate`), { method: "POST", body: JSON.stringify({ version: Number($("select", f).value), note: "from the web UI" }) });
      render();
    }));
    main.querySelectorAll("button[data-rollback]").forEach((b) => b.addEventListener("click", async () => {
      try {
        await api(nsPath(`/policies/${encodeURIComponent(b.dataset.rollback)}/rollback`), { method: "POST", body: JSON.stringify({ note: "from the web UI" }) });
      } catch (err) { alert(err.message); }
      render();
    }));
  },
};

// timeline draws runs as bars over time (plain SVG): the waiting span
// grey, the running span colored by outcome, a discard as a cross, so a
// serial handoff, a discard and a priority stop show at a glance.
// chart draws a time series (GET .../series) as lines, one per [field,
// color]: plain SVG, the x axis the last hour, gaps (no point: nothing
// happened) drawn as zero.
// allocationTable: the namespace's allocation policy and the slots in use
// per value of its fair label (per group without one).
function allocationTable(a, usage, id) {
  const al = a.allocation, by = a.by === "group" ? "group" : a.by;
  const weight = (v) => (al.weights && al.weights[v]) || 1;
  const rows = usage.map((u) => `<tr><td class=mono>${esc(u.value || "(none)")}</td><td class=num>${u.slots}</td>
    <td class=num>${a.slots ? Math.round((100 * u.slots) / a.slots) : 0}%</td><td class=num>${u.runs}</td><td class=num>${weight(u.value)}</td></tr>`).join("");
  return `<h2>Slots by ${esc(by)}</h2>
    <p class=muted>allocation policy <b>${esc(al.policy)}</b>${al.fair_label ? ` across label <b>${esc(al.fair_label)}</b>` : ""};
      ${a.free} of ${a.slots} slots free; ${a.launched} launched runs waiting for slots</p>
    <table id="${id}"><thead><tr><th>${esc(by)}</th><th class=num>slots</th><th class=num>share</th><th class=num>runs</th><th class=num>weight</th></tr></thead>
      <tbody>${rows || `<tr><td colspan=5 class=muted>no slot in use</td></tr>`}</tbody></table>`;
}

function chart(sr, title, lines) {
  const W = 300, H = 90, now = Date.now(), t0 = now - 3600e3;
  const pts = (sr.points || []).map((p) => ({ ...p, t: new Date(p.at).getTime() }));
  const max = Math.max(1, ...pts.flatMap((p) => lines.map(([k]) => p[k] || 0)));
  const x = (t) => ((t - t0) / (now - t0)) * W, y = (v) => H - 4 - (v / max) * (H - 12);
  const step = sr.interval_ms || 10000;
  const path = (k) => {
    let d = "", prev = null;
    for (const p of pts) {
      if (prev !== null && p.t - prev > 1.5 * step) d += ` L${x(prev + step).toFixed(1)},${y(0)} L${x(p.t - step).toFixed(1)},${y(0)}`; // a gap: zero
      d += `${d ? " L" : "M"}${x(p.t).toFixed(1)},${y(p[k] || 0).toFixed(1)}`;
      prev = p.t;
    }
    return d;
  };
  const last = pts.length ? pts[pts.length - 1] : null;
  return `<figure class="chart" data-points="${pts.length}"><figcaption>${esc(title)}
      ${lines.map(([k, c]) => `<span style="color:${c}">■ ${esc(k.replace(/_/g, " "))}${last ? " " + (last[k] || 0) : ""}</span>`).join(" ")}</figcaption>
    <svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(title)}">
      <line x1="0" y1="${H - 4}" x2="${W}" y2="${H - 4}" stroke="#ddd"/><text x="2" y="10" font-size="9" fill="#888">${max}</text>
      ${pts.length ? lines.map(([k, c]) => `<path d="${path(k)}" fill="none" stroke="${c}" stroke-width="1.5"/>`).join("") : `<text x="${W / 2}" y="${H / 2}" font-size="10" text-anchor="middle" fill="#888">no activity in the last hour</text>`}
    </svg></figure>`;
}

function timeline(runs) {
  if (!runs.length) return `<p class=muted>no runs yet</p>`;
  const t = (x) => (x ? new Date(x).getTime() : null);
  const now = Date.now();
  const rs = [...runs].sort((a, b) => t(a.submitted_at) - t(b.submitted_at));
  const t0 = Math.min(...rs.map((r) => t(r.submitted_at)));
  const t1 = Math.max(...rs.map((r) => t(r.finished_at) || now), t0 + 1);
  const W = 900, L = 150, rowH = 14, H = rs.length * rowH + 24;
  const x = (v) => L + ((v - t0) / (t1 - t0)) * (W - L - 10);
  const color = { SUCCEEDED: "#2e8b57", FAILED: "#c0392b", STOPPED: "#e67e22", STOPPING: "#e67e22", RUNNING: "#2f6fde", LAUNCHED: "#7aa7f0" };
  const bars = rs.map((r, i) => {
    const y = i * rowH + 4, sub = t(r.submitted_at), st = t(r.started_at), fin = t(r.finished_at);
    const waitEnd = st || fin || now;
    let out = `<text x="0" y="${y + 10}" font-size="10" class="mono">${esc(r.id.slice(0, 22))}</text>`;
    out += `<rect x="${x(sub)}" y="${y + 2}" width="${Math.max(x(waitEnd) - x(sub), 1)}" height="${rowH - 6}" fill="#ccc"><title>${esc(r.id)} waiting</title></rect>`;
    if (st) out += `<rect x="${x(st)}" y="${y}" width="${Math.max(x(fin || now) - x(st), 2)}" height="${rowH - 2}" fill="${color[r.state] || "#888"}"><title>${esc(r.id)} ${esc(r.state)} ${esc(r.reason || "")}</title></rect>`;
    if (r.state === "DISCARDED") out += `<text x="${x(fin || now) - 3}" y="${y + 10}" font-size="11" fill="#c0392b"><title>${esc(r.id)} discarded: ${esc(r.reason || "")}</title>×</text>`;
    return out;
  }).join("");
  const axis = `<text x="${L}" y="${H - 4}" font-size="10">${esc(new Date(t0).toLocaleString())}</text><text x="${W - 10}" y="${H - 4}" font-size="10" text-anchor="end">${esc(new Date(t1).toLocaleString())}</text>`;
  return `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="run timeline">${bars}${axis}</svg>
    <p class=muted>grey: waiting · blue: running · green: succeeded · red: failed · orange: stopped · ×: discarded</p>`;
}

function runsRow(r) {
  return `<tr data-run="${esc(r.id)}"><td>${runLink(r.id)}</td><td>${groupLink(r.group)}</td><td class=num>${r.seq}</td><td>${stateOf(r)}</td>
    <td>${esc(r.policy || "-")}</td><td>${when(r.submitted_at)}</td><td>${esc(r.reason || "")}</td></tr>`;
}

// route parses the hash: #/, #/groups, #/groups/G, #/runs?..., #/runs/ID, #/runs/ID/explain, #/policies, #/schedules.
function route() {
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "groups" && parts[1]) return { name: "group", nav: "groups", arg: parts[1], query };
  if (parts[0] === "groups") return { name: "groups", nav: "groups", query };
  if (parts[0] === "runs" && parts[1] && parts[2] === "explain") return { name: "explain", nav: "runs", arg: parts[1], query };
  if (parts[0] === "runs" && parts[1]) return { name: "run", nav: "runs", arg: parts[1], query };
  if (parts[0] === "runs") return { name: "runs", nav: "runs", query };
  if (parts[0] === "policies") return { name: "policies", nav: "policies", query };
  if (parts[0] === "schedules") return { name: "schedules", nav: "schedules", query };
  return { name: "overview", nav: "overview", query };
}

// paint replaces a view's content. Run events re-render the page under
// the user (debounced 250 ms), so a repaint of the same page keeps what the
// user typed (form fields by id or form/name, and which one had focus) and
// the results shown in elements marked data-keep (a dry-run's table, a
// submit's link); a handler still waiting on its request writes to the
// element on the page when it answers (show), not to the one it started on.
function paint(main, html) {
  const same = main.dataset.painted === location.hash;
  const key = (el) => el.id || (el.form && el.form.id && el.name ? `${el.form.id}/${el.name}` : "");
  const fields = same ? [...main.querySelectorAll("input, select, textarea")].map((el) => [key(el), el.value]).filter(([k]) => k) : [];
  const kept = same ? [...main.querySelectorAll("[data-keep]")].filter((el) => el.id).map((el) => [el.id, el.innerHTML, el.className]) : [];
  const focus = same && main.contains(document.activeElement) ? key(document.activeElement) : "";
  main.innerHTML = html;
  main.dataset.painted = location.hash;
  const byKey = new Map([...main.querySelectorAll("input, select, textarea")].map((el) => [key(el), el]));
  for (const [k, v] of fields) { const el = byKey.get(k); if (el && el.type !== "file") el.value = v; }
  for (const [id, h, cls] of kept) { const el = document.getElementById(id); if (el) { el.innerHTML = h; el.className = cls; } }
  if (focus && byKey.get(focus)) byKey.get(focus).focus();
}

// show writes a handler's result into the element with this id on the page
// now (a repaint may have replaced the one the handler started on).
function show(id, html, cls) {
  const el = document.getElementById(id);
  if (!el) return;
  el.innerHTML = html;
  if (cls !== undefined) el.className = cls;
}

// render draws the current route; one at a time (a render asked for while
// one runs, by a run event or a hash change, runs after it), so two
// renders never interleave their writes (the later one would replace what
// the user just did on the earlier one's page).
async function render() {
  if (state.rendering) { state.again = true; return; }
  state.rendering = true;
  document.body.dataset.busy = "1"; // (tests wait for the page to settle)
  try {
    do { state.again = false; await renderOnce(); } while (state.again);
  } finally { state.rendering = false; delete document.body.dataset.busy; }
}

async function renderOnce() {
  const r = route();
  state.view = r;
  document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === r.nav));
  const main = $("#main");
  try {
    await views[r.name](main, r.arg, r.query);
    main.dataset.view = r.name;
  } catch (err) {
    if (err.status !== 401) paint(main, `<p class=error>${esc(err.message)}</p>`);
  }
}

// onRun applies one run change to the current view without a reload: the
// runs table updates the row in place (or adds a new matching run on top);
// other views re-read, at most every 250 ms.
function onRun(run) {
  const v = state.view;
  if (v && v.name === "runs") {
    const q = new URLSearchParams(v.query);
    if ((q.get("group") && q.get("group") !== run.group) || (q.get("state") && q.get("state") !== run.state)) {
      const row = document.querySelector(`#runs-body tr[data-run="${CSS.escape(run.id)}"]`);
      if (row) row.remove();
      return;
    }
    const body = $("#runs-body");
    if (!body) return;
    const row = body.querySelector(`tr[data-run="${CSS.escape(run.id)}"]`);
    const tmp = document.createElement("tbody");
    tmp.innerHTML = runsRow(run);
    if (row) row.replaceWith(tmp.firstElementChild);
    else if (!q.get("cursor")) { const empty = body.querySelector("td.muted"); if (empty) empty.parentElement.remove(); body.prepend(tmp.firstElementChild); }
    return;
  }
  if (v && v.name === "run" && v.arg !== run.id) return;
  if (v && v.name === "group" && v.arg !== run.group) return;
  if (v && v.name === "policies") return;
  if (v && v.name === "schedules" && !run.schedule) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(render, 250);
}

function connect() {
  if (state.es) state.es.close();
  const es = new EventSource(nsPath("/events"));
  state.es = es;
  es.onopen = () => { $("#live").classList.add("on"); $("#live").textContent = "● live"; };
  es.onerror = () => { $("#live").classList.remove("on"); $("#live").textContent = "○ reconnecting"; };
  es.addEventListener("run", (e) => onRun(JSON.parse(e.data).run));
  es.addEventListener("missed", () => render());
}

async function start() {
  let who;
  try { who = await api("/api/v1/whoami"); } catch { return; }
  state.scope = who.scope;
  $("#who").textContent = who.auth ? `${who.scope} token` : "open (no tokens)";
  if (who.auth) {
    const out = document.createElement("button");
    out.className = "secondary"; out.id = "logout"; out.textContent = "Sign out";
    out.onclick = async () => { await fetch("/ui/logout", { method: "POST", credentials: "same-origin" }); location.reload(); };
    $("#who").after(out);
  }
  const { namespaces } = await api("/api/v1/namespaces");
  if (!namespaces.includes(state.ns)) state.ns = namespaces.includes("default") ? "default" : namespaces[0];
  const sel = $("#ns");
  sel.innerHTML = namespaces.map((n) => `<option ${n === state.ns ? "selected" : ""}>${esc(n)}</option>`).join("");
  sel.onchange = () => { state.ns = sel.value; localStorage.setItem("wasmsched.ns", state.ns); connect(); render(); };
  connect();
  await render();
}

window.addEventListener("hashchange", render);
start();

// runPlacement is a run's own placement (requirements, preferences, same
// worker) as a <dt>/<dd> pair, "" when it has none.
function runPlacement(r) {
  const parts = [];
  if (Object.keys(r.require || {}).length) parts.push("requires " + labelList(r.require) + " (and its group's)");
  if ((r.prefer || []).length) parts.push("prefers " + esc(r.prefer.join(", ")));
  if (r.same_worker) parts.push("all of its slots on one worker");
  return parts.length ? `<dt>placement</dt><dd id="run-placement">${parts.join("; ")}</dd>` : "";
}
