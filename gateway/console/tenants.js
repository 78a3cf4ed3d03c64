// The console's Tenants view: one row per tenant label of /admin/stats'
// `tenants` (the tenants the config lists, and `_other` for every other),
// plus every tenant the config lists that has no counts yet. Each row:
// requests admitted (and per second, from two reads), refused by a limit
// (in all, and by limit), rows computed, the daily quota left, and the
// limits configured for it: across routes (`[[tenants]]`) and per route
// (`routes[].auth.tenants`), from /admin/config. console.js's render()
// calls renderTenants on every poll; the helpers ($, el, cell, num, fill,
// rate) are console.js's.
"use strict";

// A scope's limits in words: "5/s (burst 10) · 2,000 rows/s · 8 at once · 1,000/day".
function limitWords(limits, weight) {
  const l = limits || {};
  const words = [];
  if (l.requests_per_s !== null && l.requests_per_s !== undefined) {
    words.push(num(l.requests_per_s, l.requests_per_s % 1 ? 2 : 0) + "/s (burst " + num(l.burst) + ")");
  }
  if (l.rows_per_s !== null && l.rows_per_s !== undefined) {
    words.push(num(l.rows_per_s) + " rows/s (burst " + num(l.rows_burst) + ")");
  }
  if (l.concurrent !== null && l.concurrent !== undefined) words.push(num(l.concurrent) + " at once");
  if (l.requests_per_day !== null && l.requests_per_day !== undefined) words.push(num(l.requests_per_day) + "/day");
  if (weight !== undefined && weight !== 1) words.push("weight " + weight);
  return words.length ? words.join(" · ") : "no limit";
}

// Every scope that names a tenant in the config: [[tenants]] as "all
// routes", each route's auth.tenants by route name.
function configuredScopes() {
  const scopes = new Map();
  const add = (tenant, scope, text) => {
    if (!scopes.has(tenant)) scopes.set(tenant, []);
    scopes.get(tenant).push([scope, text]);
  };
  if (!config) return scopes;
  for (const t of config.config.tenants || []) {
    const priority = t.priority !== undefined ? " · class " + t.priority : "";
    add(t.name, "all routes", limitWords(t.limits, t.weight) + priority);
  }
  for (const r of config.config.routes || []) {
    for (const t of (r.auth && r.auth.tenants) || []) add(t.name, r.name, limitWords(t.limits, t.weight));
  }
  return scopes;
}

function renderTenants(tenants, before, seconds) {
  const scopes = configuredScopes();
  const names = [...new Set([...Object.keys(tenants), ...scopes.keys()])].sort();
  $("tenants-none").hidden = names.length > 0;
  const rows = names.map((name) => {
    const t = tenants[name] || { admitted: 0, rows: 0, limited: {} };
    const was = before ? before[name] : undefined;
    const perSecond = rate(t.admitted, was ? was.admitted : before ? 0 : undefined, seconds);
    const limited = Object.values(t.limited || {}).reduce((a, b) => a + b, 0);
    const by = Object.entries(t.limited || {})
      .filter(([, n]) => n > 0)
      .map(([kind, n]) => el("span", { class: "chip" }, kind + ": " + num(n)));
    const quota = Object.entries(t.quota_left || {}).map(([route, n]) =>
      el("span", { class: "chip" }, (route === "*" ? "all routes" : route) + ": " + num(n)),
    );
    const limits = (scopes.get(name) || []).map(([scope, text]) => el("div", {}, scope + ": " + text));
    return el(
      "tr",
      { "data-tenant": name },
      cell(name),
      cell(num(t.admitted), "num admitted"),
      cell(num(perSecond, 1), "num admitted-rate"),
      cell(num(limited), "num limited"),
      el("td", { class: "limited-by" }, ...by),
      cell(num(t.rows), "num rows"),
      el("td", { class: "quota" }, ...(quota.length ? quota : ["–"])),
      el("td", { class: "limits" }, ...(limits.length ? limits : ["not listed: no limits"])),
    );
  });
  fill($("tenants-body"), rows);
}

// Requests per priority class (/admin/stats' `priority`): admitted by
// routing, answered, shed (429) and failed.
function renderClasses(classes) {
  const rows = Object.entries(classes || {}).map(([cls, c]) =>
    el(
      "tr",
      { "data-class": cls },
      cell(cls),
      cell(num(c.admitted), "num admitted"),
      cell(num(c.answered), "num answered"),
      cell(num(c.shed), "num shed"),
      cell(num(c.failed), "num failed"),
    ),
  );
  fill($("classes-body"), rows);
}
