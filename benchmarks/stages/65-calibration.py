#!/usr/bin/env python3
"""Stage `calibration`: does online cascade calibration delay answers?

One Switchyard (release, pinned to the servers' CPU) serves the digits
cascade (threshold 0.8) under two routes with the same models and pools:
`plain`, and `shadow` with `calibrate = { shadow = 1.0, target = 0.995 }`
(every confident answer also runs the heavy model in the background, the
most a route can ask for). Open-loop load (loadgen, latency from each
request's intended send time) at a light and a heavier rate, the two routes
alternating within each round (plain, shadow | shadow, plain | ...) so a
drift of the machine hits both. Per rate: the median over the rounds of
each route's p50/p99, the ratio shadow / plain, and the shadow runs done
and draws skipped because the heavy pool was busy (from `/admin/stats`).

Goal (issue 20): shadow runs never delay responses; read as the p99 with
shadows within 1.10x the p99 without, at each rate.

    benchmarks/stages/65-calibration.py quick|full   ->  benchmarks/out/calibration.json
"""

from __future__ import annotations

import json
import statistics
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env, servers  # noqa: E402
from benchlib.load import LoadRunner, summary  # noqa: E402
from benchlib.stage import Stage  # noqa: E402

RATES = {"quick": [300, 1500], "full": [300, 1500, 3000]}
ROUNDS = {"quick": 2, "full": 3}
DURATION_S = {"quick": 5, "full": 15}
GOAL = 1.10
ROUTES = ["plain", "shadow"]

CONFIG = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true

[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true

[[routes]]
name = "plain"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}

[[routes]]
name = "shadow"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
calibrate = {{ shadow = 1.0, target = 0.995 }}
"""


def admin_url(server: servers.Server) -> str:
    i = server.cmd.index("--admin-listen")
    return f"http://{server.cmd[i + 1]}"


def calibration(server: servers.Server) -> dict:
    with urllib.request.urlopen(admin_url(server) + "/admin/stats", timeout=10) as r:
        return json.load(r).get("calibration", {}).get("shadow", {})


def body(st: Stage) -> None:
    if not (env.MODELS / "digits-cheap.onnx").exists():
        st.not_run("models/digits-*.onnx are missing (scripts/setup.sh run generates them)")
    env.pin_self_to_client()
    config = st.dir / "calibration.toml"
    config.write_text(CONFIG.format(models=env.MODELS))
    runner = LoadRunner(st.settings, st.dir / "loadgen")
    duration = DURATION_S[st.mode]
    runs = []
    with servers.Servers() as group:
        sy = group.add(servers.switchyard(st.dir, config=config))
        st.say("starting switchyard")
        sy.wait_ready()
        sy.warm(ROUTES)
        st.data["server"] = {"command": " ".join(sy.cmd), "config": config.read_text()}
        for rate in RATES[st.mode]:
            for rnd in range(ROUNDS[st.mode]):
                order = ROUTES if rnd % 2 == 0 else list(reversed(ROUTES))
                for route in order:
                    before = calibration(sy)
                    rep = runner.open(sy.infer_url(route), f"{route}/r{rate}/round{rnd}", rate, 64,
                                      duration_s=duration)
                    after = calibration(sy)
                    run = {"route": route, "rate": rate, "round": rnd, **summary(rep),
                           "shadow_runs": after.get("shadow_runs", 0) - before.get("shadow_runs", 0),
                           "skipped_busy": after.get("skipped_busy", 0) - before.get("skipped_busy", 0)}
                    runs.append(run)
                    st.commands[:] = runner.commands
                    st.say(f"{route} at {rate}/s: {run['rps']:,.0f}/s answered, p50 {run['p50_ms']:.2f} ms, "
                           f"p99 {run['p99_ms']:.2f} ms, shadow runs {run['shadow_runs']}, "
                           f"skipped busy {run['skipped_busy']}")
    st.data["runs"] = runs
    rows, findings = [], []
    for rate in RATES[st.mode]:
        med = {}
        for route in ROUTES:
            mine = [r for r in runs if r["rate"] == rate and r["route"] == route]
            med[route] = {k: statistics.median(r[k] for r in mine) for k in ("rps", "p50_ms", "p99_ms")}
            med[route]["shadow_runs"] = sum(r["shadow_runs"] for r in mine)
            med[route]["skipped_busy"] = sum(r["skipped_busy"] for r in mine)
            med[route]["errors"] = sum(r["errors"] for r in mine)
        ratio = med["shadow"]["p99_ms"] / med["plain"]["p99_ms"] if med["plain"]["p99_ms"] else None
        ok = ratio is not None and ratio <= GOAL
        rows.append([rate, f"{med['plain']['rps']:,.0f}", f"{med['plain']['p50_ms']:.2f}",
                     f"{med['plain']['p99_ms']:.2f}", f"{med['shadow']['rps']:,.0f}",
                     f"{med['shadow']['p50_ms']:.2f}", f"{med['shadow']['p99_ms']:.2f}",
                     f"{ratio:.2f}x" if ratio else "-", med["shadow"]["shadow_runs"], med["shadow"]["skipped_busy"],
                     med["plain"]["errors"] + med["shadow"]["errors"]])
        findings.append({"what": f"p99 with shadow runs (every confident answer) vs without, {rate} req/s",
                         "result": f"{ratio:.2f}x" if ratio else "-", "ok": ok, "reason_key": "calibration.p99"})
    st.data["tables"] = [{
        "title": f"Open loop, {ROUNDS[st.mode]} rounds of {duration} s per route and rate (medians over the rounds; "
                 "shadow runs and skipped draws summed over them)",
        "columns": ["offered req/s", "plain req/s", "plain p50 ms", "plain p99 ms", "shadow req/s",
                    "shadow p50 ms", "shadow p99 ms", "p99 shadow / plain", "shadow runs", "skipped (heavy busy)",
                    "errors"],
        "rows": rows,
        "note": f"Goal: p99 with shadows <= {GOAL:.2f}x without at each rate. Shadow runs only start while the "
                "heavy model has an idle pool; inputs are loadgen's random rows, so the cheap model's confidence "
                "(and the share that escalates) differs from the digits test split's.",
    }]
    st.data["findings"] = findings


if __name__ == "__main__":
    Stage("calibration", "Online calibration: answer latency with and without shadow runs").run(body)
