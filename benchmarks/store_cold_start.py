#!/usr/bin/env python3
"""Cold start from the model store: a gateway whose only models are a
Triton-layout repository in a real S3-compatible server (moto, on a free
loopback port) is started, and the time from process start to its first
answer is measured, with an empty disk cache (the model is pulled from the
store) and with a warm one (the same cache folder, the store still up).
Then download throughput: the same object (MiniLM-L6's model.onnx, 90 MB)
pulled by Switchyard's store (`store-pull`, ranged GETs into an empty
cache) and by boto3's own `download_file` (its default transfer manager,
also ranged and threaded; a new client each time, so neither side starts
with open connections), alternating, from the same server.

    benchmarks/store_cold_start.py [--bin target/release/switchyard] [--runs 3] [--json-out FILE]

Models: digits-cheap and MiniLM-L6 (token ids in, as its Triton config
declares), one repository per model so each start pulls only that model.
Prints a JSON summary (min / median / max, ms). Needs `scripts/setup.sh
test` (moto, boto3) and the generated models.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "gateway" / "tests" / "python"))
from test_model_store import Moto  # noqa: E402  (the tests' moto harness)

FIRST_REQUEST = {
    "digits-cheap": {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]},
    "minilm-l6": {"inputs": [
        {"name": n, "shape": [1, 8], "datatype": "INT64", "data": v}
        for n, v in (("input_ids", [101, 2023, 2003, 1037, 3231, 6251, 1012, 102]),
                     ("attention_mask", [1] * 8), ("token_type_ids", [0] * 8))
    ]},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_answer(binary, config, model, env):
    """Process start -> first 200 answer, in ms."""
    port, admin = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    proc = subprocess.Popen([binary, "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}",
                             "--admin-listen", f"127.0.0.1:{admin}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        session = requests.Session()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{model}: the gateway exited with {proc.returncode}")
            if time.monotonic() - started > 120:
                raise RuntimeError(f"{model}: no answer after 120 s")
            try:
                if session.get(f"{base}/v2/health/ready", timeout=1).status_code == 200:
                    r = session.post(f"{base}/v2/models/{model}/infer", json=FIRST_REQUEST[model], timeout=30)
                    if r.status_code == 200:
                        return (time.monotonic() - started) * 1000
                    raise RuntimeError(f"{model}: {r.status_code} {r.text[:200]}")
            except requests.ConnectionError:
                pass
            time.sleep(0.005)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def download_throughput(pull_bin, store, runs, tmp):
    """MB/s of store-pull and of boto3 on the same object, alternating."""
    key = "repo-minilm-l6/minilm-l6/1/model.onnx"
    env = {**os.environ, **store.env(), "RUST_LOG": "warn"}
    ours, boto = [], []
    for run in range(runs):
        out = subprocess.run([pull_bin, "--uri", "s3://models/repo-minilm-l6", "--endpoint", store.endpoint,
                              "--model", "minilm-l6", "--version", "1", "--cache-dir", str(tmp / f"pull-{run}")],
                             env=env, capture_output=True, text=True, check=True)
        ours.append(json.loads(out.stdout)["mb_per_s"])
        target = tmp / f"boto3-{run}.onnx"
        # A new client, as store-pull is a new process: neither starts with
        # open connections (a warm boto3 pool skips the connection set-up).
        client = boto3.client("s3", endpoint_url=store.endpoint, region_name="us-east-1",
                              aws_access_key_id=store.key_id, aws_secret_access_key=store.secret)
        started = time.monotonic()
        client.download_file("models", key, str(target))
        boto.append(target.stat().st_size / 1e6 / (time.monotonic() - started))
        target.unlink()
    return {"object": f"s3://models/{key}", "switchyard_mb_per_s": summary(ours), "boto3_mb_per_s": summary(boto),
            "ratio_median": round(statistics.median(ours) / statistics.median(boto), 2)}


def summary(values):
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1),
            "max": round(max(values), 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / "target" / "release" / "switchyard"))
    parser.add_argument("--pull-bin", default=str(ROOT / "target" / "release" / "store-pull"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("ORT_DYLIB_PATH", str(ROOT / ".cache" / "onnxruntime" / "libonnxruntime.so.1.31.1"))
    store = Moto()
    out = {"binary": args.bin, "runs": args.runs, "models": {}}
    try:
        env = {**os.environ, **store.env(), "RUST_LOG": "warn"}
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            for model in FIRST_REQUEST:
                store.upload_repo(tmp / f"repo-{model}", model, 1, prefix=f"repo-{model}")
                empty, warm = [], []
                for run in range(args.runs):
                    cache = tmp / f"cache-{model}-{run}"
                    config = tmp / f"{model}-{run}.toml"
                    config.write_text(f'[repository]\nuri = "s3://models/repo-{model}"\n'
                                      f'endpoint = "{store.endpoint}"\ncache_dir = "{cache}"\n')
                    empty.append(first_answer(args.bin, config, model, env))
                    warm.append(first_answer(args.bin, config, model, env))
                size = (ROOT / "models" / f"{model}.onnx").stat().st_size
                out["models"][model] = {"model_bytes": size, "empty_cache_ms": summary(empty),
                                        "warm_cache_ms": summary(warm)}
            out["download"] = download_throughput(args.pull_bin, store, args.runs, tmp)
    finally:
        store.stop()
    text = json.dumps(out, indent=2)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
