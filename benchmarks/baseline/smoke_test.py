#!/usr/bin/env python3
"""Smoke test for the FastAPI baseline: start it on a free 127.0.0.1 port, send
one JSON request and one Triton-binary request per model, check that the
answers equal onnxruntime's own, check a few error cases, stop it by PID.

  python benchmarks/baseline/smoke_test.py [--models-dir models] [--workers 1]

Exit status 0 when everything matched. Needs the generated models
(python models/generate.py).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(base: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with status {proc.returncode}")
        try:
            if requests.get(f"{base}/v2/health/ready", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready after {timeout}s")


def binary_request(X: np.ndarray, binary_outputs: bool) -> tuple[bytes, dict[str, str]]:
    raw = np.ascontiguousarray(X, dtype="<f4").tobytes()
    header = {
        "id": "smoke-binary",
        "inputs": [
            {"name": "X", "datatype": "FP32", "shape": list(X.shape), "parameters": {"binary_data_size": len(raw)}}
        ],
        "outputs": [
            {"name": "label", "parameters": {"binary_data": binary_outputs}},
            {"name": "probabilities", "parameters": {"binary_data": binary_outputs}},
        ],
    }
    hb = json.dumps(header).encode()
    return hb + raw, {
        "Inference-Header-Content-Length": str(len(hb)),
        "Content-Type": "application/octet-stream",
    }


def parse_binary_response(resp: requests.Response) -> dict[str, np.ndarray]:
    n = int(resp.headers["Inference-Header-Content-Length"])
    doc = json.loads(resp.content[:n])
    out, off = {}, n
    for o in doc["outputs"]:
        dt = {"FP32": "<f4", "INT64": "<i8"}[o["datatype"]]
        size = o["parameters"]["binary_data_size"]
        out[o["name"]] = np.frombuffer(resp.content[off : off + size], dtype=dt).reshape(o["shape"])
        off += size
    assert off == len(resp.content), "trailing bytes in binary response"
    return out


def check(name: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> list[str]:
    errs = []
    for k, w in want.items():
        g = got.get(k)
        if g is None:
            errs.append(f"{name}: output {k} missing")
        elif g.dtype != w.dtype or g.shape != w.shape or not np.array_equal(g, w):
            errs.append(f"{name}: output {k} differs (got {g.dtype}{g.shape}, want {w.dtype}{w.shape})")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", type=Path, default=ROOT / "models")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()

    models = sorted(p.stem for p in args.models_dir.glob("*.onnx"))
    if not models:
        print(f"no models in {args.models_dir}: run python models/generate.py first", file=sys.stderr)
        return 2
    test = args.models_dir / "digits-test.npz"
    X = np.load(test)["X"][:4] if test.exists() else np.random.default_rng(0).uniform(0, 16, (4, 64))
    X = X.astype(np.float32)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        str(HERE / "fastapi_server.py"),
        "--models-dir",
        str(args.models_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(args.workers),
        "--intra-op-threads",
        "1",
    ]
    proc = subprocess.Popen(cmd)
    errs: list[str] = []
    try:
        wait_ready(base, proc)
        live = requests.get(f"{base}/v2/health/live", timeout=5)
        if live.status_code != 200:
            errs.append(f"/v2/health/live: {live.status_code}")
        for name in models:
            sess = ort.InferenceSession(str(args.models_dir / f"{name}.onnx"), providers=["CPUExecutionProvider"])
            lab, prob = sess.run(["label", "probabilities"], {"X": X})
            want = {"label": lab, "probabilities": prob}

            meta = requests.get(f"{base}/v2/models/{name}", timeout=5).json()
            if [i["name"] for i in meta["inputs"]] != ["X"] or meta["inputs"][0]["datatype"] != "FP32":
                errs.append(f"{name}: metadata {meta}")
            cfg = requests.get(f"{base}/v2/models/{name}/config", timeout=5).json()
            if cfg["input"][0]["data_type"] != "TYPE_FP32":
                errs.append(f"{name}: config {cfg}")

            # JSON tensors
            body = {
                "id": "smoke-json",
                "inputs": [{"name": "X", "datatype": "FP32", "shape": list(X.shape), "data": X.ravel().tolist()}],
            }
            r = requests.post(f"{base}/v2/models/{name}/infer", json=body, timeout=30)
            if r.status_code != 200:
                errs.append(f"{name}: JSON infer {r.status_code} {r.text[:200]}")
                continue
            doc = r.json()
            if doc.get("model_name") != name or doc.get("id") != "smoke-json":
                errs.append(f"{name}: model_name/id {doc.get('model_name')}/{doc.get('id')}")
            got = {
                o["name"]: np.asarray(o["data"], dtype={"FP32": np.float32, "INT64": np.int64}[o["datatype"]]).reshape(
                    o["shape"]
                )
                for o in doc["outputs"]
            }
            errs += check(f"{name} (JSON)", got, want)

            # Triton binary tensors in and out
            data, headers = binary_request(X, binary_outputs=True)
            r = requests.post(f"{base}/v2/models/{name}/infer", data=data, headers=headers, timeout=30)
            if r.status_code != 200:
                errs.append(f"{name}: binary infer {r.status_code} {r.text[:200]}")
                continue
            errs += check(f"{name} (binary)", parse_binary_response(r), want)
            print(f"ok  {name}: JSON and binary answers equal onnxruntime's ({len(X)} rows)")

        # error cases
        name = models[0]
        cases = [
            ("unknown model", "/v2/models/no-such-model/infer", {"inputs": []}, 404),
            ("bad shape", f"/v2/models/{name}/infer", {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}, 400),
            ("bad datatype", f"/v2/models/{name}/infer", {"inputs": [{"name": "X", "datatype": "INT64", "shape": [1, 64], "data": [0] * 64}]}, 400),
            ("wrong count", f"/v2/models/{name}/infer", {"inputs": [{"name": "X", "datatype": "FP32", "shape": [2, 64], "data": [0.0] * 64}]}, 400),
        ]
        for what, path, body, status in cases:
            r = requests.post(base + path, json=body, timeout=10)
            if r.status_code != status or "error" not in r.json():
                errs.append(f"{what}: got {r.status_code} {r.text[:200]}, want {status} with an error")
        r = requests.post(f"{base}/v2/models/{name}/infer", data=b"{not json", timeout=10)
        if r.status_code != 400:
            errs.append(f"malformed JSON: got {r.status_code}")
        print("ok  error cases answer 404/400 with an 'error' message")
    finally:
        proc.send_signal(signal.SIGTERM)  # our own child, by PID
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    if errs:
        print("FAILED:\n  " + "\n  ".join(errs), file=sys.stderr)
        return 1
    print(f"smoke test passed ({len(models)} models, {args.workers} worker(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
