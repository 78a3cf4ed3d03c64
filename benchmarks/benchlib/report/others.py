"""Report sections from the `cache`, `overload`, `cascade` and `runtime`
stages, and the generic section for stages without their own renderer
(the draft/final, proxy and text stages describe their own tables, plots
and findings in their JSON)."""

from __future__ import annotations

from .common import Ctx, commands_block, ms, num, pct, plot_ref, settings_line, share, status_line, table, x


def valid_open(r: dict) -> bool:
    """An open-loop run whose generator kept (nearly) to its schedule."""
    return r.get("ok", 0) > 0 and not r.get("behind", False)


def cache_section(ctx: Ctx) -> str:
    out = ["## Cache hits vs nginx proxy cache\n"]
    doc = ctx.stage("cache")
    line = status_line(ctx, "cache")
    if line:
        out.append(line + "\n")
    if not doc or not doc.get("runs"):
        return "\n".join(out)
    runs, cpu = doc["runs"], doc.get("server_cpu_us", {})
    out.append(f"`benchmarks/cache_bench.sh`: Switchyard's L1 (one HTTP thread) vs nginx {doc.get('nginx_version', '')} "
               "(one worker, POST-body-keyed `proxy_cache` on tmpfs) in front of the FastAPI baseline, both on the "
               "servers' CPU, access logs off, one identical body so every measured request is a hit (checked "
               f"with curl before and after). {settings_line(doc)}.\n")
    rate = doc.get("rate", 10000)
    rows = []
    for key, what in (("hit-open-switchyard", "Switchyard L1 hit"), ("hit-open-nginx", "nginx HIT"),
                      ("calibrate-open", "generator alone (its own trivial server)")):
        r = runs.get(key)
        if r and not valid_open(r):
            rows.append([what, num(r.get("sent_rps")), num(r["rps"]), "generator fell behind the schedule: no valid "
                         "latency", "-", "-", "-", num(cpu.get(key), 1)])
        elif r:
            rows.append([what, num(r.get("sent_rps")), num(r["rps"]), ms(r["p50_ms"]), ms(r["p99_ms"]),
                         ms(r["p999_ms"]), ms(r.get("send_lag_p99_ms")), num(cpu.get(key), 1)])
    out.append(f"Open loop at {num(rate)} req/s over {doc.get('connections', 32)} connections:\n")
    out.append(table(["", "sent/s", "answered/s", "p50 ms", "p99 ms", "p99.9 ms", "generator send lag p99 ms",
                      "server CPU µs/hit"], rows))
    sy, ng = runs.get("hit-open-switchyard"), runs.get("hit-open-nginx")
    if sy and ng and not (valid_open(sy) and valid_open(ng)):
        out.append(f"\nThe generator could not keep {num(rate)} req/s on its CPU in this run (the machine was too busy), "
                   "so these rows measure nothing: no comparison is made.\n")
    elif sy and ng:
        v1 = ctx.finding("Cache", f"hit p99 at {num(rate)} req/s vs nginx", f"{ms(sy['p99_ms'])} vs {ms(ng['p99_ms'])} ms",
                         sy["p99_ms"] <= ng["p99_ms"], "cache.p99-vs-nginx")
        v2 = ctx.finding("Goals", f"cache-hit p99 < 1 ms at {num(rate)} req/s (issue 4)", f"{ms(sy['p99_ms'])} ms",
                         sy["p99_ms"] < 1 and not sy.get("behind"), "cache.p99")
        out.append(f"\np99 at or below nginx's: {v1}. Goal p99 < 1 ms: {v2}.\n")
    rows = []
    for key, what in (("hit-closed-c32-switchyard", "Switchyard L1 hit"), ("hit-closed-c32-nginx", "nginx HIT"),
                      ("hit-closed-c32-switchyard-log", "Switchyard L1 hit, access log on"),
                      ("hit-closed-c32-nginx-log", "nginx HIT, access log on"),
                      ("calibrate-closed-c32", "generator ceiling")):
        r = runs.get(key)
        if r:
            rows.append([what, num(r["rps"]), ms(r["p50_ms"]), ms(r["p99_ms"]), num(cpu.get(key), 1)])
    out.append("Closed loop, 32 clients (hit throughput):\n")
    out.append(table(["", "hits/s", "p50 ms", "p99 ms", "server CPU µs/hit"], rows))
    sy, ng = runs.get("hit-closed-c32-switchyard"), runs.get("hit-closed-c32-nginx")
    if sy and ng:
        r = sy["rps"] / ng["rps"]
        v = ctx.finding("Cache", "hit throughput vs nginx (closed loop, 32 clients)", x(r), r >= 1, "cache.throughput")
        out.append(f"\nSwitchyard / nginx hits/s: {x(r)}, at least nginx's: {v}.\n")
    l2 = [[what, num(runs[k]["rps"]), ms(runs[k]["p50_ms"]), ms(runs[k]["p99_ms"])]
          for k, what in (("l2-hit-closed-c1", "L2 hit (Redis), 1 client"), ("l1-hit-closed-c1", "L1 hit, 1 client"),
                          ("miss-closed-c1", "miss (model run), 1 client"), ("l2-hit-closed-c8", "L2 hit, 8 clients"),
                          ("l1-hit-closed-c8", "L1 hit, 8 clients"), ("miss-closed-c8", "miss, 8 clients"))
          if k in runs]
    if l2:
        out.append("L2: a second Switchyard with a cold L1 reads answers the first one wrote to Redis:\n")
        out.append(table(["", "answered/s", "p50 ms", "p99 ms"], l2))
    out.append(plot_ref(ctx, "cache-hit-latency.png", "Cache-hit latency"))
    out.append("The cache benchmark's own report, with its commands: `benchmarks/out/cache/RESULTS-cache.md`; the "
               "hand-written analysis of an earlier full run: `benchmarks/RESULTS-cache.md`.\n")
    return "\n".join(out)


def overload_section(ctx: Ctx) -> str:
    out = ["## Overload: budget adherence with and without spill-over\n"]
    doc = ctx.stage("overload")
    line = status_line(ctx, "overload")
    if line:
        out.append(line + "\n")
    if not doc or "spill_over" not in doc:
        return "\n".join(out)
    out.append(f"`gateway/tests/spill_over.rs` in release mode: model {doc['model']} with a preferred pool "
               f"`{doc['preferred_pool']}` (batch 1, cost 1) and a spill pool `{doc['spill_pool']}` (batches of up to "
               f"32, cost 2). Open loop at {doc['load_factor']:.1f}x the preferred pool's measured capacity "
               f"({num(doc['preferred_capacity_rps'])} req/s): {num(doc['offered_rps'])} req/s for {doc['phase_s']:g} s, "
               f"budget {doc['budget_ms']} ms, latency from each request's scheduled time; then the same load "
               f"pinned to the preferred pool. Stage run {doc.get('finished_at')}, commit {doc.get('commit')}; "
               "unpinned, as in `make test`.\n")
    rows = []
    for key, what in (("spill_over", "with spill-over"), ("pinned", "without (pinned to the preferred pool)")):
        p = doc[key]
        rows.append([what, p["sent"], pct(p["inside_share"], 2), p["errors"], ms(p["p50_ms"]), ms(p["p99_ms"]),
                     p["on_spill_pool"]])
    out.append(table(["", "sent", "inside budget", "errors", "p50 ms", "p99 ms", "on the spill pool"], rows))
    share = doc["spill_over"]["inside_share"]
    v = ctx.finding("Goals", "overload with spill-over: >= 99% inside the budget (issue 5)", pct(share, 2),
                    share >= 0.99, "overload.spill")
    gain = share - doc["pinned"]["inside_share"]
    out.append(f"\nGoal (>= 99% inside the budget with spill-over): {v}; without spill-over "
               f"{pct(doc['pinned']['inside_share'], 2)} ({gain * 100:+.1f} points with it)."
               + ("" if doc.get("test_passed", True) else " The test's own assertions failed in this run.") + "\n")
    if doc["pinned"]["inside_share"] >= 0.9:
        out.append("**This run measured no overload:** the preferred pool alone kept up with the offered load, so its "
                   "capacity was measured while the machine was busier than during the phases (other work on the "
                   "machine changed between the calibration and the phases). Re-run on a quiet machine.\n")
    out.append(plot_ref(ctx, "overload-budget.png", "Budget adherence under overload"))
    out.append(commands_block(doc))
    return "\n".join(out)


def cascade_section(ctx: Ctx) -> str:
    out = ["## Cascade: accuracy vs share escalated\n"]
    doc = ctx.stage("cascade")
    line = status_line(ctx, "cascade")
    if line:
        out.append(line + "\n")
    if not doc or "routes" not in doc:
        return "\n".join(out)
    routes = doc["routes"]
    heavy, cheap, casc = routes["heavy-only"], routes["cheap-only"], routes["cascade"]
    out.append(f"The digits test split ({doc['rows']} rows, one row per request) through the release gateway on "
               "routes over digits-cheap and digits-heavy. Compute in heavy-model equivalents (a cheap run costs "
               f"{doc['cheap_cost_heavy_equivalents']:.3f}, from single-row onnxruntime latency). A random split "
               "sending the same share to the heavy model would score (1 - share) x cheap + share x heavy.\n")
    rows = []
    for name in ("cheap-only", "heavy-only", "cascade"):
        r = routes[name]
        rows.append([name if name != "cascade" else f"cascade (threshold {doc['threshold']:g})", f"{r['accuracy']:.4f}",
                     pct(r["accuracy"] / heavy["accuracy"], 2), pct(r["escalated"]), f"{r['compute']:.3f}"])
    out.append(table(["route", "accuracy", "vs heavy-only", "escalated", "compute (heavy-equivalents)"], rows))
    rand = (1 - casc["escalated"]) * cheap["accuracy"] + casc["escalated"] * heavy["accuracy"]
    v = ctx.finding("Goals", "cascade: >= 99.5% of heavy-only accuracy with <= 30% escalated (issue 5)",
                    f"{pct(casc['accuracy'] / heavy['accuracy'], 2)} at {pct(casc['escalated'])} escalated",
                    doc["goal"]["met"], "cascade.goal")
    out.append(f"\nAt its escalation share ({pct(casc['escalated'])}) the cascade reaches "
               f"{pct(casc['accuracy'] / heavy['accuracy'], 2)} of heavy-only accuracy; a random split at the same share "
               f"would reach {rand:.4f} ({pct(rand / heavy['accuracy'], 2)}). Goal met: {v}.\n")
    sweep = [[f"{p['threshold']:g}", f"{p['accuracy']:.4f}", pct(p["escalated"]), f"{p['compute']:.3f}"]
             for p in doc.get("sweep", [])]
    out.append("Threshold sweep:\n\n" + table(["threshold", "accuracy", "escalated", "compute"], sweep))
    out.append(plot_ref(ctx, "cascade-accuracy.png", "Cascade accuracy vs share escalated"))
    return "\n".join(out)


def runtime_section(ctx: Ctx) -> str:
    out = ["## Runtime: dynamic batching and overhead vs `Session::run`\n"]
    doc = ctx.stage("runtime")
    line = status_line(ctx, "runtime")
    if line:
        out.append(line + "\n")
    if not doc or "bench" not in doc:
        return "\n".join(out)
    b = doc["bench"]
    bt = b["batching"]
    out.append(f"`runtime-bench` (no HTTP, unpinned: the pool's one worker thread has a core, as the direct loop "
               f"has), {b.get('duration_s')} s per measurement.\n")
    out.append(table(["synth-wide, 32 callers x 1 row", "rows/s", "ratio"],
                     [["batching off (batch 1)", num(bt["unbatched_rows_per_s"]), "1.00x"],
                      ["batching on (max 32, 2 ms)", num(bt["batched_rows_per_s"]), x(bt["gain"])]]))
    rows, lone = [], []
    for o in b["overhead"]:
        v = ctx.finding("Runtime", f"{o['model']} at batch {o['batch']}: runtime path / direct Session::run",
                        pct(o["ratio"]), o["ratio"] >= 0.95, f"runtime-overhead.{o['model']}")
        rows.append([o["model"], o["batch"], num(o["direct_rows_per_s"]), num(o["runtime_rows_per_s"]),
                     share(o["ratio"]), v])
        one = o.get("one_caller")
        if one:
            goal = 0.80 if o["batch"] == 1 else 0.95
            w = ctx.finding("Runtime", f"{o['model']} at batch {o['batch']}, one caller: runtime path / direct "
                            f"Session::run (goal >= {goal:.0%})", pct(one["inline"]["ratio"]),
                            one["inline"]["ratio"] >= goal, "runtime-overhead.one-caller")
            lone.append([o["model"], o["batch"], share(one["inline"]["ratio"]), share(one["queued"]["ratio"]),
                         x(one["inline"]["rows_per_s"] / one["queued"]["rows_per_s"]), w])
    out.append("\nThe runtime path (queue, batcher, worker thread, output split) vs `Session::run` in a loop at the "
               "same batch size, 16 callers each sending one full batch (goal >= 95%); medians of alternating "
               "rounds:\n")
    out.append(table(["model", "batch", "direct rows/s", "runtime rows/s", "runtime / direct", ">= 95%?"], rows))
    if lone:
        out.append("\nOne caller at a time, as the direct loop is one: with the default `inline_max_us` (a request "
                   "into an idle pool of a model predicted to run within it runs on the caller's thread; that "
                   "caller and the direct loop run on one thread held on one CPU) and with it off (every request "
                   "through the worker thread), same rounds (goal >= 80% at batch 1, else >= 95%):\n")
        out.append(table(["model", "batch", "inline / direct", "queued / direct", "inline / queued", "goal?"],
                         lone))
    return "\n".join(out)


def generic_section(ctx: Ctx, name: str, title: str) -> str:
    """A stage without its own renderer: its status, tables and plots."""
    doc = ctx.stages.get(name)
    out = [f"## {doc.get('title', title) if doc else title}\n"]
    line = status_line(ctx, name)
    if line:
        out.append(line + "\n")
    if not ctx.stage(name):
        return "\n".join(out)
    for t in doc.get("tables", []):
        if t.get("title"):
            out.append(f"{t['title']}\n")
        out.append(table(t["columns"], t["rows"]))
        if t.get("note"):
            out.append(f"\n{t['note']}\n")
    for f in doc.get("findings", []):
        ctx.finding(doc.get("title", name), f["what"], f["result"], bool(f["ok"]), f.get("reason_key", name))
    for p in doc.get("plots", []):
        out.append(plot_ref(ctx, p["file"], p.get("title", p["file"])))
    out.append(commands_block(doc))
    return "\n".join(out)
