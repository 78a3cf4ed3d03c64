#!/usr/bin/env python3
"""The usual Python model server: FastAPI + uvicorn + onnxruntime.

This is the baseline Switchyard is compared with: what a competent team writes
in an afternoon. It serves every `*.onnx` file in --models-dir under the Open
Inference Protocol (KServe V2) REST API:

  GET  /v2                                   server metadata
  GET  /v2/health/live, /v2/health/ready     200 when up
  GET  /v2/models/{m}[/versions/{v}]         model metadata (inputs/outputs)
  GET  /v2/models/{m}[/versions/{v}]/ready   200 / 404
  GET  /v2/models/{m}[/versions/{v}]/config  Triton-style config (for perf_analyzer)
  POST /v2/models/{m}[/versions/{v}]/infer   JSON tensors, or Triton binary tensors
                                             (Inference-Header-Content-Length)

Text models (a graph taking input_ids/attention_mask, e.g. models/minilm-*.onnx)
take one BYTES input `text` instead, tokenised with the `tokenizers` package and
--text-tokenizer (default: minilm-tokenizer.json in --models-dir); see
text_model.py.

One onnxruntime InferenceSession per model per worker process. There is no
cross-request batching and no cache: each request runs its own session call,
in the threadpool (onnxruntime releases the GIL, so concurrent requests use
several cores) or, with --run-mode inline, directly on the event loop.

  python benchmarks/baseline/fastapi_server.py --models-dir models --port 8100 \
      --workers 2 --intra-op-threads 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

sys.path.insert(0, str(Path(__file__).resolve().parent))
import text_model  # noqa: E402

ENV = "SWITCHYARD_BASELINE_"  # settings reach uvicorn's worker processes through the environment
SERVER_NAME = "fastapi-onnxruntime-baseline"
SERVER_VERSION = "1"

log = logging.getLogger("baseline")

# KServe V2 datatype <-> numpy
V2_TO_NP: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
}
NP_TO_V2 = {v: k for k, v in V2_TO_NP.items()}
# onnxruntime type strings -> V2
ORT_TO_V2 = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
}


class BadRequest(Exception):
    pass


def _dims(shape) -> list[int]:
    return [d if isinstance(d, int) and d >= 0 else -1 for d in shape]


class Model:
    def __init__(self, name: str, path: Path, intra_op_threads: int) -> None:
        so = ort.SessionOptions()
        so.intra_op_num_threads = intra_op_threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.name = name
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.inputs = {i.name: (ORT_TO_V2.get(i.type, i.type), _dims(i.shape)) for i in self.session.get_inputs()}
        self.outputs = {o.name: (ORT_TO_V2.get(o.type, o.type), _dims(o.shape)) for o in self.session.get_outputs()}
        self.output_names = list(self.outputs)

    def metadata(self) -> dict[str, Any]:
        def t(name, dt, shape):
            return {"name": name, "datatype": dt, "shape": shape}

        return {
            "name": self.name,
            "versions": ["1"],
            "platform": "onnxruntime_onnx",
            "inputs": [t(n, dt, s) for n, (dt, s) in self.inputs.items()],
            "outputs": [t(n, dt, s) for n, (dt, s) in self.outputs.items()],
        }

    def config(self, max_batch_size: int) -> dict[str, Any]:
        # Triton's model config as JSON. With max_batch_size 0 the dims are the full
        # shapes (batch dimension included, -1 = dynamic), as Triton does for a model
        # without batching; with max_batch_size > 0 the leading batch dimension is left out.
        def t(name, dt, shape):
            dims = shape[1:] if max_batch_size > 0 else shape
            return {"name": name, "data_type": "TYPE_" + dt, "dims": dims}

        return {
            "name": self.name,
            "platform": "onnxruntime_onnx",
            "backend": "onnxruntime",
            "max_batch_size": max_batch_size,
            "input": [t(n, dt, s) for n, (dt, s) in self.inputs.items()],
            "output": [t(n, dt, s) for n, (dt, s) in self.outputs.items()],
            "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        }


# ------------------------------------------------------------------- protocol


def decode_request(body: bytes, header_len: str | None, model: Model):
    """-> (request id, feeds, [(output name, binary?)] or None, binary_output default)."""
    try:
        if header_len is not None:
            n = int(header_len)
            if n < 0 or n > len(body):
                raise BadRequest(f"Inference-Header-Content-Length {n} is outside the body ({len(body)} bytes)")
            req = json.loads(body[:n])
            binary = memoryview(body)[n:]
        else:
            req = json.loads(body)
            binary = memoryview(b"")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"malformed JSON request: {e}") from None
    if not isinstance(req, dict) or not isinstance(req.get("inputs"), list):
        raise BadRequest("request must be a JSON object with an 'inputs' list")

    feeds: dict[str, np.ndarray] = {}
    offset = 0
    for inp in req["inputs"]:
        if not isinstance(inp, dict):
            raise BadRequest("each input must be an object")
        name, dt, shape = inp.get("name"), inp.get("datatype"), inp.get("shape")
        if name not in model.inputs:
            raise BadRequest(f"unexpected input '{name}' for model '{model.name}'")
        want_dt, want_shape = model.inputs[name]
        if dt != want_dt:
            raise BadRequest(f"input '{name}': datatype {dt}, model expects {want_dt}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise BadRequest(f"input '{name}': shape must be a list of non-negative integers")
        if len(shape) != len(want_shape) or any(w != -1 and w != d for w, d in zip(want_shape, shape)):
            raise BadRequest(f"input '{name}': shape {shape} does not match the model's {want_shape}")
        npdt = V2_TO_NP[dt]
        count = int(np.prod(shape, dtype=np.int64))
        params = inp.get("parameters") or {}
        if "binary_data_size" in params:
            size = int(params["binary_data_size"])
            if size != count * npdt.itemsize:
                raise BadRequest(f"input '{name}': binary_data_size {size} != {count} x {npdt.itemsize} bytes")
            if offset + size > len(binary):
                raise BadRequest(f"input '{name}': binary data runs past the end of the body")
            arr = np.frombuffer(binary[offset : offset + size], dtype=npdt.newbyteorder("<")).astype(npdt, copy=False)
            offset += size
        else:
            data = inp.get("data")
            if data is None:
                raise BadRequest(f"input '{name}': no 'data' and no binary_data_size")
            try:
                arr = np.asarray(data, dtype=npdt)
            except (ValueError, TypeError) as e:
                raise BadRequest(f"input '{name}': bad data: {e}") from None
            if arr.size != count:
                raise BadRequest(f"input '{name}': {arr.size} values for shape {shape}")
        feeds[name] = arr.reshape(shape)
    missing = set(model.inputs) - set(feeds)
    if missing:
        raise BadRequest(f"missing inputs: {sorted(missing)}")

    rparams = req.get("parameters") or {}
    binary_default = bool(rparams.get("binary_data_output", False))
    outputs = None
    if req.get("outputs"):
        outputs = []
        for o in req["outputs"]:
            oname = o.get("name") if isinstance(o, dict) else None
            if oname not in model.outputs:
                raise BadRequest(f"unknown output '{oname}' for model '{model.name}'")
            ob = (o.get("parameters") or {}).get("binary_data", binary_default)
            outputs.append((oname, bool(ob)))
    return req.get("id"), feeds, outputs, binary_default


def encode_response(model: Model, req_id, names_binary: list[tuple[str, bool]], results: list[np.ndarray]) -> Response:
    outs = []
    chunks: list[bytes] = []
    for (name, as_binary), arr in zip(names_binary, results):
        arr = np.asarray(arr)
        o: dict[str, Any] = {"name": name, "datatype": NP_TO_V2[arr.dtype], "shape": list(arr.shape)}
        if as_binary:
            raw = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
            o["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            o["data"] = arr.ravel().tolist()
        outs.append(o)
    doc: dict[str, Any] = {"model_name": model.name, "model_version": "1", "outputs": outs}
    if req_id is not None:
        doc["id"] = req_id
    header = json.dumps(doc, separators=(",", ":")).encode()
    if not chunks:
        return Response(content=header, media_type="application/json")
    return Response(
        content=header + b"".join(chunks),
        media_type="application/octet-stream",
        headers={"Inference-Header-Content-Length": str(len(header))},
    )


def error(status: int, msg: str) -> Response:
    return Response(content=json.dumps({"error": msg}), status_code=status, media_type="application/json")


# ------------------------------------------------------------------------ app


def create_app() -> FastAPI:
    models_dir = Path(os.environ.get(ENV + "MODELS_DIR", "models"))
    threads = int(os.environ.get(ENV + "INTRA_OP_THREADS", "1"))
    inline = os.environ.get(ENV + "RUN_MODE", "threadpool") == "inline"
    max_batch_size = int(os.environ.get(ENV + "MAX_BATCH_SIZE", "0"))
    only = [m for m in os.environ.get(ENV + "MODELS", "").split(",") if m]
    tokenizer_path = os.environ.get(ENV + "TEXT_TOKENIZER") or str(models_dir / "minilm-tokenizer.json")
    max_length = int(os.environ.get(ENV + "TEXT_MAX_LENGTH", "128"))

    models: dict[str, Model] = {}
    for path in sorted(models_dir.glob("*.onnx")):
        if only and path.stem not in only:
            continue
        model = Model(path.stem, path, threads)
        if text_model.is_text_model(model.inputs) and Path(tokenizer_path).is_file():
            model = text_model.TextModel(model, text_model.load_tokenizer(tokenizer_path, max_length))
        models[path.stem] = model
    if not models:
        raise SystemExit(f"no .onnx models found in {models_dir}")
    log.info(
        "pid %d loaded %s from %s (intra-op threads %d, run mode %s, uvloop %s, httptools %s)",
        os.getpid(),
        ", ".join(models),
        models_dir,
        threads,
        "inline" if inline else "threadpool",
        "yes" if importlib.util.find_spec("uvloop") else "no",
        "yes" if importlib.util.find_spec("httptools") else "no",
    )

    app = FastAPI(title=SERVER_NAME, openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/v2")
    async def server_metadata():
        return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": ["binary_tensor_data"]}

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    async def health():
        return Response(status_code=200)

    def lookup(model_name: str, version: str | None) -> Model | None:
        m = models.get(model_name)
        if m is None or (version is not None and version not in ("", "1")):
            return None
        return m

    @app.get("/v2/models/{model_name}")
    @app.get("/v2/models/{model_name}/versions/{version}")
    async def model_metadata(model_name: str, version: str | None = None):
        m = lookup(model_name, version)
        return m.metadata() if m else error(404, f"unknown model '{model_name}'")

    @app.get("/v2/models/{model_name}/ready")
    @app.get("/v2/models/{model_name}/versions/{version}/ready")
    async def model_ready(model_name: str, version: str | None = None):
        m = lookup(model_name, version)
        return Response(status_code=200) if m else error(404, f"unknown model '{model_name}'")

    @app.get("/v2/models/{model_name}/config")
    @app.get("/v2/models/{model_name}/versions/{version}/config")
    async def model_config(model_name: str, version: str | None = None):
        m = lookup(model_name, version)
        return m.config(max_batch_size) if m else error(404, f"unknown model '{model_name}'")

    @app.post("/v2/models/{model_name}/infer")
    @app.post("/v2/models/{model_name}/versions/{version}/infer")
    async def infer(model_name: str, request: Request, version: str | None = None):
        m = lookup(model_name, version)
        if m is None:
            return error(404, f"unknown model '{model_name}'")
        body = await request.body()
        if isinstance(m, text_model.TextModel):
            return await infer_text(m, body, request.headers.get("inference-header-content-length"))
        try:
            req_id, feeds, outputs, binary_default = decode_request(
                body, request.headers.get("inference-header-content-length"), m
            )
        except BadRequest as e:
            return error(400, str(e))
        if outputs is None:
            outputs = [(n, binary_default) for n in m.output_names]
        names = [n for n, _ in outputs]
        try:
            if inline:
                results = m.session.run(names, feeds)
            else:
                results = await run_in_threadpool(m.session.run, names, feeds)
        except Exception as e:  # onnxruntime errors: bad values, shapes it rejects
            return error(400, f"inference failed: {e}")
        return encode_response(m, req_id, outputs, results)

    async def infer_text(m: text_model.TextModel, body: bytes, header_len: str | None):
        try:
            req_id, texts, outputs, binary_default = m.decode(body, header_len)
        except text_model.BadRequest as e:
            return error(400, str(e))
        if outputs is None:
            outputs = [(n, binary_default) for n in m.output_names]
        names = [n for n, _ in outputs]
        if inline:
            results = m.run(names, texts)
        else:
            results = await run_in_threadpool(m.run, names, texts)
        return encode_response(m, req_id, outputs, results)

    return app


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default="models", help="directory of *.onnx files (default: models)")
    ap.add_argument("--models", default="", help="comma-separated model names to load (default: all)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--intra-op-threads", type=int, default=1, help="onnxruntime intra-op threads per session")
    ap.add_argument(
        "--run-mode",
        choices=["threadpool", "inline"],
        default="threadpool",
        help="run the session in the threadpool (default) or on the event loop",
    )
    ap.add_argument(
        "--max-batch-size",
        type=int,
        default=0,
        help="max_batch_size reported by /config (0: dims include the batch dim, "
        "perf_analyzer --shape X:1,64; >0: dims without it, --shape X:64 -b B)",
    )
    ap.add_argument("--text-tokenizer", default="", help="tokenizer.json of the text models "
                    "(default: minilm-tokenizer.json in --models-dir)")
    ap.add_argument("--text-max-length", type=int, default=128, help="tokens per text; longer texts are truncated")
    ap.add_argument("--access-log", action="store_true", help="enable uvicorn's access log (off: it costs throughput)")
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args(argv)

    import uvicorn

    os.environ[ENV + "MODELS_DIR"] = str(Path(args.models_dir).resolve())
    os.environ[ENV + "MODELS"] = args.models
    os.environ[ENV + "INTRA_OP_THREADS"] = str(args.intra_op_threads)
    os.environ[ENV + "RUN_MODE"] = args.run_mode
    os.environ[ENV + "MAX_BATCH_SIZE"] = str(args.max_batch_size)
    os.environ[ENV + "TEXT_TOKENIZER"] = args.text_tokenizer
    os.environ[ENV + "TEXT_MAX_LENGTH"] = str(args.text_max_length)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # workers > 1 makes uvicorn spawn processes that import the app by name.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    uvicorn.run(
        "fastapi_server:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        access_log=args.access_log,
        log_level=args.log_level,
        # uvloop/httptools are used when installed (benchmarks/baseline/requirements.txt)
        loop="auto",
        http="auto",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
