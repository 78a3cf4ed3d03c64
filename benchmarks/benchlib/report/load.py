"""Report sections from the `open-loop`, `perf-analyzer` and `grpc` stages."""

from __future__ import annotations

from .common import Ctx, commands_block, ms, num, pct, plot_ref, ratio, settings_line, status_line, table, x
from .peers import NAMES


def sustained(points: list[dict], server: str, model: str) -> tuple[dict | None, bool]:
    """The highest offered rate the server kept up with, and whether it
    was pushed past its knee at all in this run."""
    mine = [p for p in points if p["server"] == server and p["model"] == model]
    kept = [p for p in mine if not p["saturated"]]
    top = max(kept, key=lambda p: p["offered_rps"]) if kept else None
    return top, any(p["saturated"] for p in mine)


def open_loop_section(ctx: Ctx) -> str:
    out = ["## Latency vs offered load (open loop)\n"]
    doc = ctx.stage("open-loop")
    line = status_line(ctx, "open-loop")
    if line:
        out.append(line + "\n")
    if not doc:
        return "\n".join(out)
    choice = doc.get("mlserver_choice")
    out.append(f"A fixed request rate over {doc.get('connections', 64)} connections; latency counts from each "
               "request's intended send time, so waiting in a queue shows (no coordinated omission). Rates go up "
               "until the server falls behind (answers < 90% of the offered rate, p99 > 1 s, or > 1% errors): the "
               f"knee. {settings_line(doc)}."
               + (f" MLServer: {NAMES.get(choice['server'])} ({choice['why']})." if choice else "") + "\n")
    points = doc.get("points", [])
    rows = []
    for model in dict.fromkeys(p["model"] for p in points):
        servers = list(dict.fromkeys(p["server"] for p in points if p["model"] == model))
        sy_top, sy_knee = sustained(points, "switchyard", model)
        for server in servers:
            top, knee = sustained(points, server, model)
            verdict = "-"
            if server != "switchyard" and top and sy_top is not None:
                ok = sy_top["offered_rps"] >= top["offered_rps"]
                verdict = ctx.finding("Open loop", f"{model}: highest rate sustained vs {NAMES.get(server, server)}",
                                      f"{num(sy_top['offered_rps'])} vs {num(top['offered_rps'])} req/s", ok,
                                      "open-loop.knee")
            rate = num(top["offered_rps"]) if top else "none measured"
            rows.append([model, NAMES.get(server, server), rate + ("" if knee else " (knee not reached)"),
                         ms(top["p50_ms"]) if top else "-", ms(top["p99_ms"]) if top else "-", verdict])
    out.append(table(["model", "server", "highest rate sustained, req/s", "p50 ms there", "p99 ms there",
                      "Switchyard sustains as much?"], rows))
    detail = [[p["model"], NAMES.get(p["server"], p["server"]), num(p["offered_rps"]), num(p["rps"]), ms(p["p50_ms"]),
               ms(p["p99_ms"]), ms(p["p999_ms"]), ms(p.get("send_lag_p99_ms")), "yes" if p["saturated"] else ""]
              for p in points]
    out.append("\nEvery point:\n\n" + table(["model", "server", "offered/s", "answered/s", "p50 ms", "p99 ms",
                                             "p99.9 ms", "generator send lag p99 ms", "past the knee"], detail))
    out.append(plot_ref(ctx, "latency-vs-load.png", "Latency percentiles vs offered load"))
    out.append(commands_block(doc))
    return "\n".join(out)


def perf_section(ctx: Ctx) -> str:
    out = ["## perf_analyzer (a second, independent load generator)\n"]
    doc = ctx.stage("perf-analyzer")
    line = status_line(ctx, "perf-analyzer")
    if line:
        out.append(line + "\n")
    if not doc:
        return "\n".join(out)
    out.append(f"Triton's `perf_analyzer`, unmodified (tritonclient 2.50): {doc.get('settings_note', '')}. It "
               "reads `/v2/models/{m}/config` and sends binary tensors. The FastAPI baseline runs with "
               "`--max-batch-size 64` so that its `/config` matches Switchyard's.\n")
    results = doc.get("results", [])
    by = {(r["server"], r["model"], row["concurrency"]): row for r in results for row in r["rows"]}
    rows = []
    for (server, model, conc), row in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0] != "switchyard")):
        verdict = "-"
        if server == "fastapi" and ("switchyard", model, conc) in by:
            sy = by[("switchyard", model, conc)]
            r = ratio(sy["throughput"], row["throughput"])
            verdict = x(r) + " " + ctx.finding("perf_analyzer", f"{model}, concurrency {conc}: infer/s vs FastAPI",
                                               x(r), r is not None and r >= 1, "perf.fastapi")
        rows.append([model, conc, NAMES.get(server, server), num(row["throughput"]), ms(row.get("p50_ms")),
                     ms(row.get("p99_ms")), ms(row.get("avg_ms")), verdict])
    out.append(table(["model", "concurrency", "server", "infer/s", "p50 ms", "p99 ms", "avg ms",
                      "Switchyard / FastAPI (wins?)"], rows))
    for r in results:
        if r.get("error"):
            out.append(f"\n- {NAMES.get(r['server'], r['server'])} {r['model']}: perf_analyzer exited with {r['rc']}: "
                       f"`{r['error']}`")
    ml = doc.get("mlserver")
    if ml is not None:
        what = ("it measured" if ml.get("rows") and ml["rc"] == 0 else
                f"it could not run (exit {ml['rc']}): `{ml.get('error', '')}`")
        out.append(f"\nMLServer: perf_analyzer needs Triton's `/v2/models/{{m}}/config`, which MLServer does not "
                   f"serve; tried once against digits-cheap, {what}.\n")
    else:
        out.append("\nMLServer: not tried (MLServer has no Triton `/config` endpoint, which perf_analyzer needs).\n")
    out.append(commands_block(doc))
    return "\n".join(out)


def _machine_line(doc: dict) -> str:
    m = doc.get("machine", {})
    return (f"Machine: {m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}), {m.get('memory_gib', '?')} GiB, "
            f"{m.get('os', '?')}; load average {doc.get('loadavg_start', '?')} at the start, "
            f"{doc.get('loadavg_end', m.get('loadavg', '?'))} at the end; {doc.get('mode', '?')} mode, stage run "
            f"{doc.get('started_at', '?')} to {doc.get('finished_at', '?')}, commit {doc.get('commit', '?')}; "
            f"command: `benchmarks/stages/75-grpc.py {doc.get('mode', 'quick')}` (what `benchmarks/run.sh "
            f"{doc.get('mode', 'quick')} grpc` runs after building).")


def grpc_section(ctx: Ctx) -> str:
    out = ["## gRPC vs REST (one Switchyard, perf_analyzer `-i grpc` vs `-i http`)\n"]
    doc = ctx.stage("grpc")
    line = status_line(ctx, "grpc")
    if line:
        out.append(line + "\n")
    if not doc or not doc.get("comparisons"):
        return "\n".join(out)
    out.append(f"Triton's `perf_analyzer`, unmodified (tritonclient 2.50), against one Switchyard serving REST and "
               f"the Open Inference Protocol over gRPC: {doc.get('settings_note', '')}. A figure per protocol is the "
               "median over the rounds; the ratio is gRPC / REST of those medians, each round's own ratio beside "
               "it. perf_analyzer's HTTP mode already sends tensors with the binary data extension (a small JSON "
               "header, then the raw bytes), not as JSON numbers, so this compares HTTP/1.1 + binary extension "
               "with HTTP/2 + protobuf `raw_input_contents`, not gRPC with JSON tensors. For the scenarios whose "
               "goal is against REST with JSON tensors, the suite's load generator (loadgen) also runs REST with "
               "JSON tensors and with the binary extension in each round; gRPC / REST-JSON is chained through "
               "the REST-binary figure both clients measured: (gRPC / REST-binary, perf_analyzer) x "
               "(REST-binary / REST-JSON, loadgen). The response cache is off: every request runs its model.\n")
    out.append(_machine_line(doc) + "\n")
    rows, detail = [], []
    for c in doc["comparisons"]:
        rest, grpc = c.get("http"), c.get("grpc")
        what = f"{c['model']}, batch {c['batch']}, concurrency {c['concurrency']}"
        r = c.get("ratio_rps")
        js, binary = c.get("json"), c.get("binary")
        goal, verdict = "-", "-"
        if c.get("goal") and c.get("vs") == "json":
            goal = f">= {c['goal']:.1f}x REST JSON"
            verdict = ctx.finding("gRPC", f"{what}: gRPC / REST-JSON req/s >= {c['goal']:.1f}x (issue 19)",
                                  f"{x(c.get('ratio_grpc_vs_json'))} (gRPC / REST-binary {x(r)}, REST-binary / "
                                  f"REST-JSON {x(c.get('ratio_binary_vs_json'))})",
                                  bool(c.get("met")), f"grpc.{c['key']}")
        elif c.get("goal"):
            goal = f">= {c['goal']:.1f}x"
            verdict = ctx.finding("gRPC", f"{what}: gRPC / REST req/s {goal} (issue 19)",
                                  f"{x(r)} ({num(grpc and grpc['rps'])} vs {num(rest and rest['rps'])} req/s)",
                                  bool(c.get("met")), f"grpc.{c['key']}")
        rows.append([what, num(rest and rest["rps"]), num(grpc and grpc["rps"]), x(r),
                     ", ".join(f"{v:.2f}" for v in c.get("round_ratios", [])) or "-",
                     num(js and js["rps"]), num(binary and binary["rps"]), x(c.get("ratio_grpc_vs_json")), goal,
                     verdict, x(c.get("ratio_server_cpu_per_req")), x(c.get("ratio_json_cpu_vs_grpc"))])
        for proto, p in (("REST", rest), ("gRPC", grpc), ("REST JSON (loadgen)", js),
                         ("REST binary (loadgen)", binary)):
            if p:
                detail.append([what, proto, p.get("runs", 0), ms(p.get("p50_ms")), ms(p.get("p99_ms")),
                               ms(p.get("avg_ms")), pct(p.get("server_cpu_busy"), 0),
                               num(p.get("server_cpu_us_per_req"), 1), pct(p.get("client_cpu_busy"), 0)])
    out.append(table(["scenario", "REST req/s (perf_analyzer)", "gRPC req/s (perf_analyzer)", "gRPC / REST",
                      "per round", "REST JSON req/s (loadgen)", "REST binary req/s (loadgen)",
                      "gRPC / REST JSON (chained)", "goal", "met?", "server CPU per request, gRPC / REST",
                      "server CPU per request, REST JSON / gRPC"], rows))
    out.append("\nLatency and CPU (medians over the rounds; CPU busy = CPU time over the run's wall time; server "
               "CPU per request from the run's CPU time and its rate):\n")
    out.append(table(["scenario", "protocol", "runs", "p50 ms", "p99 ms", "avg ms", "server CPU busy",
                      "server CPU µs/req", "client CPU busy"], detail))
    plain = next((c for c in doc["comparisons"] if not c.get("goal")), None)
    if plain:
        g = plain.get("grpc")
        errors = [r.get("error") for r in doc.get("runs", [])
                  if r["scenario"] == plain["key"] and r["protocol"] == "grpc" and r.get("error")]
        ok = bool(g and g.get("rps")) and not errors
        v = ctx.finding("gRPC", f"unmodified `perf_analyzer -i grpc` runs ({plain['model']}, concurrency "
                        f"{plain['concurrency']})", f"{num(g and g['rps'])} req/s" if ok else "; ".join(errors),
                        ok, "grpc.perf")
        out.append(f"\nUnmodified `perf_analyzer -i grpc` (shape and batching read with `ModelConfig`): {v}.\n")
    failed = [r for r in doc.get("runs", []) if r.get("error")]
    for r in failed:
        out.append(f"- {r['scenario']} {NAMES_PROTO.get(r['protocol'], r['protocol'])} round {r.get('round')}: "
                   f"`{r['error']}`")
    out.append(commands_block(doc))
    return "\n".join(out)


NAMES_PROTO = {"http": "REST", "grpc": "gRPC"}
