#!/usr/bin/env python3
"""Stage `grpc`: Switchyard's gRPC front end (the Open Inference Protocol's
`inference.GRPCInferenceService`, `--grpc-listen`) against its REST front
end, side by side on ONE Switchyard serving both, measured with the same
unmodified perf_analyzer (tritonclient 2.50) in the same client mode as the
`perf-analyzer` stage (`--async --max-threads 1`, one concurrency per run):
`-i http` (V2 REST; perf_analyzer sends the tensors with the binary data
extension, not as JSON numbers) vs `-i grpc` (`raw_input_contents`).

- digits-cheap, batch 1, concurrency 40: requests/s (goal, issue 19: gRPC >= REST);
- synth-wide, batch 32 (`-b 32`: 32 rows of X [64] per request), concurrency 4:
  requests/s and latency (goal, issue 19: gRPC >= 1.2x REST);
- digits-cheap, batch 64, concurrency 4: a large tensor on a cheap model,
  where the transport is a real share of the work (goal: gRPC >= 1.2x REST
  with JSON tensors);
- digits-cheap, batch 1, concurrency 4: one run per protocol (unmodified
  perf_analyzer over gRPC, shape and batching from `ModelConfig`).

perf_analyzer's HTTP mode always sends the binary tensor extension, so it
cannot show REST with JSON tensors, which the issue's 1.2x is about. For
that, each round of a scenario with a 1.2x goal also runs the suite's own
load generator (loadgen, closed loop, the same concurrency and rows per
request, random rows) against REST twice: JSON tensors and the binary
extension. gRPC / REST-JSON is then chained through the REST-binary figure
both clients measured: (gRPC / REST-binary, perf_analyzer) x (REST-binary /
REST-JSON, loadgen); the server CPU per request of every run is beside it,
which does not depend on the client. The response cache is off (the
built-in config without `[cache]`): every request runs its model.

The two compared scenarios run in rounds, the order of the protocols
alternating from round to round (REST, gRPC | gRPC, REST | ...), so a drift of
the machine's load hits both; a scenario's figure per protocol is the median
over the rounds and the ratio is gRPC / REST of those medians (the per-round
ratios are kept too). Each run also records the CPU time the server (on the
servers' CPU) and perf_analyzer (on the client CPU) used, to tell which side
was the bottleneck.

    benchmarks/stages/75-grpc.py quick|full   ->  benchmarks/out/grpc.json
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env, servers  # noqa: E402
from benchlib.perf import CLIENT_MODE, PERF, bounded, parse  # noqa: E402
from benchlib.stage import Stage  # noqa: E402

# Measurement window and stability as in the perf-analyzer stage.
INTERVAL_MS = {"quick": 1000, "full": 5000}
STABILITY = {"quick": 50, "full": 25}
# Rounds of (REST, gRPC) per compared scenario, the order alternating.
ROUNDS = {"quick": 1, "full": 3}
TIMEOUT_S = {"quick": 60, "full": 240}
PROTOCOLS = ["http", "grpc"]
NAMES = {"http": "REST", "grpc": "gRPC"}
# The scenarios: model, rows per request (perf_analyzer's -b), concurrency, the
# issue's goal for gRPC / REST requests/s (None: no goal, one run per protocol).
SCENARIOS = [
    {"key": "digits-b1-c40", "model": "digits-cheap", "batch": 1, "concurrency": 40, "goal": 1.0},
    {"key": "wide-b32-c4", "model": "synth-wide", "batch": 32, "concurrency": 4, "goal": 1.2, "vs": "json"},
    {"key": "digits-b64-c4", "model": "digits-cheap", "batch": 64, "concurrency": 4, "goal": 1.2, "vs": "json"},
    {"key": "digits-b1-c4", "model": "digits-cheap", "batch": 1, "concurrency": 4, "goal": None},
]
CLK_TCK = os.sysconf("SC_CLK_TCK")
# loadgen's REST encodings, for the scenarios compared with REST-JSON.
ENCODINGS = ["json", "binary"]
NAMES.update(json="REST JSON (loadgen)", binary="REST binary (loadgen)")


def config_without_cache(out: Path) -> Path:
    """The built-in config without its `[cache]` section (its model folder
    made absolute: a config file's relative paths start at its own folder)."""
    text = (env.REPO / "gateway" / "src" / "config" / "default.toml").read_text()
    text = text.replace('path = "models"', f'path = "{env.MODELS}"', 1)
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("["):
            skipping = line.strip() == "[cache]"
        if not skipping:
            kept.append(line)
    path = out / "switchyard-no-cache.toml"
    path.write_text("\n".join(kept) + "\n")
    return path


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by `pid` and its descendants."""
    total = 0
    for p in servers.process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the gRPC listener on 127.0.0.1:{port} does not accept connections")


def perf_cmd(st: Stage, protocol: str, port: int, sc: dict, csv_path: Path, interval_ms: int,
             trials: int = 8) -> list[str]:
    return ["env", f"PERF_PROTOCOL={protocol}"] + env.client_prefix() + [
        "benchmarks/perf_analyzer.sh", str(port), sc["model"], "-b", str(sc["batch"]),
        "--concurrency-range", f"{sc['concurrency']}:{sc['concurrency']}", *CLIENT_MODE,
        "--measurement-interval", str(interval_ms), "--stability-percentage", str(STABILITY[st.mode]),
        "--max-trials", str(trials), "-f", env.rel(csv_path)]


def run_one(st: Stage, server: servers.Server, protocol: str, sc: dict, label: str, interval_ms: int,
            trials: int = 8) -> dict:
    """One perf_analyzer run; requests/s is perf_analyzer's infer/s over the
    rows per request (it counts every row of a batch as an inference)."""
    port = server.grpc_port if protocol == "grpc" else server.port
    csv_path = st.dir / f"{label}.csv"
    csv_path.unlink(missing_ok=True)
    cmd = perf_cmd(st, protocol, port, sc, csv_path, interval_ms, trials)
    st.commands.append(shlex.join(cmd))
    srv0, cli0, t0 = cpu_s(server.proc.pid), children_cpu_s(), time.monotonic()
    rc, out = bounded(cmd, TIMEOUT_S[st.mode])
    wall = time.monotonic() - t0
    srv, cli = cpu_s(server.proc.pid) - srv0, children_cpu_s() - cli0
    (st.dir / f"{label}.txt").write_text(out)
    run = {"scenario": sc["key"], "protocol": protocol, "rc": rc, "wall_s": round(wall, 2),
           "server_cpu_busy": round(srv / wall, 3), "client_cpu_busy": round(cli / wall, 3)}
    rows = [r for r in parse(csv_path, out) if r["concurrency"] == sc["concurrency"]]
    if rows:
        row = rows[0]
        run.update(infer_per_s=row["throughput"], rps=row["throughput"] / sc["batch"], p50_ms=row.get("p50_ms"),
                   p99_ms=row.get("p99_ms"), avg_ms=row.get("avg_ms"))
        # Server CPU per request, from the whole run's CPU time and its rate.
        run["server_cpu_us_per_req"] = round(srv / wall / run["rps"] * 1e6, 1) if run["rps"] else None
        st.say(f"  {NAMES[protocol]}: {run['rps']:,.0f} req/s, p50 {row.get('p50_ms', 0):.3f} ms, "
               f"p99 {row.get('p99_ms', 0):.3f} ms; server CPU {run['server_cpu_busy']:.0%}, "
               f"perf_analyzer CPU {run['client_cpu_busy']:.0%}")
    if rc != 0 or not rows:
        run["error"] = (f"exit {rc}: " + " ".join(out.strip().splitlines()[-2:]))[-300:]
        st.say(f"  {NAMES[protocol]}: failed ({run['error']})")
    return run


def run_loadgen(st: Stage, server: servers.Server, encoding: str, sc: dict, label: str) -> dict:
    """One loadgen run on REST with JSON tensors or the binary extension."""
    report = st.dir / "loadgen" / f"{label}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    cmd = env.client_prefix() + [
        env.rel(env.LOADGEN), "--url", server.infer_url(sc["model"]), "--mode", "closed", "--concurrency",
        str(sc["concurrency"]), "--duration", f"{st.settings['duration_s']}s", "--warmup", "1s", "--timeout", "10s",
        "--input-shape", f"X:{sc['batch']},64", "--datatype", "FP32", "--distinct", "64", "--seed", "42",
        "--label", label, "--json-out", env.rel(report), "--quiet"]
    if encoding == "binary":
        cmd += ["--binary", "--binary-output"]
    st.commands.append(shlex.join(cmd))
    srv0, t0 = cpu_s(server.proc.pid), time.monotonic()
    rc, out = bounded(cmd, TIMEOUT_S[st.mode])
    wall = time.monotonic() - t0
    srv = cpu_s(server.proc.pid) - srv0
    run = {"scenario": sc["key"], "protocol": encoding, "rc": rc, "wall_s": round(wall, 2),
           "server_cpu_busy": round(srv / wall, 3)}
    if rc == 0 and report.exists():
        rep = json.loads(report.read_text())
        lat = rep["latency_us"]
        run.update(rps=rep["rps"], p50_ms=lat["p50"] / 1e3, p99_ms=lat["p99"] / 1e3, avg_ms=lat.get("mean", 0) / 1e3,
                   errors=rep["requests"] - rep["ok"])
        run["server_cpu_us_per_req"] = round(srv / wall / run["rps"] * 1e6, 1) if run["rps"] else None
        st.say(f"  {NAMES[encoding]}: {run['rps']:,.0f} req/s, p50 {run['p50_ms']:.3f} ms; server CPU "
               f"{run['server_cpu_busy']:.0%}, {run.get('server_cpu_us_per_req')} µs/req")
    else:
        run["error"] = (f"exit {rc}: " + " ".join(out.strip().splitlines()[-2:]))[-300:]
        st.say(f"  {NAMES[encoding]}: failed ({run['error']})")
    return run


def median(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def summarize(sc: dict, runs: list[dict]) -> dict:
    """Per protocol the median over the rounds; gRPC / REST of the medians;
    the ratio of each round's pair."""
    mine = [r for r in runs if r["scenario"] == sc["key"] and "rps" in r]
    out = {**sc, "rounds": len({r["round"] for r in runs if r["scenario"] == sc["key"]})}
    for proto in PROTOCOLS + ENCODINGS:
        got = [r for r in mine if r["protocol"] == proto]
        out[proto] = {k: median([r.get(k) for r in got]) for k in
                      ("rps", "p50_ms", "p99_ms", "avg_ms", "server_cpu_busy", "client_cpu_busy",
                       "server_cpu_us_per_req")} | {"runs": len(got)} if got else None
    rest, grpc = out["http"], out["grpc"]
    out["ratio_rps"] = grpc["rps"] / rest["rps"] if rest and grpc and rest["rps"] else None
    out["ratio_p50"] = (grpc["p50_ms"] / rest["p50_ms"] if rest and grpc and rest.get("p50_ms")
                        and grpc.get("p50_ms") else None)
    out["ratio_server_cpu_per_req"] = (grpc["server_cpu_us_per_req"] / rest["server_cpu_us_per_req"]
                                       if rest and grpc and rest.get("server_cpu_us_per_req")
                                       and grpc.get("server_cpu_us_per_req") else None)
    pairs = {}
    for r in mine:
        pairs.setdefault(r["round"], {})[r["protocol"]] = r["rps"]
    out["round_ratios"] = [round(p["grpc"] / p["http"], 3) for _, p in sorted(pairs.items())
                           if "grpc" in p and p.get("http")]
    js, binary = out.get("json"), out.get("binary")
    out["ratio_binary_vs_json"] = binary["rps"] / js["rps"] if js and binary and js["rps"] else None
    out["ratio_grpc_vs_json"] = (out["ratio_rps"] * out["ratio_binary_vs_json"]
                                 if out["ratio_rps"] is not None and out["ratio_binary_vs_json"] is not None else None)
    out["ratio_json_cpu_vs_grpc"] = (js["server_cpu_us_per_req"] / grpc["server_cpu_us_per_req"]
                                     if js and grpc and js.get("server_cpu_us_per_req")
                                     and grpc.get("server_cpu_us_per_req") else None)
    judged = out["ratio_grpc_vs_json"] if sc.get("vs") == "json" else out["ratio_rps"]
    out["met"] = (judged >= sc["goal"]) if sc["goal"] and judged is not None else None
    return out


def body(st: Stage) -> None:
    if not PERF.exists():
        st.not_run("perf_analyzer is missing (.venv-perf: run scripts/setup.sh bench)")
    env.pin_self_to_client()
    rounds = ROUNDS[st.mode]
    st.data.update(loadavg_start=env.loadavg(), rounds=rounds, runs=[], comparisons=[],
                   settings_note=(
                       "one Switchyard (built-in config without its response cache) with its REST listener and its gRPC listener "
                       "(`--grpc-listen`), pinned to the servers' CPU; perf_analyzer `-i http` vs `-i grpc`, "
                       "asynchronous calls from one client thread (`--async --max-threads 1`), "
                       f"measurement interval {INTERVAL_MS[st.mode]} ms, stability {STABILITY[st.mode]}%, at most "
                       f"8 windows, pinned to the client CPU; after one short warm-up run per compared scenario and "
                       f"protocol (not kept: the first commands below), {rounds} round(s) per compared scenario, "
                       "the protocols' order alternating"))
    with servers.Servers() as group:
        s = group.add(servers.switchyard(st.dir, config=config_without_cache(st.dir), grpc=True))
        s.wait_ready()
        wait_port(s.grpc_port)
        s.warm(sorted({sc["model"] for sc in SCENARIOS}))
        st.data["server_command"] = shlex.join(s.cmd)
        compared = [sc for sc in SCENARIOS if sc["goal"]]
        # Warm-up, not kept: each compared scenario once per protocol, short windows
        # (ONNX Runtime's arena grows to the largest batch, connections open).
        for sc in compared:
            for proto in PROTOCOLS:
                st.say(f"warm-up: {NAMES[proto]} {sc['model']} batch {sc['batch']}, concurrency {sc['concurrency']}")
                run_one(st, s, proto, sc, f"warmup-{sc['key']}-{proto}", 500, trials=3)
            if sc.get("vs") == "json":
                for encoding in ENCODINGS:
                    st.say(f"warm-up: {NAMES[encoding]} {sc['model']} batch {sc['batch']}")
                    run_loadgen(st, s, encoding, sc, f"warmup-{sc['key']}-{encoding}")
        for rnd in range(rounds):
            order = PROTOCOLS if rnd % 2 == 0 else PROTOCOLS[::-1]
            for sc in compared:
                for proto in order:
                    st.say(f"round {rnd + 1}/{rounds}: {NAMES[proto]} {sc['model']} batch {sc['batch']}, "
                           f"concurrency {sc['concurrency']}")
                    run = run_one(st, s, proto, sc, f"{sc['key']}-{proto}-r{rnd + 1}", INTERVAL_MS[st.mode])
                    st.data["runs"].append({"round": rnd + 1, **run})
                if sc.get("vs") == "json":
                    for encoding in (ENCODINGS if rnd % 2 == 0 else ENCODINGS[::-1]):
                        st.say(f"round {rnd + 1}/{rounds}: {NAMES[encoding]} {sc['model']} batch {sc['batch']}, "
                               f"concurrency {sc['concurrency']}")
                        run = run_loadgen(st, s, encoding, sc, f"{sc['key']}-{encoding}-r{rnd + 1}")
                        st.data["runs"].append({"round": rnd + 1, **run})
        for sc in SCENARIOS:
            if sc["goal"]:
                continue
            for proto in PROTOCOLS:
                st.say(f"{NAMES[proto]} {sc['model']} batch {sc['batch']}, concurrency {sc['concurrency']}")
                run = run_one(st, s, proto, sc, f"{sc['key']}-{proto}", INTERVAL_MS[st.mode])
                st.data["runs"].append({"round": 1, **run})
    st.data["loadavg_end"] = env.loadavg()
    st.data["comparisons"] = [summarize(sc, st.data["runs"]) for sc in SCENARIOS]
    for c in st.data["comparisons"]:
        if c["ratio_rps"] is not None:
            st.say(f"{c['key']}: REST {c['http']['rps']:,.0f} req/s, gRPC {c['grpc']['rps']:,.0f} req/s, "
                   f"gRPC / REST {c['ratio_rps']:.2f}x (rounds: {c['round_ratios']})"
                   + (f"; gRPC / REST-JSON (chained) {c['ratio_grpc_vs_json']:.2f}x"
                      if c.get("ratio_grpc_vs_json") else ""))
    missing = [c["key"] for c in st.data["comparisons"] if c["ratio_rps"] is None]
    if missing:
        raise RuntimeError(f"no REST / gRPC pair measured for {', '.join(missing)}")


if __name__ == "__main__":
    Stage("grpc", "gRPC vs REST on one Switchyard (perf_analyzer -i grpc vs -i http)").run(body)
