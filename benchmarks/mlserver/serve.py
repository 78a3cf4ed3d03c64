#!/usr/bin/env python3
"""Starts MLServer over the project's ONNX models, for the benchmark suite.

Writes a model repository (one folder per model with model-settings.json
pointing at models/<name>.onnx) and a settings.json into --workdir, then
execs `mlserver start` there. Run it with the MLServer venv's Python:

  .venv-mlserver/bin/python benchmarks/mlserver/serve.py --models-dir models \
      --port 8200 --workdir benchmarks/out/mlserver [--max-batch-size 32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write_repository(args: argparse.Namespace) -> Path:
    work = Path(args.workdir).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copy(HERE / "onnx_runtime.py", work / "onnx_runtime.py")
    settings = {
        "host": "127.0.0.1",
        "http_port": args.port,
        "grpc_port": args.grpc_port,
        "metrics_port": args.metrics_port,
        "parallel_workers": args.workers,
        "debug": False,
        "load_models_at_startup": True,
    }
    (work / "settings.json").write_text(json.dumps(settings, indent=2))
    for onnx in sorted(Path(args.models_dir).resolve().glob("*.onnx")):
        if args.only and onnx.stem not in args.only:
            continue
        model_dir = work / onnx.stem
        model_dir.mkdir()
        model = {
            "name": onnx.stem,
            "implementation": "onnx_runtime.OnnxModel",
            "parameters": {"uri": str(onnx), "extra": {"intra_op_threads": args.intra_op_threads}},
        }
        if args.max_batch_size > 1:
            model["max_batch_size"] = args.max_batch_size
            model["max_batch_time"] = args.max_batch_time
        (model_dir / "model-settings.json").write_text(json.dumps(model, indent=2))
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models-dir", default="models")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, default=0, help="0 = port + 1")
    parser.add_argument("--metrics-port", type=int, default=0, help="0 = port + 2")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--workers", type=int, default=0,
                        help="MLServer parallel_workers (0 = inference in the server process)")
    parser.add_argument("--intra-op-threads", type=int, default=1)
    parser.add_argument("--max-batch-size", type=int, default=0, help="adaptive batching (0/1 = off)")
    parser.add_argument("--max-batch-time", type=float, default=0.0005, help="seconds")
    parser.add_argument("--only", nargs="*", help="model names to serve (default: all)")
    args = parser.parse_args()
    args.grpc_port = args.grpc_port or args.port + 1
    args.metrics_port = args.metrics_port or args.port + 2
    work = write_repository(args)
    mlserver = Path(sys.executable).with_name("mlserver")
    os.chdir(work)
    os.execv(str(mlserver), [str(mlserver), "start", str(work)])


if __name__ == "__main__":
    main()
