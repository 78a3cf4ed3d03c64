// The Switchyard operator console (served by the admin listener at /console/).
// Every number comes from the admin API, read with the operator's admin
// token: /admin/stats once a second (rates are differences between two
// reads), /admin/config for the tunables, /admin/config/edit and
// /admin/replay for the tuning form, /admin/rollouts/{route}/promote and
// /rollback for the rollouts' buttons; the Tenants view is tenants.js. Charts are uPlot's; without it the
// page shows the same numbers in tables.
"use strict";

const TOKEN_KEY = "switchyard-admin-token";
const POLL_MS = 1000;
const HISTORY = 300; // samples kept per chart: five minutes at one a second

const $ = (id) => document.getElementById(id);

let token = sessionStorage.getItem(TOKEN_KEY);
let timer = null;
let config = null; // GET /admin/config
let previous = null; // { at, stats } of the last read
let preview = null; // the last preview's request and answer
const series = { t: [], routes: new Map(), pools: new Map(), cache: [] };
const charts = new Map();

// ---- admin API ------------------------------------------------------------

async function api(path, init = {}) {
  const headers = Object.assign({}, init.headers || {});
  if (token) headers.authorization = "Bearer " + token;
  const res = await fetch(path, Object.assign({}, init, { headers, cache: "no-store" }));
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (_) {
    body = { error: text };
  }
  return { status: res.status, ok: res.ok, body };
}

function postJson(path, value) {
  return api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(value) });
}

// ---- small DOM helpers ------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function num(v, digits = 0) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  return Number(v).toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function pct(v, digits = 1) {
  return v === null || v === undefined ? "–" : num(v * 100, digits) + " %";
}

function cell(v, cls) {
  return el("td", cls ? { class: cls } : {}, v);
}

function facts(dl, pairs) {
  dl.replaceChildren(
    ...pairs.map(([name, value]) => {
      const key = name.replace(/[^a-z0-9]+/gi, "-").toLowerCase();
      return el("div", { "data-fact": key }, el("dt", {}, name), el("dd", {}, value));
    }),
  );
}

// ---- charts -----------------------------------------------------------------

const COLORS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7ea4", "#57606a"];

// Draws `data` ([xs, ...ys]) in the element `id`; the chart is rebuilt when
// its series change (a route or pool appears).
function plot(id, labels, data, opts = {}) {
  if (typeof uPlot === "undefined") return;
  const box = $(id);
  const key = labels.join("\u0000");
  let entry = charts.get(id);
  if (!entry || entry.key !== key) {
    if (entry) entry.chart.destroy();
    box.replaceChildren();
    const chart = new uPlot(
      {
        width: Math.max(320, box.clientWidth || 800),
        height: opts.height || 180,
        scales: { x: { time: opts.time !== false }, y: opts.y || {} },
        axes: [{ space: 90 }, { label: opts.yLabel || "", size: 60 }],
        legend: { live: false },
        series: [{ label: opts.xLabel || "time" }].concat(
          labels.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false })),
        ),
      },
      data,
      box,
    );
    entry = { key, chart };
    charts.set(id, entry);
  } else {
    entry.chart.setData(data);
  }
}

function push(map, name, value, length) {
  if (!map.has(name)) map.set(name, new Array(length).fill(null));
  map.get(name).push(value);
}

function trim() {
  const over = series.t.length - HISTORY;
  if (over <= 0) return;
  series.t.splice(0, over);
  series.cache.splice(0, over);
  for (const values of series.routes.values()) values.splice(0, over);
  for (const values of series.pools.values()) values.splice(0, over);
}

// ---- live views ---------------------------------------------------------------

function rate(now, before, seconds) {
  if (before === undefined || seconds <= 0) return null;
  return Math.max(0, now - before) / seconds;
}

function poolKey(model, pool) {
  return model + "/" + pool.name;
}

function render(stats, at) {
  const seconds = previous ? (at - previous.at) / 1000 : 0;
  const before = previous ? previous.stats : null;
  $("where").textContent =
    "generation " + stats.generation + " · " + (config ? config.source : "") + " · " + stats.in_flight + " in flight";
  const length = series.t.length;
  series.t.push(at / 1000);
  renderRoutes(stats, before, seconds, length);
  renderPools(stats, before, seconds, length);
  renderCache(stats, before, length);
  renderUpstreams(stats.upstreams || []);
  renderStreams(stats.streams || {}, before ? before.streams : null, seconds);
  renderCalibration(stats.calibration || {});
  renderRollouts(stats.rollouts || {});
  renderTenants(stats.tenants || {}, before ? before.tenants : null, seconds);
  renderClasses(stats.priority);
  trim();
  previous = { at, stats };
}

function routeNames(stats) {
  const names = new Set(config ? config.config.routes.map((r) => r.name) : []);
  for (const name of Object.keys(stats.budgets || {})) names.add(name);
  return [...names];
}

function renderRoutes(stats, before, seconds, length) {
  const budgets = stats.budgets || {};
  const decisions = new Map();
  for (const d of stats.decisions || []) {
    if (!decisions.has(d.route)) decisions.set(d.route, []);
    decisions.get(d.route).push(d);
  }
  const rows = routeNames(stats).map((name) => {
    const counts = budgets[name] || { answered: 0, missed: 0 };
    const was = before && before.budgets ? before.budgets[name] : undefined;
    const perSecond = rate(counts.answered, was ? was.answered : before ? 0 : undefined, seconds);
    push(series.routes, name, perSecond, length);
    const share = counts.answered ? counts.missed / counts.answered : null;
    const chips = (decisions.get(name) || []).map((d) =>
      el("span", { class: "chip" }, d.model + " · " + d.reason + ": " + num(d.count)),
    );
    return el(
      "tr",
      { "data-route": name },
      cell(name),
      cell(num(perSecond, 1), "num answers-rate"),
      cell(num(counts.answered), "num answers"),
      cell(num(counts.missed) + " (" + pct(share) + ")", "num misses"),
      el("td", {}, ...chips),
    );
  });
  fill($("routes-body"), rows);
  const names = [...series.routes.keys()];
  plot("chart-routes", names, [series.t, ...names.map((n) => series.routes.get(n))], { yLabel: "answers/s" });
}

function renderPools(stats, before, seconds, length) {
  const rows = [];
  const beforePools = new Map();
  for (const m of before ? before.models : []) for (const p of m.pools) beforePools.set(poolKey(m.name, p), p);
  for (const model of stats.models || []) {
    for (const pool of model.pools) {
      const key = poolKey(model.name, pool);
      const was = beforePools.get(key);
      const rowsPerSecond = rate(pool.executed_rows, was ? was.executed_rows : undefined, seconds);
      const perBatch = pool.executions ? pool.executed_rows / pool.executions : null;
      const measured = pool.latency.filter((b) => b.samples > 0);
      const latency = measured.length ? measured[0].ewma_us / 1000 : null;
      push(series.pools, key, pool.queue_depth, length);
      const state = !pool.available ? "unavailable" : pool.paused ? "paused" : model.state;
      rows.push(
        el(
          "tr",
          { "data-pool": key },
          cell(model.name),
          cell(pool.name + " (" + pool.device + ")"),
          cell(state),
          cell(num(pool.queue_depth) + " / " + num(pool.queue_capacity), "num queue"),
          cell(num(pool.in_flight), "num"),
          cell(num(rowsPerSecond, 1), "num rows-rate"),
          cell(num(perBatch, 2), "num"),
          cell(
            measured.length ? num(latency, 2) + " (≤" + measured[0].max_batch + " rows)" : "–",
            "num",
          ),
          cell(num(pool.rejected), "num"),
        ),
      );
    }
  }
  fill($("pools-body"), rows);
  const names = [...series.pools.keys()];
  plot("chart-pools", names, [series.t, ...names.map((n) => series.pools.get(n))], { yLabel: "queue depth" });
}

function renderCache(stats, before, length) {
  const c = stats.cache || {};
  const hits = (s) => (s.l1_hits || 0) + (s.l2_hits || 0);
  const lookups = (s) => (s.l1_hits || 0) + (s.l1_misses || 0);
  let ratio = null;
  if (before && before.cache) {
    const asked = lookups(c) - lookups(before.cache);
    ratio = asked > 0 ? (hits(c) - hits(before.cache)) / asked : null;
  }
  series.cache.push(ratio === null ? null : ratio * 100);
  const total = lookups(c) ? hits(c) / lookups(c) : null;
  facts($("cache"), [
    ["enabled", c.enabled ? "yes" : "no"],
    ["hit ratio (last second)", pct(ratio)],
    ["hit ratio (since start)", pct(total)],
    ["L1 entries", num(c.l1_entries)],
    ["L1 bytes", num(c.l1_bytes) + (c.l1_max_bytes ? " / " + num(c.l1_max_bytes) : "")],
    ["L1 hits", num(c.l1_hits)],
    ["L1 misses", num(c.l1_misses)],
    ["evictions", num(c.evictions)],
    ["coalesced", num(c.coalesced)],
    ["L2 (Redis)", c.l2_configured ? "breaker " + c.l2_breaker : "not configured"],
    ["L2 hits", num(c.l2_hits)],
    ["L2 errors", num(c.l2_errors)],
  ]);
  plot("chart-cache", ["hit ratio %"], [series.t, series.cache], { yLabel: "hit ratio %", y: { range: [0, 100] } });
  void length;
}

function renderUpstreams(upstreams) {
  const rows = [];
  for (const u of upstreams) {
    for (const a of u.addresses) {
      rows.push(
        el(
          "tr",
          { "data-upstream": u.name },
          cell(u.name + " (" + u.kind + ")"),
          cell(a.addr),
          cell(a.healthy ? "yes" : "no", a.healthy ? "ok" : "error"),
          cell(String(a.breaker)),
          cell(num(a.latency_ms, 2), "num"),
          cell(num(a.in_flight), "num"),
          cell(num(a.requests), "num"),
          cell(num(a.failures), "num"),
        ),
      );
    }
  }
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "8", class: "note" }, "no upstreams configured")));
  fill($("upstreams-body"), rows);
}

function renderStreams(s, before, seconds) {
  facts($("streams"), [
    ["started/s", num(rate(s.started, before ? before.started : undefined, seconds), 1)],
    ["started", num(s.started)],
    ["drafts", num(s.drafts)],
    ["finals", num(s.finals)],
    ["finals from the draft", num(s.finals_from_draft)],
    ["finals from the cache", num(s.finals_cached)],
    ["client gone", num(s.client_gone)],
    ["errors", num(s.errors)],
  ]);
}

function renderCalibration(calibration) {
  const box = $("calibration");
  const routes = Object.keys(calibration);
  if (!routes.length) {
    box.replaceChildren(
      el("p", { class: "note" }, "No route calibrates (routes[].calibrate = { shadow, target } on a cascade route)."),
    );
    for (const id of [...charts.keys()].filter((k) => k.startsWith("chart-calibration-"))) charts.delete(id);
    return;
  }
  for (const route of routes) {
    const view = calibration[route];
    const id = "chart-calibration-" + route.replace(/[^a-z0-9_-]/gi, "_");
    let part = box.querySelector('[data-calibration="' + CSS.escape(route) + '"]');
    if (!part) {
      if (!box.querySelector("[data-calibration]")) box.replaceChildren();
      part = el("div", { class: "calibration-route", "data-calibration": route }, el("p", {}), el("div", { id }));
      box.append(part);
    }
    part.querySelector("p").textContent =
      route +
      ": " +
      num(view.rows) +
      " rows from " +
      num(view.shadow_runs) +
      " shadow runs (" +
      num(view.skipped_busy) +
      " skipped while busy). Lowest threshold with " +
      pct(view.target, 1) +
      " agreement: " +
      (view.suggested_threshold === null ? "none yet" : num(view.suggested_threshold, 2));
    const curve = view.curve || [];
    plot(
      id,
      ["agreement %", "escalated %"],
      [curve.map((p) => p.threshold), curve.map((p) => p.agreement * 100), curve.map((p) => p.escalation * 100)],
      { time: false, xLabel: "threshold", yLabel: "%", height: 220, y: { range: [0, 100] } },
    );
  }
}

// ---- rollouts ------------------------------------------------------------------

const ROLLOUT_CELLS = ["candidate", "state", "step", "verdict", "agreement", "rows", "p99", "errors", "reasons"];

// One row per route with a candidate, kept across polls (its buttons stay
// the same elements); cells are rewritten from /admin/stats' `rollouts`.
function renderRollouts(rollouts) {
  const body = $("rollouts-body");
  const routes = Object.keys(rollouts).sort();
  $("rollouts-none").hidden = routes.length > 0;
  for (const row of [...body.querySelectorAll("tr[data-rollout]")]) {
    if (!(row.dataset.rollout in rollouts)) row.remove();
  }
  for (const route of routes) {
    const r = rollouts[route];
    let row = body.querySelector('tr[data-rollout="' + CSS.escape(route) + '"]');
    if (!row) {
      const promote = el("button", { type: "button", class: "promote" }, "Promote");
      const back = el("button", { type: "button", class: "rollback" }, "Roll back");
      promote.addEventListener("click", () => moveRollout(route, "promote"));
      back.addEventListener("click", () => moveRollout(route, "rollback"));
      const cells = ROLLOUT_CELLS.map((c) => el("td", { class: c }));
      row = el("tr", { "data-rollout": route }, cell(route), ...cells, el("td", {}, promote, back));
      body.append(row);
    }
    const c = r.comparison;
    const [low, high] = c.agreement_interval;
    const text = {
      candidate: r.candidate + (r.source && r.source !== "file" ? " (" + r.source + ")" : ""),
      state: r.state.replace("_", " ") + (r.by ? " (" + r.by + ")" : "") + (r.pending ? ", reloading" : ""),
      step: (r.plan ? "step " + (r.step + 1) + " of " + r.steps.length + " · " : "") +
        (r.mode === "canary" ? "canary " : "mirrored ") + pct(r.share, 0),
      verdict: r.verdict || "–",
      agreement: c.agreement === null ? "–" : pct(c.agreement, 2) + " [" + pct(low, 2) + ", " + pct(high, 2) + "]",
      rows: num(c.rows) + " (draws skipped: " + num(c.skipped_busy) + " busy, " + num(c.skipped_cpu) + " CPU)",
      p99: num(c.live_p99_ms, 1) + " · " + num(c.candidate_p99_ms, 1),
      errors: num(c.live_errors) + " · " + num(c.candidate_errors),
      reasons: (r.reasons || []).join("; "),
    };
    for (const name of ROLLOUT_CELLS) row.querySelector("td." + name).textContent = text[name];
    const open = r.state === "mirroring";
    row.querySelector(".promote").disabled = !open;
    row.querySelector(".rollback").disabled = !open;
  }
}

async function moveRollout(route, move) {
  const line = $("rollouts-status");
  line.textContent = (move === "promote" ? "Promoting " : "Rolling back ") + route + "…";
  line.className = "";
  const r = await api("/admin/rollouts/" + encodeURIComponent(route) + "/" + move, { method: "POST" });
  if (r.ok && r.body.reload && r.body.reload.status === "applied") {
    line.textContent =
      (move === "promote" ? "Promoted " : "Rolled back ") + route + ": generation " + r.body.reload.generation + " serves it.";
    line.className = "ok";
  } else {
    line.textContent = r.ok ? "The reload was rejected: " + problems(r.body.reload || {}) : problems(r.body);
    line.className = "error";
  }
  await tick();
}

// ---- tuning -------------------------------------------------------------------

function routeConfig(name) {
  return config ? config.config.routes.find((r) => r.name === name) : undefined;
}

function currentValues(route) {
  const policy = route.policy || {};
  return {
    // Thresholds are f32 in the server: 0.8 reads back as 0.800000011920929.
    threshold: policy.type === "cascade" ? Number(policy.threshold.toPrecision(6)) : null,
    budget_ms: route.budget_ms ? route.budget_ms.default : null,
    ttl_s: route.cache ? route.cache.ttl_s : null,
  };
}

function fillTuneForm() {
  const select = $("tune-route");
  const chosen = select.value;
  select.replaceChildren(...config.config.routes.map((r) => el("option", { value: r.name }, r.name)));
  if (chosen && routeConfig(chosen)) select.value = chosen;
  showRouteValues();
}

function showRouteValues() {
  const route = routeConfig($("tune-route").value);
  if (!route) return;
  const v = currentValues(route);
  $("tune-threshold").value = v.threshold === null ? "" : v.threshold;
  $("tune-threshold").disabled = v.threshold === null;
  $("tune-budget").value = v.budget_ms === null ? "" : v.budget_ms;
  $("tune-ttl").value = v.ttl_s === null ? "" : v.ttl_s;
  resetPreview();
}

function resetPreview() {
  preview = null;
  $("tune-apply").disabled = true;
  $("tune-diff").textContent = "";
  $("tune-replay").hidden = true;
}

function status(text, ok) {
  const p = $("tune-status");
  p.textContent = text;
  p.className = ok === undefined ? "" : ok ? "ok" : "error";
}

function wantedEdit() {
  const name = $("tune-route").value;
  const route = routeConfig(name);
  const v = currentValues(route);
  const edit = { route: name };
  const read = (id) => ($(id).value === "" ? null : Number($(id).value));
  const threshold = read("tune-threshold");
  if (!$("tune-threshold").disabled && threshold !== null && threshold !== v.threshold) edit.threshold = threshold;
  const budget = read("tune-budget");
  if (budget !== null && budget !== v.budget_ms) edit.budget_ms = budget;
  const ttl = read("tune-ttl");
  if (ttl !== null && ttl !== v.ttl_s) edit.ttl_s = ttl;
  return edit;
}

function problems(body) {
  const lines = [body && body.error ? body.error : "failed"];
  for (const i of (body && body.issues) || []) lines.push(i.path + ": " + i.message);
  return lines.join("\n");
}

async function previewEdit(event) {
  event.preventDefault();
  resetPreview();
  const edit = wantedEdit();
  if (Object.keys(edit).length === 1) {
    status("Nothing changed: edit a value first.", false);
    return;
  }
  status("Checking the edit…");
  const checked = await postJson("/admin/config/edit", edit);
  if (!checked.ok) {
    status(problems(checked.body), false);
    return;
  }
  $("tune-diff").textContent = checked.body.diff;
  preview = { edit, base: checked.body.base };
  status("Replaying the recorded traffic under the edit…");
  const replayed = await api("/admin/replay", {
    method: "POST",
    headers: { "content-type": "application/toml" },
    body: checked.body.candidate,
  });
  if (replayed.ok) {
    showReplay(replayed.body.reports || []);
    status("Preview ready: the replay compares the config in force with the edit. Apply writes the file and reloads.", true);
  } else if (replayed.status === 409) {
    status("No traffic recorded to replay (routes[].record); the diff above is what Apply writes.", true);
  } else {
    status("The replay failed: " + problems(replayed.body) + ". The diff above is what Apply writes.", false);
  }
  $("tune-apply").disabled = false;
}

const REPLAY_ROWS = [
  ["calls replayed", (c) => num(c.replayed)],
  ["escalated", (c) => pct(c.escalated_share)],
  ["agreement with the heaviest model", (c) => pct(c.agreement_with_heaviest, 2)],
  ["cost per call", (c) => num(c.cost_per_call, 3)],
  ["same model as live", (c) => pct(c.same_decision_as_live)],
  ["cache hit ratio", (c) => pct(c.cache_hit_ratio)],
  ["p50 latency (ms)", (c) => (c.latency ? num(c.latency.p50_ms, 2) : "–")],
  ["p99 latency (ms)", (c) => (c.latency ? num(c.latency.p99_ms, 2) : "–")],
  ["over budget", (c) => (c.latency ? pct(c.latency.over_budget_share) : "–")],
  [
    "suggested threshold",
    (c) =>
      Object.entries(c.calibration || {})
        .map(([route, v]) => route + ": " + (v.suggested_threshold === null ? "none" : num(v.suggested_threshold, 2)))
        .join(", ") || "–",
  ],
];

function showReplay(reports) {
  const table = $("tune-replay");
  const report = reports[0];
  if (!report) return;
  const head = el("tr", {}, el("th", {}, report.calls + " recorded calls"));
  for (const c of report.configs) head.append(el("th", {}, c.config));
  table.tHead.replaceChildren(head);
  fill(
    table.tBodies[0],
    REPLAY_ROWS.map(([name, value]) => {
      const row = el("tr", { "data-metric": name }, el("th", {}, name));
      for (const c of report.configs) row.append(cell(value(c), "num"));
      return row;
    }),
  );
  table.hidden = false;
}

async function applyEdit() {
  if (!preview) return;
  $("tune-apply").disabled = true;
  status("Writing the config file and reloading…");
  const applied = await postJson("/admin/config/edit", Object.assign({}, preview.edit, { apply: true, base: preview.base }));
  if (!applied.ok) {
    status(problems(applied.body), false);
    return;
  }
  await loadConfig();
  status("Applied: generation " + applied.body.reload.generation + " serves the edit.", true);
  preview = null;
}

// ---- sign-in and polling ------------------------------------------------------------

async function loadConfig() {
  const r = await api("/admin/config");
  if (r.ok) {
    config = r.body;
    fillTuneForm();
  }
  return r;
}

async function tick() {
  let r;
  try {
    r = await api("/admin/stats");
  } catch (e) {
    $("poll-error").textContent = "The gateway did not answer: " + e.message;
    return;
  }
  if (r.status === 401) {
    signOut("The gateway no longer accepts this token.");
    return;
  }
  if (!r.ok) {
    $("poll-error").textContent = problems(r.body);
    return;
  }
  $("poll-error").textContent = "";
  render(r.body, Date.now());
}

async function signIn(candidate, quiet) {
  token = candidate;
  const r = await api("/admin/config");
  if (!r.ok) {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    if (!quiet) {
      $("login-error").textContent =
        r.status === 401 ? "The gateway refused this token (401)." : "The admin API answered " + r.status + ".";
    }
    return false;
  }
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  config = r.body;
  $("login-error").textContent = "";
  $("login").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  $("no-charts").hidden = typeof uPlot !== "undefined";
  fillTuneForm();
  await tick();
  timer = setInterval(tick, POLL_MS);
  return true;
}

function signOut(message) {
  clearInterval(timer);
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("app").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
}

document.addEventListener("DOMContentLoaded", async () => {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn($("token").value.trim(), false);
  });
  $("signout").addEventListener("click", () => signOut("Signed out."));
  $("tune-route").addEventListener("change", showRouteValues);
  for (const id of ["tune-threshold", "tune-budget", "tune-ttl"]) $(id).addEventListener("input", resetPreview);
  $("tune-form").addEventListener("submit", previewEdit);
  $("tune-apply").addEventListener("click", applyEdit);
  // A token kept from earlier in this tab, or an admin API without a token
  // (loopback only), signs in by itself.
  await signIn(token, true);
});
