#!/usr/bin/env python3
"""Stage `draft-final`: time to the draft and time to the final of
draft-then-final SSE streams (parallel and sequential routes), side by side
with the cheap model (digits-cheap) and the heavy model (synth-heavy) called
alone without streaming, at 1 and 16 concurrent clients
(benchmarks/sse_bench.sh, `sse-bench`).

    benchmarks/stages/80-draft-final.py quick|full   ->  benchmarks/out/draft-final.json

Goal (the draft-then-final issue): time to draft within 10% of the cheap
model's own latency, time to final within 10% of the heavy model's own.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402

CALLS = {"quick": 200, "full": 600}
ROUTES = {"draft": "parallel", "draft-seq": "sequential"}
GOAL = 1.10


def quantile_ms(micros: list[int], q: float) -> float | None:
    """Nearest-rank quantile in ms (as `sse-bench` prints it)."""
    if not micros:
        return None
    s = sorted(micros)
    return s[min(len(s), max(1, math.ceil(q * len(s)))) - 1] / 1000.0


def summarize(level: dict) -> dict:
    out = {"concurrency": level["concurrency"], "no_draft": level["no_draft"], "streams": len(level["last"]["micros"])}
    for kind in ("cheap", "heavy", "draft", "last"):
        m = level[kind]["micros"]
        out[kind] = {"n": len(m), "p50_ms": quantile_ms(m, 0.5), "p99_ms": quantile_ms(m, 0.99)}
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def f3(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def f2(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def body(st: Stage) -> None:
    calls = CALLS[st.mode]
    st.settings = {"calls_per_phase_and_level": calls, "concurrency": [1, 16], "rounds": 3}
    cmd = ["benchmarks/sse_bench.sh", str(calls)]
    st.commands.append(" ".join(cmd))
    rc = run_child(cmd, 1500, cwd=env.REPO, env=env.child_env())
    if rc != 0:
        raise RuntimeError(f"sse_bench.sh exited with {rc}")
    routes = {}
    for route in ROUTES:
        src = env.OUT / f"sse-{route}.json"
        shutil.move(str(src), st.dir / src.name)
        routes[route] = [summarize(level) for level in json.loads((st.dir / src.name).read_text())]
    st.data["routes"] = routes
    st.data["pinning_note"] = "unpinned: server and sse-bench share both CPUs"
    tables, findings, series = [], [], []
    for route, mode in ROUTES.items():
        rows = []
        for lv in routes[route]:
            c, h, d, f = lv["cheap"], lv["heavy"], lv["draft"], lv["last"]
            rd, rf = ratio(d["p50_ms"], c["p50_ms"]), ratio(f["p50_ms"], h["p50_ms"])
            rows.append([lv["concurrency"], f"{f3(c['p50_ms'])} / {f3(c['p99_ms'])}", f"{f3(d['p50_ms'])} / {f3(d['p99_ms'])}",
                         f"{f2(rd)}, {f2(ratio(d['p99_ms'], c['p99_ms']))}", f"{f3(h['p50_ms'])} / {f3(h['p99_ms'])}",
                         f"{f3(f['p50_ms'])} / {f3(f['p99_ms'])}", f"{f2(rf)}, {f2(ratio(f['p99_ms'], h['p99_ms']))}",
                         f"{lv['streams']} / {lv['no_draft']}"])
            if mode == "parallel":
                n = lv["concurrency"]
                findings.append({"what": f"time to draft p50 vs cheap model alone, {n} stream(s) (goal <= 1.10)",
                                 "result": f"{f2(rd)}x", "ok": rd is not None and rd <= GOAL,
                                 "reason_key": "draft-final.draft"})
                findings.append({"what": f"time to final p50 vs heavy model alone, {n} stream(s) (goal <= 1.10)",
                                 "result": f"{f2(rf)}x", "ok": rf is not None and rf <= GOAL,
                                 "reason_key": "draft-final.final"})
        tables.append({
            "title": f"Route `{route}` ({mode} mode), {calls} calls per phase and level, p50 / p99 in ms:",
            "columns": ["streams", "cheap alone", "draft", "draft / cheap (p50, p99)", "heavy alone", "final",
                        "final / heavy (p50, p99)", "streams / final before draft"],
            "rows": rows,
            "note": ("Time to draft / final: from sending the request to the complete `draft` / `final` event. "
                     "Cheap alone = plain calls to digits-cheap, heavy alone = plain calls to synth-heavy, "
                     "interleaved with the streams in 3 rounds; no confidence threshold, so every stream waits "
                     "for the heavy final (`benchmarks/sse_bench.toml`); `Cache-Control: no-store`; one "
                     "keep-alive connection per client; server and client unpinned (both CPUs)."
                     if mode == "parallel" else
                     "Sequential mode runs the heavy model only after the draft, so its final is expected near "
                     "cheap + heavy; it is shown for the cost of saving compute, not against the goal."),
        })
    for route in ROUTES:
        for key, what in (("draft", "draft"), ("last", "final")):
            series.append({"label": f"{ROUTES[route]}: {what} p50", "x": [lv["concurrency"] for lv in routes[route]],
                           "y": [lv[key]["p50_ms"] for lv in routes[route]]})
    par = routes["draft"]
    for key, what in (("cheap", "cheap alone"), ("heavy", "heavy alone")):
        series.append({"label": f"{what} p50", "x": [lv["concurrency"] for lv in par], "y": [lv[key]["p50_ms"] for lv in par]})
    st.data["tables"] = tables
    st.data["findings"] = findings
    st.data["plots"] = [{"file": "draft-final.png", "title": "Draft and final vs the models alone (p50)",
                         "kind": "bar", "xlabel": "concurrent streams", "ylabel": "ms", "logy": True,
                         "series": series}]


if __name__ == "__main__":
    Stage("draft-final", "Draft vs final latency (SSE)").run(body)
