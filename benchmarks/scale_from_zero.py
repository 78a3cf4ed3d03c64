#!/usr/bin/env python3
"""Scale from zero: how long a runtime replica that is not running takes to
answer its first request, as an activator (Knative's, or a harness) sees it
when it starts the replica on demand. Per run: spawn `switchyard serve` with
one model (warm-up on), poll `/v2/health/ready` every 5 ms, send the first
infer; report process start -> ready and process start -> first answer.

    benchmarks/scale_from_zero.py [--bin target/release/switchyard] [--runs 5]

Prints a JSON summary (min / median / max per model, in ms). The OS page
cache is warm after the first run (the model files stay in memory), as on
a node that ran the replica before; run 1 is reported on its own too.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"

CONFIGS = {
    "digits-heavy": ("""
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true
""", {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}),
    "minilm-l6": ("""
[[models]]
name = "minilm-l6"
path = "{models}/minilm-l6.onnx"
tokenizer = {{ path = "{models}/minilm-tokenizer.json", max_length = 128 }}
warmup = true
""", {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES",
                  "data": ["the first request after a scale from zero"]}]}),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(binary, model, workdir):
    text, body = CONFIGS[model]
    config = workdir / f"{model}.toml"
    config.write_text(text.format(models=MODELS))
    port, admin = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "RUST_LOG": "warn"}
    started = time.monotonic()
    proc = subprocess.Popen([binary, "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}",
                             "--admin-listen", f"127.0.0.1:{admin}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        session = requests.Session()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{model}: the replica exited with {proc.returncode}")
            if time.monotonic() - started > 60:
                raise RuntimeError(f"{model}: not ready after 60 s")
            try:
                if session.get(f"{base}/v2/health/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.005)
        ready = time.monotonic()
        r = session.post(f"{base}/v2/models/{model}/infer", json=body, timeout=30)
        answered = time.monotonic()
        if r.status_code != 200:
            raise RuntimeError(f"{model}: first answer {r.status_code} {r.text[:200]}")
        return (ready - started) * 1000, (answered - started) * 1000
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def summary(values):
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1),
            "max": round(max(values), 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / "target" / "release" / "switchyard"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("ORT_DYLIB_PATH", str(ROOT / ".cache" / "onnxruntime" / "libonnxruntime.so.1.31.1"))
    out = {"binary": args.bin, "runs": args.runs, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for model in CONFIGS:
            runs = [one_run(args.bin, model, Path(tmp)) for _ in range(args.runs)]
            out["models"][model] = {
                "start_to_ready_ms": summary([r[0] for r in runs]),
                "start_to_first_answer_ms": summary([r[1] for r in runs]),
                "first_run_start_to_first_answer_ms": round(runs[0][1], 1),
            }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
