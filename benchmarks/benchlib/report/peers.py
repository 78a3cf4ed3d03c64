"""Report sections from the `peers` and `runtime` stages: Switchyard vs
FastAPI vs MLServer at 4 and 40 clients, throughput vs concurrency, the
gateway as a fraction of the raw runtime limit, start-up and cold start,
memory."""

from __future__ import annotations

from .common import Ctx, commands_block, ms, num, pct, plot_ref, ratio, settings_line, share, status_line, table, x

PEERS = ["fastapi", "mlserver"]
NAMES = {"switchyard": "Switchyard", "fastapi": "FastAPI", "fastapi-inline": "FastAPI (inline run)",
         "mlserver": "MLServer", "mlserver-batch": "MLServer + adaptive batching"}
# A peer run in two configurations: each row compares with the better one (by req/s).
VARIANTS = {"fastapi": ("fastapi", "fastapi-inline"), "mlserver": ("mlserver", "mlserver-batch")}
CONFIG_NAMES = {"fastapi": "threadpool", "fastapi-inline": "inline", "mlserver": "adaptive batching off",
                "mlserver-batch": "adaptive batching on"}
MLSERVER_CONFIG = {k: v for k, v in CONFIG_NAMES.items() if k.startswith("mlserver")}
SECTION = "Peers"


def runs_by_key(doc: dict) -> dict[tuple, dict]:
    return {(r["server"], r["model"], r["concurrency"]): r for r in doc.get("runs", []) if "rps" in r}


def best_variant(runs: dict, peer: str, model: str, conc: int) -> dict | None:
    """The better of a peer's configurations for one cell (by req/s)."""
    cands = [runs[k] for k in ((v, model, conc) for v in VARIANTS.get(peer, (peer,))) if k in runs]
    return max(cands, key=lambda r: r["rps"]) if cands else None


def cell(runs: dict, server: str, model: str, conc: int) -> dict | None:
    return best_variant(runs, server, model, conc)


def peers_section(ctx: Ctx) -> str:
    out = ["## Switchyard vs FastAPI vs MLServer\n"]
    doc = ctx.stage("peers")
    line = status_line(ctx, "peers")
    if line:
        out.append(line + "\n")
    if not doc:
        return "\n".join(out)
    out.append(f"Closed loop (each client one keep-alive connection, next request when the answer arrives), one row "
               f"per request, the same 64 JSON bodies for every server, models addressed directly (no cache). "
               f"{settings_line(doc)}.\n")
    runs = runs_by_key(doc)
    rows = []
    for model in doc["settings"]["concurrency"]:
        for conc in (4, 40):
            sy = runs.get(("switchyard", model, conc))
            if not sy:
                continue
            row = [model, conc, num(sy["rps"]), ms(sy["p99_ms"])]
            verdicts = []
            for peer in PEERS:
                p = cell(runs, peer, model, conc)
                row += [num(p["rps"]) if p else "-", ms(p["p99_ms"]) if p else "-"]
                row.append(CONFIG_NAMES.get(p["server"], "-") if p else "-")
                r = ratio(sy["rps"], p["rps"] if p else None)
                verdicts.append(x(r))
                if p:
                    ctx.finding(SECTION, f"req/s vs {NAMES[peer]}, {model}, {conc} clients", x(r), r >= 1,
                                f"peers.{peer}")
                    p99_ok = sy["p99_ms"] <= p["p99_ms"]
                    ctx.finding(SECTION, f"p99 vs {NAMES[peer]}, {model}, {conc} clients",
                                f"{ms(sy['p99_ms'])} vs {ms(p['p99_ms'])} ms", p99_ok,
                                "peers.p99-batching" if r and r >= 1 else f"peers.{peer}")
            rows.append(row + verdicts)
    out.append(table(["model", "clients", "Switchyard req/s", "p99 ms", "FastAPI req/s", "p99 ms",
                      "FastAPI run (the better of two)", "MLServer req/s", "p99 ms",
                      "MLServer config (the better of two)", "Switchyard / FastAPI", "Switchyard / MLServer"], rows))
    fa40 = cell(runs, "fastapi", "digits-cheap", 40)
    sy40 = runs.get(("switchyard", "digits-cheap", 40))
    if fa40 and sy40:
        r = sy40["rps"] / fa40["rps"]
        verdict = ctx.finding("Goals", "digits-cheap at 40 clients: >= 10x the FastAPI baseline, the better of "
                              f"its two runs ({CONFIG_NAMES.get(fa40['server'], fa40['server'])} here) (issue 3)",
                              x(r), r >= 10, "goal.10x-fastapi")
        out.append(f"\nGoal from issue 3, digits-cheap at 40 clients >= 10x the FastAPI baseline: {x(r)}, met: "
                   f"{verdict}.\n")
    out.append(mlserver_note(doc, runs))
    out.append(sweep_table(doc, runs))
    out.append(plot_ref(ctx, "throughput-vs-concurrency.png", "Throughput vs concurrency"))
    out.append(servers_list(doc))
    out.append(commands_block(doc))
    return "\n".join(out)


def mlserver_note(doc: dict, runs: dict) -> str:
    rows = []
    for (server, model, conc), r in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        if server in CONFIG_NAMES and conc in (4, 40):
            peer = "FastAPI" if server.startswith("fastapi") else "MLServer"
            rows.append([model, conc, peer, CONFIG_NAMES[server], num(r["rps"]), ms(r["p50_ms"]), ms(r["p99_ms"]),
                         r["errors"]])
    if not rows:
        return ""
    return ("\nFastAPI was run in two ways (`session.run` in Starlette's threadpool, and inline on the event loop) "
            "and MLServer in two configurations (without and with its adaptive batching); the table above compares "
            "with the better one of each in each row (by req/s). All of them:\n\n"
            + table(["model", "clients", "peer", "configuration", "req/s", "p50 ms", "p99 ms", "errors"], rows))


def sweep_table(doc: dict, runs: dict) -> str:
    servers = [s for s in ("switchyard", "fastapi", "fastapi-inline", "mlserver", "mlserver-batch")
               if any(k[0] == s for k in runs)]
    rows = []
    for model, levels in doc["settings"]["concurrency"].items():
        for conc in levels:
            row = [model, conc]
            for s in servers:
                r = runs.get((s, model, conc))
                row.append(f"{num(r['rps'])} ({ms(r['p99_ms'])})" if r else "-")
            rows.append(row)
    return ("\nThroughput vs concurrency, req/s (p99 ms), every level of this run:\n\n"
            + table(["model", "clients"] + [NAMES[s] for s in servers], rows))


def servers_list(doc: dict) -> str:
    lines = ["\nThe servers (each pinned to the servers' CPU):\n"]
    for name, info in doc.get("servers", {}).items():
        err = f" **Failed to start:** {info['error']}" if info.get("error") else ""
        lines.append(f"- {NAMES.get(name, name)}: {info.get('description', '')}.{err}")
    versions = doc.get("versions", {})
    if versions:
        flat = ", ".join(f"{k} {v}" for env_ in versions.values() for k, v in env_.items())
        lines.append(f"- Versions: {flat}.")
    for note in doc.get("notes", []):
        lines.append(f"- {note}")
    agree = doc.get("answers_agree", {})
    if agree:
        ok = all(a["agree"] for a in agree.values())
        lines.append(f"- Same answers: the same body got the same `label` from every server "
                     f"({', '.join(agree)}): {'yes' if ok else '**no**'}.")
    return "\n".join(lines) + "\n"


def raw_limit_section(ctx: Ctx) -> str:
    out = ["## Gateway throughput as a fraction of the raw runtime limit\n"]
    rt, peers = ctx.stage("runtime"), ctx.stage("peers")
    for name in ("runtime", "peers"):
        line = status_line(ctx, name)
        if line:
            out.append(line + "\n")
    if not rt or not peers or "raw_limit" not in rt:
        return "\n".join(out)
    out.append("The raw limit is `Session::run` called in a loop at the best batch size, one intra-op thread, pinned "
               "to the servers' CPU: no HTTP, no queue, no copies beyond the outputs. \"Runtime alone\" is "
               "Switchyard's runtime without HTTP (queue, dynamic batcher with the gateway's settings, worker thread), "
               "40 one-row callers on the same CPU. The gateway figure is Switchyard's best req/s (one row per "
               "request) at any concurrency in the peers stage, on the same single CPU.\n")
    runs = runs_by_key(peers)
    alone_by_model = {a["model"]: a["rows_per_s"] for a in rt["raw_limit"].get("runtime_alone", [])}
    rows = []
    for best in rt["raw_limit"].get("best", []):
        model = best["model"]
        sy = [r for k, r in runs.items() if k[0] == "switchyard" and k[1] == model]
        if not sy:
            continue
        top = max(sy, key=lambda r: r["rps"])
        frac = top["rps"] / best["rows_per_s"]
        verdict = ctx.finding("Raw limit", f"{model}: gateway / raw runtime limit", pct(frac), frac >= 0.9,
                              f"raw-limit.{model}")
        alone = alone_by_model.get(model)
        rows.append([model, f"{num(best['rows_per_s'])} (batch {best['batch']})",
                     num(alone) if alone else "-", f"{num(top['rps'])} ({top['concurrency']} clients)", share(frac),
                     share(ratio(top["rps"], alone)) if alone else "-", verdict])
        if alone and model == "synth-heavy":
            r40 = runs.get(("switchyard", model, 40))
            if r40:
                f40 = r40["rps"] / alone
                ctx.finding("Goals", "synth-heavy at 40 clients within 10% of the runtime alone (issue 3)", pct(f40),
                            f40 >= 0.9, "raw-limit.synth-heavy")
    out.append(table(["model", "raw limit rows/s", "runtime alone: gateway batching, 40 one-row callers, same CPU",
                      "gateway req/s (best)", "gateway / raw limit", "gateway / runtime alone", ">= 90%?"], rows))
    per_batch = [[r["model"], r["batch"], num(r["rows_per_s"])] for r in rt["raw_limit"].get("raw_limit", [])]
    out.append("\nRaw limit at each batch size measured:\n\n" + table(["model", "batch", "rows/s"], per_batch))
    return "\n".join(out)


def startup_section(ctx: Ctx) -> str:
    out = ["## Cold start\n"]
    rt, peers = ctx.stage("runtime"), ctx.stage("peers")
    if rt:
        py = rt.get("python_cold_start_ms", {})
        rows = [[c["model"], ms(c["cold_start_ms"]), ms(py.get(c["model"]))] for c in rt["bench"].get("cold_start", [])]
        out.append("Per model: the load of its pool's session in Switchyard's runtime (parse, graph optimisation; "
                   "runtime-bench) and the same file in onnxruntime's Python API (what the FastAPI and MLServer "
                   "peers do per model at start-up).\n")
        out.append(table(["model", "Switchyard runtime load ms", "onnxruntime Python InferenceSession ms"], rows))
    else:
        out.append(status_line(ctx, "runtime") + "\n")
    if peers:
        servers = peers.get("servers", {})
        sy = servers.get("switchyard", {}).get("all_models_s")
        rows = []
        for name, info in servers.items():
            if "ready_s" not in info:
                continue
            verdict = "-"
            if name != "switchyard" and sy is not None and info.get("all_models_s"):
                ok = sy <= info["all_models_s"]
                verdict = ctx.finding("Cold start", f"server start to every model answering vs {NAMES[name]}",
                                      f"{sy:.2f} vs {info['all_models_s']:.2f} s", ok, "startup")
            rows.append([NAMES.get(name, name), f"{info['ready_s']:.2f}", f"{info.get('all_models_s', 0):.2f}",
                         verdict])
        out.append("\nPer server, from the process start (four models: digits-cheap, digits-heavy, synth-heavy, "
                   "synth-wide; Switchyard loads lazily, so the second column is the one to compare):\n")
        out.append(table(["server", "ready (health) s", "every model answered once s", "Switchyard faster?"], rows))
    return "\n".join(out)


def memory_section(ctx: Ctx) -> str:
    out = ["## Memory (RSS)\n"]
    doc = ctx.stage("peers")
    if not doc:
        return "\n".join(out + [status_line(ctx, "peers")])
    out.append("Resident memory of each server's whole process tree (`/proc/PID/status` VmRSS summed over the "
               "server and its child processes; PSS from `smaps_rollup` shares pages between processes fairly). "
               "Idle: after start-up and one request to each of the four models. Under load: the peak sampled "
               "every 100 ms during the peers stage's load runs.\n")
    servers = doc.get("servers", {})
    sy = servers.get("switchyard", {})
    rows = []
    for name, info in servers.items():
        idle, peak = info.get("idle_memory"), info.get("peak_memory")
        if not idle:
            continue
        verdict = "-"
        if name != "switchyard" and sy.get("peak_memory") and peak:
            peer = "mlserver" if name.startswith("mlserver") else "fastapi" if name.startswith("fastapi") else name
            ok = sy["peak_memory"]["rss_mib"] <= peak["rss_mib"] and sy["idle_memory"]["rss_mib"] <= idle["rss_mib"]
            verdict = ctx.finding("Memory", f"RSS (idle and peak) vs {NAMES[name]}",
                                  f"{sy['idle_memory']['rss_mib']:.0f}/{sy['peak_memory']['rss_mib']:.0f} vs "
                                  f"{idle['rss_mib']:.0f}/{peak['rss_mib']:.0f} MiB", ok, f"memory.{peer}")
        rows.append([NAMES.get(name, name), idle["processes"], num(idle["rss_mib"], 1), num(idle["pss_mib"], 1),
                     num(peak["rss_mib"], 1) if peak else "-", num(peak["pss_mib"], 1) if peak else "-", verdict])
    out.append(table(["server", "processes", "idle RSS MiB", "idle PSS MiB", "under load RSS MiB",
                      "under load PSS MiB", "Switchyard smaller?"], rows))
    return "\n".join(out)
