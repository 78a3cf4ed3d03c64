#!/usr/bin/env python3
"""Writes a Triton-layout model repository from the generated models.

    <out>/<model>/config.pbtxt
    <out>/<model>/<version>/model.onnx

Models: digits-cheap and digits-heavy (models/generate.py) and minilm-l6
(models/text_models.py), each with a config.pbtxt as a Triton user would
write it (platform, max_batch_size, input/output, dynamic_batching,
instance_group, parameters). The output is deterministic: the model bytes
are copied unchanged and the configs are fixed text.

    python models/triton_repo.py --out DIR                  # all three, version 1
    python models/triton_repo.py --out DIR --models digits-cheap --version 2
    python models/triton_repo.py --out DIR --checksums      # also <file>.sha256 objects

Only the standard library is used, so any Python 3 runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Tensors, as Triton declares them with max_batch_size > 0 (no batch dimension).
DIGITS_IO = """input [
  {
    name: "X"
    data_type: TYPE_FP32
    dims: [ 64 ]
  }
]
output [
  {
    name: "label"
    data_type: TYPE_INT64
    dims: [ 1 ]
    reshape: { shape: [ ] }
  },
  {
    name: "probabilities"
    data_type: TYPE_FP32
    dims: [ 10 ]
  }
]
"""

MINILM_IO = """input [
  { name: "input_ids", data_type: TYPE_INT64, dims: [ -1 ] },
  { name: "attention_mask", data_type: TYPE_INT64, dims: [ -1 ] },
  { name: "token_type_ids", data_type: TYPE_INT64, dims: [ -1 ] }
]
output [
  { name: "embedding", data_type: TYPE_FP32, dims: [ 384 ] }
]
"""

# name -> (source file in models/, config.pbtxt body after name/platform)
MODELS: dict[str, tuple[str, str]] = {
    "digits-cheap": (
        "digits-cheap.onnx",
        'max_batch_size: 64\n'
        + DIGITS_IO
        + "dynamic_batching {\n  max_queue_delay_microseconds: 200\n}\n"
        + "instance_group [ { kind: KIND_CPU, count: 1 } ]\n"
        + 'parameters { key: "intra_op_thread_count" value: { string_value: "1" } }\n',
    ),
    "digits-heavy": (
        "digits-heavy.onnx",
        "max_batch_size: 64\n"
        + DIGITS_IO
        + "dynamic_batching {\n  preferred_batch_size: [ 32 ]\n  max_queue_delay_microseconds: 300\n}\n"
        + "instance_group [\n  {\n    kind: KIND_CPU\n    count: 2\n  }\n]\n",
    ),
    "minilm-l6": (
        "minilm-l6.onnx",
        "max_batch_size: 32\n"
        + MINILM_IO
        + "dynamic_batching {\n  max_queue_delay_microseconds: 1000\n"
        + "  default_queue_policy { max_queue_size: 256 }\n}\n"
        + "instance_group [ { kind: KIND_CPU, count: 2 } ]\n"
        + 'parameters { key: "intra_op_thread_count" value: { string_value: "1" } }\n',
    ),
}


def config_text(name: str, body: str) -> str:
    return f'# Written by models/triton_repo.py\nname: "{name}"\nplatform: "onnxruntime_onnx"\n{body}'


def write_model(out: Path, name: str, version: int, checksums: bool, source_dir: Path) -> Path:
    source, body = MODELS[name]
    src = source_dir / source
    if not src.is_file():
        raise SystemExit(
            f"{src} is missing: run models/generate.py (digits) or models/text_models.py (minilm) first"
        )
    model_dir = out / name
    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(config_text(name, body))
    dest = version_dir / "model.onnx"
    shutil.copyfile(src, dest)
    if checksums:
        digest = hashlib.sha256(dest.read_bytes()).hexdigest()
        (version_dir / "model.onnx.sha256").write_text(f"{digest}  model.onnx\n")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="repository folder to write (created)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {', '.join(MODELS)}")
    ap.add_argument("--version", type=int, default=1, help="version folder to write (default 1)")
    ap.add_argument("--checksums", action="store_true", help="also write <file>.sha256 checksum objects")
    ap.add_argument("--source", type=Path, default=HERE, help="folder with the generated models (default: models/)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or args.version < 1:
        ap.error(f"unknown models {unknown}" if unknown else "--version must be at least 1")
    for name in names:
        dest = write_model(args.out, name, args.version, args.checksums, args.source)
        print(f"[triton_repo] {dest.relative_to(args.out)} ({dest.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
