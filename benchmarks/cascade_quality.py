#!/usr/bin/env python3
"""Cascade quality benchmark (issue 5): the digits test split through a real
gateway, on three routes over the same two models:

- cheap-only: `fixed` on digits-cheap
- heavy-only: `fixed` on digits-heavy
- cascade:    digits-cheap, escalating to digits-heavy when the cheap top
              probability is below the threshold (default 0.8)

Reports accuracy, share escalated and compute spent, in heavy-model
equivalents: each model run costs its single-row onnxruntime latency
(measured here) divided by the heavy model's. Goal: the cascade reaches
>= 99.5% of the heavy model's accuracy while escalating <= 30%.

    .venv/bin/python benchmarks/cascade_quality.py [--bin target/debug/switchyard] [--threshold 0.8]
        [--sweep 0.5,0.6,0.7,0.9] [--json-out FILE]

--sweep adds one cascade route per threshold (accuracy vs share escalated,
the curve the benchmark suite plots); --json-out writes every figure as JSON.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import requests

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "models"

CONFIG = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
[[routes]]
name = "cheap-only"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "fixed", model = "digits-cheap" }}
[[routes]]
name = "heavy-only"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "fixed", model = "digits-heavy" }}
[[routes]]
name = "cascade"
models = ["digits-cheap", "digits-heavy"]
budget_ms = {{ default = 1000, max = 10000 }}
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = {threshold} }}
"""

SWEEP_ROUTE = """
[[routes]]
name = "{name}"
models = ["digits-cheap", "digits-heavy"]
budget_ms = {{ default = 1000, max = 10000 }}
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = {threshold} }}
"""


def sweep_name(threshold):
    return f"cascade-t{threshold:g}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gateway(binary, config_path):
    port, admin = free_port(), free_port()
    proc = subprocess.Popen(
        [binary, "serve", "--config", str(config_path), "--listen", f"127.0.0.1:{port}",
         "--admin-listen", f"127.0.0.1:{admin}"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if requests.get(f"{base}/v2/health/ready", timeout=1).status_code == 200:
                return proc, base
        except requests.RequestException:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit("gateway did not become ready")


def single_row_latency(name, x):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(MODELS / f"{name}.onnx"), opts)
    rows = [x[i : i + 1] for i in range(len(x))]
    for r in rows[:50]:
        sess.run(None, {"X": r})
    start = time.perf_counter()
    for r in rows:
        sess.run(None, {"X": r})
    return (time.perf_counter() - start) / len(rows)


def run_route(session, base, route, x):
    labels, models = [], []
    for row in x:
        body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row.tolist()}],
                "outputs": [{"name": "label"}]}
        r = session.post(f"{base}/v2/models/{route}/infer", json=body, timeout=30)
        r.raise_for_status()
        labels.append(r.json()["outputs"][0]["data"][0])
        models.append(r.headers["x-switchyard-model"])
    return np.asarray(labels), models


def main():
    # SIGTERM (the suite's stage timeout) unwinds, so the gateway is stopped.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("SWITCHYARD_BIN", str(REPO / "target/debug/switchyard")))
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--sweep", default="", help="more cascade thresholds, comma-separated")
    ap.add_argument("--json-out", help="write the figures as JSON to this file")
    args = ap.parse_args()
    sweep = [float(t) for t in args.sweep.split(",") if t.strip()]
    data = json.loads((MODELS / "digits-test.json").read_text())
    x, y = np.asarray(data["X"], np.float32), np.asarray(data["y"])
    cost_cheap = single_row_latency("digits-cheap", x) / single_row_latency("digits-heavy", x)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "cascade.toml"
        text = CONFIG.format(models=MODELS, threshold=args.threshold)
        text += "".join(SWEEP_ROUTE.format(name=sweep_name(t), threshold=t) for t in sweep)
        cfg.write_text(text)
        proc, base = start_gateway(args.bin, cfg)
        try:
            session = requests.Session()
            routes = ["cheap-only", "heavy-only", "cascade"] + [sweep_name(t) for t in sweep]
            results = {route: run_route(session, base, route, x) for route in routes}
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    heavy_acc = float((results["heavy-only"][0] == y).mean())
    print(f"digits test split: {len(y)} rows, one row per request; threshold {args.threshold}; "
          f"cheap model cost = {cost_cheap:.3f} heavy-equivalents (single-row onnxruntime latency ratio)")
    print(f"| route | accuracy | vs heavy | escalated | compute (heavy-equivalents per request) |")
    print(f"|---|---|---|---|---|")
    summary = {}
    for route, (labels, models) in results.items():
        acc = float((labels == y).mean())
        heavy_share = models.count("digits-heavy") / len(models)
        if route.startswith("cascade"):
            escalated, compute = heavy_share, cost_cheap + heavy_share
        elif route == "cheap-only":
            escalated, compute = 0.0, cost_cheap
        else:
            escalated, compute = 0.0, 1.0
        summary[route] = (acc, escalated, compute)
        if not route.startswith("cascade-t"):
            print(f"| {route} | {acc:.4f} | {acc / heavy_acc:.2%} | {escalated:.1%} | {compute:.3f} |")
    acc, escalated, _ = summary["cascade"]
    ok = acc >= 0.995 * heavy_acc and escalated <= 0.30
    print(f"goal (>= 99.5% of heavy accuracy, <= 30% escalated): {'met' if ok else 'NOT met'}")
    if args.json_out:
        doc = {
            "rows": len(y),
            "threshold": args.threshold,
            "cheap_cost_heavy_equivalents": cost_cheap,
            "routes": {r: {"accuracy": a, "escalated": e, "compute": c} for r, (a, e, c) in summary.items()
                       if not r.startswith("cascade-t")},
            "sweep": [{"threshold": t, "accuracy": summary[sweep_name(t)][0], "escalated": summary[sweep_name(t)][1],
                       "compute": summary[sweep_name(t)][2]} for t in sorted(set(sweep))]
            + [{"threshold": args.threshold, "accuracy": acc, "escalated": escalated,
                "compute": summary["cascade"][2]}],
            "goal": {"min_accuracy_vs_heavy": 0.995, "max_escalated": 0.30, "met": ok},
        }
        doc["sweep"].sort(key=lambda p: p["threshold"])
        Path(args.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
