#!/usr/bin/env python3
"""Tenants under overload (issue 41): fair share, priority classes and
deadline order, measured on one gateway in one run.

The route's capacity `cap` (answered req/s) is measured first, closed loop
with as many callers as the queue holds, on the model every scenario uses (synth-heavy, `--rows` rows a request,
one CPU worker, cache off). Then, each scenario in every round (the order
alternates between rounds, so drift hits them alike):

  noisy     tenant A offers 5 x cap, tenant B 0.2 x cap (open loop) on a
            route whose keys name both; once with the fair share (the
            default), once on a twin route with `fair_share = false`.
            Figures: B's share answered and its p99 against its budget
            (`--b-budget-ms`), A's 429s and whether they carry Retry-After.
  priority  the high class (`x-priority: 1`) alone at 0.5 x cap (its
            unloaded p99), then with the low class (`x-priority: 4`) at
            1.5 x cap beside it (2 x overload in all): each class's p99 and
            the share of it shed (429), from the loads and from
            `/admin/stats` "priority". Once per round on each variant
            (`--variants`, the order alternating between rounds): the
            model `prio` (`off`: neither setting), its twin
            `prio-preempt` (`preempt`: batching.preempt = true) and its
            twin `prio-reserve` (`reserve`: batching.reserve_top_class =
            true); also the answered rows/s of both classes together
            (what a setting costs) and the pool's preemption and
            reserved-batch counts.
  mixed     half the requests with a `--short-ms` budget, half with
            500 ms, 1.5 x cap in all, on a model whose queue is in deadline
            order and on its twin with `queue_order = "fifo"`: the share
            answered inside the budget (the gateway's own count:
            `switchyard_route_answers_total` less
            `switchyard_route_budget_misses_total`, per route, over the
            requests sent).

The gateway runs on `--server-cpus` and the load generators on
`--client-cpus` (taskset), like floor_bench.sh. Each figure is the median
over the rounds; the per-round figures are in the JSON (`--json-out`).

    .venv/bin/python benchmarks/tenants_bench.py [--bin target/release/switchyard]
        [--loadgen target/release/loadgen] [--seconds 6] [--rounds 2]
        [--rows 4] [--queue 16] [--max-batch 8] [--b-budget-ms 250] [--short-ms 25]
        [--server-cpus 1] [--client-cpus 0] [--json-out FILE]
        [--scenarios noisy,priority,mixed] [--variants off,preempt,reserve]

Needs models/synth-heavy.onnx and release builds of switchyard and the
loadgen (`cargo build --release -p switchyard -p switchyard-benchmarks`).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
KEY_A = "key-of-tenant-a-0123456789"
KEY_B = "key-of-tenant-b-0123456789"
LONG_MS = 500
# The priority scenario's variants: result key, route (= model), name.
VARIANTS = {
    "off": ("priority", "prio", "preempt off, no reserved session"),
    "preempt": ("priority-preempt", "prio-preempt", "preempt on"),
    "reserve": ("priority-reserve", "prio-reserve", "reserve_top_class on"),
}


def config(rows: int, queue: int, max_batch: int) -> str:
    batching = f"{{ max_batch_size = {max_batch}, max_queue_delay_us = 500, queue_capacity = {queue} }}"
    fifo = batching[:-2] + ', queue_order = "fifo" }'
    preempt = batching[:-2] + ", preempt = true }"
    reserve = batching[:-2] + ", reserve_top_class = true }"
    model = ROOT / "models" / "synth-heavy.onnx"
    text = "[server]\nmax_concurrent_requests = 4096\n"
    for name, b in [("noisy", batching), ("noisy-unfair", batching), ("prio", batching),
                    ("prio-preempt", preempt), ("prio-reserve", reserve), ("edf", batching), ("fifo", fifo)]:
        text += f'\n[[models]]\nname = "{name}"\npath = "{model}"\nbatching = {b}\nwarmup = true\n'
    keys = f'keys = [{{ key = "{KEY_A}", tenant = "a" }}, {{ key = "{KEY_B}", tenant = "b" }}]'
    routes = [("fair", "noisy", f"auth = {{ {keys} }}"),
              ("unfair", "noisy-unfair", f"auth = {{ {keys}, fair_share = false }}"),
              ("prio", "prio", ""), ("prio-preempt", "prio-preempt", ""), ("prio-reserve", "prio-reserve", ""), ("edf-short", "edf", ""), ("edf-long", "edf", ""),
              ("fifo-short", "fifo", ""), ("fifo-long", "fifo", "")]
    for name, model_name, extra in routes:
        text += f'\n[[routes]]\nname = "{name}"\nmodels = ["{model_name}"]\ncache = {{ enabled = false }}\n{extra}\n'
    text += '\n[[tenants]]\nname = "a"\n[[tenants]]\nname = "b"\n'
    return text


def pinned(cpus, cmd):
    return ["taskset", "-c", cpus] + cmd if cpus else cmd


def start(args, folder: Path):
    (folder / "tenants.toml").write_text(config(args.rows, args.queue, args.max_batch or 2 * args.rows))
    ports = folder / "ports.json"
    cmd = pinned(args.server_cpus, [args.bin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                                    "--config", str(folder / "tenants.toml"), "--ports-file", str(ports)])
    log = open(folder / "gateway.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"},
                            cwd=ROOT)
    deadline = time.monotonic() + 180
    while not ports.exists() or not ports.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"the gateway did not start: {(folder / 'gateway.log').read_text()[-2000:]}")
        time.sleep(0.05)
    time.sleep(0.2)
    bound = json.loads(ports.read_text())
    return proc, "http://" + bound["listen"], "http://" + bound["admin_listen"]


class Load:
    """One loadgen process (pinned to the client CPUs) on `route`."""

    def __init__(self, args, base, route, folder, label, *, rate=None, concurrency=None, headers=()):
        self.out = folder / f"{label}.json"
        cmd = [args.loadgen, "--url", f"{base}/v2/models/{route}/infer", "--input-shape", f"X:{args.rows},64",
               "--distinct", "512", "--duration", f"{args.seconds}s", "--warmup", "1s", "--quiet",
               "--timeout", "10s", "--json-out", str(self.out), "--label", label]
        if rate is not None:
            cmd += ["--mode", "open", "--rate", f"{rate:.1f}", "--connections", "64"]
        else:
            cmd += ["--mode", "closed", "--concurrency", str(concurrency)]
        for h in headers:
            cmd += ["-H", h]
        self.proc = subprocess.Popen(pinned(args.client_cpus, cmd), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=ROOT)

    def result(self):
        _, err = self.proc.communicate(timeout=600)
        if self.proc.returncode != 0:
            sys.exit(f"loadgen failed: {err.decode()[-2000:]}")
        r = json.loads(self.out.read_text())
        sent = max(r["requests"], 1)
        return {"requests": r["requests"], "ok": r["ok"], "answered_share": r["ok"] / sent,
                "rejected_429": r["errors"].get("429", 0), "errors": r["errors"],
                "timeouts": r["timeouts"], "p50_ms": r["latency_us"]["p50"] / 1e3,
                "p99_ms": r["latency_us"]["p99"] / 1e3, "achieved_rate": (r.get("schedule") or {}).get("achieved_rate"),
                "behind": (r.get("schedule") or {}).get("behind")}


def run_together(loads):
    return [load.result() for load in loads]


def probe_retry_after(base, route, stop, seen):
    """Sends tenant A's requests one at a time until `stop`; counts the
    429s and those with Retry-After (and RateLimit-Policy)."""
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [1.0] * 64}]}
    with requests.Session() as s:
        while not stop.is_set():
            r = s.post(f"{base}/v2/models/{route}/infer", json=body, headers={"x-api-key": KEY_A}, timeout=10)
            if r.status_code == 429:
                seen["429"] += 1
                seen["retry_after"] += "retry-after" in r.headers
                seen["ratelimit_policy"] += "ratelimit-policy" in r.headers
            time.sleep(0.02)


def noisy(args, base, cap, folder, route):
    stop, seen = threading.Event(), {"429": 0, "retry_after": 0, "ratelimit_policy": 0}
    a = Load(args, base, route, folder, f"noisy-{route}-a", rate=5 * cap, headers=[f"x-api-key: {KEY_A}"])
    b = Load(args, base, route, folder, f"noisy-{route}-b", rate=0.2 * cap,
             headers=[f"x-api-key: {KEY_B}", f"x-latency-budget-ms: {args.b_budget_ms}"])
    probe = threading.Thread(target=probe_retry_after, args=(base, route, stop, seen), daemon=True)
    time.sleep(1.5)  # past the warm-up
    probe.start()
    ra, rb = run_together([a, b])
    stop.set()
    probe.join(15)
    return {"a": ra, "b": rb, "a_probe": seen, "b_p99_within_budget": rb["p99_ms"] <= args.b_budget_ms}


def class_stats(admin):
    return requests.get(f"{admin}/admin/stats", timeout=10).json()["priority"]


def pool_counters(admin, model):
    """The cpu pool's counters of `model` in `/admin/stats`."""
    for m in requests.get(f"{admin}/admin/stats", timeout=10).json()["models"]:
        if m["name"] == model:
            return next(p for p in m["pools"] if p["name"] == "cpu")
    raise KeyError(model)


def priority(args, base, admin, cap, folder, route="prio"):
    """Scenario (b) on `route` (its model has the same name)."""
    alone = Load(args, base, route, folder, f"{route}-high-alone", rate=0.5 * cap, headers=["x-priority: 1"]).result()
    before, pool_before = class_stats(admin), pool_counters(admin, route)
    high = Load(args, base, route, folder, f"{route}-high", rate=0.5 * cap, headers=["x-priority: 1"])
    low = Load(args, base, route, folder, f"{route}-low", rate=1.5 * cap, headers=["x-priority: 4"])
    rh, rl = run_together([high, low])
    after, pool_after = class_stats(admin), pool_counters(admin, route)
    delta = {c: {k: after[c][k] - before[c][k] for k in after[c]} for c in ("1", "4")}
    pool = {k: pool_after[k] - pool_before[k]
            for k in ("preemptions", "reserved_batches", "executions", "executed_rows")}
    shed = lambda r: (r["requests"] - r["ok"]) / max(r["requests"], 1)  # noqa: E731
    # Answered rows per second of both classes together over the load
    # (loadgen counts the requests started in its window).
    rows_per_s = (rh["ok"] + rl["ok"]) * args.rows / args.seconds
    return {"high_alone": alone, "high": rh, "low": rl, "server_counts": delta, "pool": pool,
            "high_p99_ratio": rh["p99_ms"] / max(alone["p99_ms"], 1e-9),
            "high_shed_share": shed(rh), "low_shed_share": shed(rl), "answered_rows_per_s": rows_per_s}


def route_total(admin, name, route):
    """The sum of `name`'s series for `route` (every endpoint and status)."""
    text = requests.get(f"{admin}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(rf'^{name}{{[^}}]*route="{re.escape(route)}"[^}}]*}} (\S+)$', text, re.M))


def mixed(args, base, admin, cap, folder, order):
    """The gateway's own counts over the whole load (warm-up included):
    requests, answers, answers after the budget."""
    names = ("switchyard_requests_total", "switchyard_route_answers_total", "switchyard_route_budget_misses_total")
    routes = (f"{order}-short", f"{order}-long")
    before = {r: [route_total(admin, n, r) for n in names] for r in routes}
    short = Load(args, base, routes[0], folder, f"mixed-{order}-short", rate=0.75 * cap,
                 headers=[f"x-latency-budget-ms: {args.short_ms}"])
    long = Load(args, base, routes[1], folder, f"mixed-{order}-long", rate=0.75 * cap,
                headers=[f"x-latency-budget-ms: {LONG_MS}"])
    loads = dict(zip(routes, run_together([short, long])))
    out = {}
    for r in routes:
        sent, answers, misses = (route_total(admin, n, r) - b for n, b in zip(names, before[r]))
        out[r.split("-")[1]] = {**loads[r], "gateway_requests": sent, "answers": answers, "budget_misses": misses,
                                "inside_budget_share": (answers - misses) / max(sent, 1)}
    sent = sum(out[k]["gateway_requests"] for k in ("short", "long"))
    inside = sum(out[k]["answers"] - out[k]["budget_misses"] for k in ("short", "long"))
    out["inside_budget_share"] = inside / max(sent, 1)
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "target/release/switchyard"))
    ap.add_argument("--loadgen", default=str(ROOT / "target/release/loadgen"))
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", type=int, default=4, help="rows per request")
    ap.add_argument("--queue", type=int, default=16, help="queue_capacity of each model")
    ap.add_argument("--max-batch", type=int, default=None, help="max_batch_size of each model (default 2 x rows)")
    ap.add_argument("--b-budget-ms", type=int, default=250)
    ap.add_argument("--short-ms", type=int, default=25)
    ap.add_argument("--server-cpus", default="1")
    ap.add_argument("--client-cpus", default="0")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--scenarios", default="noisy,priority,mixed",
                    help="comma-separated scenarios to run each round")
    ap.add_argument("--variants", default="off,preempt,reserve",
                    help="priority scenario's models, comma-separated: " + ", ".join(VARIANTS))
    args = ap.parse_args()
    args.scenarios = [x for x in args.scenarios.split(",") if x]
    args.variants = [x for x in args.variants.split(",") if x]
    if any(v not in VARIANTS for v in args.variants):
        ap.error(f"--variants: one of {', '.join(VARIANTS)}")
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        proc, base, admin = start(args, folder)
        try:
            # As many callers as the queue holds: the pool is never idle and
            # no request is refused (429s would spend the server's CPU).
            cap_run = Load(args, base, "prio", folder, "capacity", concurrency=args.queue).result()
            cap = cap_run["ok"] / args.seconds
            print(f"capacity: {cap:.0f} answered req/s ({args.rows} rows each), p99 {cap_run['p99_ms']:.1f} ms",
                  flush=True)
            for i in range(args.rounds):
                steps = args.scenarios
                one = {}
                for step in steps if i % 2 == 0 else steps[::-1]:
                    if step == "noisy":
                        one["fair"] = noisy(args, base, cap, folder, "fair")
                        one["unfair"] = noisy(args, base, cap, folder, "unfair")
                    elif step == "priority":
                        for v in args.variants if i % 2 == 0 else args.variants[::-1]:
                            key, route, _ = VARIANTS[v]
                            one[key] = priority(args, base, admin, cap, folder, route)
                    else:
                        one["edf"] = mixed(args, base, admin, cap, folder, "edf")
                        one["fifo"] = mixed(args, base, admin, cap, folder, "fifo")
                    print(f"round {i + 1}: {step} done", flush=True)
                rounds.append(one)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    report = {"binary": args.bin, "capacity_rps": cap, "capacity_run": cap_run, "args": vars(args), "rounds": rounds}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1))
    summarize(args, cap, rounds)


def summarize(args, cap, rounds):
    m = lambda f: median([f(r) for r in rounds])  # noqa: E731
    print(f"\nbinary {args.bin}; server cpus {args.server_cpus}, clients {args.client_cpus}; "
          f"{args.rounds} rounds of {args.seconds} s; capacity {cap:.0f} req/s; medians over rounds")
    if "noisy" in args.scenarios:
        print("\n(a) noisy neighbour: A at 5x capacity, B at 0.2x, B's budget", args.b_budget_ms, "ms")
        print("| fair share | B answered | B p99 ms | A answered | A 429 | A 429 with Retry-After (probe) |")
        print("|---|---|---|---|---|---|")
        for name in ("fair", "unfair"):
            print(f"| {'on' if name == 'fair' else 'off'} | {m(lambda r: r[name]['b']['answered_share']):.1%} "
                  f"| {m(lambda r: r[name]['b']['p99_ms']):.1f} | {m(lambda r: r[name]['a']['answered_share']):.1%} "
                  f"| {m(lambda r: r[name]['a']['rejected_429']):.0f} "
                  f"| {sum(r[name]['a_probe']['retry_after'] for r in rounds)}/"
                  f"{sum(r[name]['a_probe']['429'] for r in rounds)} |")
        print("B answered per round, fair share on / off: "
              f"{[(round(r['fair']['b']['answered_share'], 3), round(r['unfair']['b']['answered_share'], 3)) for r in rounds]}")
    if "priority" in args.scenarios:
        summarize_priority(rounds)
    if "mixed" in args.scenarios:
        print(f"\n(c) mixed budgets ({args.short_ms} ms / {LONG_MS} ms, 0.75x capacity each): "
              "share of the requests answered inside their budget (gateway counts)")
        print("| order | short | short answered | short p99 ms | long | long p99 ms | all |")
        print("|---|---|---|---|---|---|---|")
        for order in ("edf", "fifo"):
            print(f"| {'deadline' if order == 'edf' else 'fifo'} | {m(lambda r: r[order]['short']['inside_budget_share']):.1%} "
                  f"| {m(lambda r: r[order]['short']['answered_share']):.1%} "
                  f"| {m(lambda r: r[order]['short']['p99_ms']):.1f} | {m(lambda r: r[order]['long']['inside_budget_share']):.1%} "
                  f"| {m(lambda r: r[order]['long']['p99_ms']):.1f} | {m(lambda r: r[order]['inside_budget_share']):.1%} |")
        print(f"all inside, deadline / fifo per round: "
              f"{[(round(r['edf']['inside_budget_share'], 3), round(r['fifo']['inside_budget_share'], 3)) for r in rounds]}")


def summarize_priority(rounds):
    m = lambda f: median([f(r) for r in rounds if key in r])  # noqa: E731
    print("\n(b) priority: high 0.5x capacity alone, then with low 1.5x beside it")
    for key, route, name in VARIANTS.values():
        if not any(key in r for r in rounds):
            continue
        print(f"\n{name} (model {route})")
        print("| | high alone | high (2x overload) | low (2x overload) |")
        print("|---|---|---|---|")
        print(f"| p99 ms | {m(lambda r: r[key]['high_alone']['p99_ms']):.1f} "
              f"| {m(lambda r: r[key]['high']['p99_ms']):.1f} | {m(lambda r: r[key]['low']['p99_ms']):.1f} |")
        print(f"| shed (not answered) | {1 - m(lambda r: r[key]['high_alone']['answered_share']):.1%} "
              f"| {m(lambda r: r[key]['high_shed_share']):.1%} | {m(lambda r: r[key]['low_shed_share']):.1%} |")
        sc = lambda r, c, k: r[key]["server_counts"][c][k]  # noqa: E731
        print("gateway's class counts under overload (shed / admitted): "
              + ", ".join(f"class {c} {m(lambda r: sc(r, c, 'shed')):.0f} / {m(lambda r: sc(r, c, 'admitted')):.0f}"
                          for c in ("1", "4")))
        print(f"high p99 under overload / alone: {m(lambda r: r[key]['high_p99_ratio']):.2f}x (goal <= 1.5x); "
              f"per round {[round(r[key]['high_p99_ratio'], 2) for r in rounds if key in r]}")
        print(f"answered rows/s, both classes: {m(lambda r: r[key]['answered_rows_per_s']):.0f}; pool preemptions "
              f"{m(lambda r: r[key]['pool']['preemptions']):.0f}, reserved batches "
              f"{m(lambda r: r[key]['pool']['reserved_batches']):.0f}, executions {m(lambda r: r[key]['pool']['executions']):.0f}, "
              f"executed rows {m(lambda r: r[key]['pool']['executed_rows']):.0f} per run")


if __name__ == "__main__":
    main()
