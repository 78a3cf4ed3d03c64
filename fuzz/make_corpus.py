#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/) from
what the tests send: V2 requests as tritonclient builds them (JSON and
binary, FP32/INT64/BYTES, parameters, outputs), the example configs, SSE
payloads and texts. Deterministic; run again after changing it.

    .venv/bin/python fuzz/make_corpus.py
"""

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2
from tritonclient.grpc._utils import _get_inference_request

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fuzz" / "corpus"


def write(target, name, data):
    folder = OUT / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def triton_body(inputs, outputs=None, binary_output=False):
    body, json_size = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="7", parameters={"tenant_hint": "fuzz"}
    )
    return body, json_size


def fp32_grpc(x):
    i = grpcclient.InferInput("X", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def bytes_grpc():
    i = grpcclient.InferInput("text", [2], "BYTES")
    i.set_data_from_numpy(np.array([b"hello", "w\u00f6rld".encode()], dtype=np.object_))
    return i


def grpc_request(inputs):
    """The ModelInferRequest tritonclient[grpc] sends for `inputs`."""
    outputs = [grpcclient.InferRequestedOutput("probabilities", class_count=2)]
    return _get_inference_request(model_name="digits", inputs=inputs, model_version="", request_id="7",
                                  outputs=outputs, sequence_id=0, sequence_start=False, sequence_end=False,
                                  priority=0, timeout=None, parameters={"tenant_hint": "fuzz"})


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 64) / 16
    # JSON requests.
    digits = {"inputs": [{"name": "X", "shape": [2, 64], "datatype": "FP32", "data": x.ravel().tolist()}]}
    write("v2_json", "digits.json", json.dumps(digits))
    write("v2_json", "nested.json", json.dumps({"id": "a", "inputs": [{"name": "X", "shape": [1, 2], "datatype": "INT64",
                                                                      "data": [[1, 2]]}],
                                                "outputs": [{"name": "label", "parameters": {"classification": 2}}],
                                                "parameters": {"binary_data_output": True}}))
    write("v2_json", "bytes.json", json.dumps({"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES",
                                                          "data": ["a sentence", "another one"]}]}))
    write("v2_json", "fp16.json", json.dumps({"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP16",
                                                         "data": [0.5, -1, 65504]}]}))
    write("v2_json", "bool-shape0.json", json.dumps({"inputs": [{"name": "m", "shape": [0, 4], "datatype": "BOOL",
                                                                "data": []}]}))
    write("v2_json", "bad-shape.json", '{"inputs":[{"name":"X","shape":[2,64],"datatype":"FP32","data":[1,2]}]}')
    write("v2_json", "huge-shape.json", '{"inputs":[{"name":"X","shape":[4294967296,4294967296],"datatype":"FP32","data":[]}]}')
    # Binary requests, as tritonclient sends them: 4-byte header length, then the body.
    fp32 = httpclient.InferInput("X", list(x.shape), "FP32")
    fp32.set_data_from_numpy(x, binary_data=True)
    ids = httpclient.InferInput("ids", [2, 3], "INT64")
    ids.set_data_from_numpy(np.array([[101, 7, 102], [101, 8, 102]], dtype=np.int64), binary_data=True)
    texts = httpclient.InferInput("text", [3], "BYTES")
    texts.set_data_from_numpy(np.array([b"one", b"", "caf\u00e9".encode()], dtype=np.object_), binary_data=True)
    outs = [httpclient.InferRequestedOutput("probabilities", binary_data=True),
            httpclient.InferRequestedOutput("label", binary_data=False, class_count=3)]
    for name, inputs in (("fp32", [fp32]), ("int64", [ids]), ("bytes", [texts]), ("mixed", [fp32, ids, texts])):
        body, json_size = triton_body(inputs, outputs=outs)
        write("v2_binary", f"{name}.bin", struct.pack("<I", json_size or len(body)) + body)
    body, json_size = triton_body([texts])
    write("v2_binary", "short-length-prefix.bin", struct.pack("<I", json_size) + body[:-3])
    write("v2_binary", "header-past-body.bin", struct.pack("<I", 1 << 20) + body)
    # Configs: the embedded defaults and the examples.
    for path in [ROOT / "gateway/src/config/default.toml", *sorted((ROOT / "deploy/examples").glob("*.toml"))]:
        write("config", path.name, path.read_bytes())
    # SSE payloads: compact JSON, multi-line, CR/LF mixes.
    write("sse", "draft.bin", b"\x00" + json.dumps({"model_name": "cheap", "outputs": []}).encode())
    write("sse", "lines.bin", b"\x01line one\nline two\r\nline three")
    write("sse", "empty.bin", b"\x02")
    # Texts with limits.
    write("text_prefix", "words.bin", struct.pack("<H", 12) + "a few words of text here".encode())
    write("text_prefix", "multibyte.bin", struct.pack("<H", 5) + "\u00e9\u00e9\u00e9 \u65e5\u672c".encode())
    write("text_prefix", "no-space.bin", struct.pack("<H", 3) + b"abcdefgh")
    # gRPC ModelInferRequest messages as tritonclient[grpc] serializes them
    # (raw contents), and typed contents built with its protobuf classes.
    for name, inputs in (("fp32", [fp32_grpc(x)]), ("bytes", [bytes_grpc()]), ("mixed", [fp32_grpc(x), bytes_grpc()])):
        request = grpc_request(inputs)
        write("grpc_infer", f"raw-{name}.bin", request.SerializeToString())
    typed = service_pb2.ModelInferRequest(model_name="digits", id="t", parameters={
        "timeout": service_pb2.InferParameter(int64_param=5000)})
    tensor = typed.inputs.add(name="X", datatype="FP32", shape=[2, 64])
    tensor.contents.fp32_contents.extend(x.ravel().tolist())
    ints = typed.inputs.add(name="ids", datatype="INT8", shape=[3])
    ints.contents.int_contents.extend([1, -2, 127])
    typed.outputs.add(name="probabilities").parameters["classification"].int64_param = 3
    write("grpc_infer", "typed.bin", typed.SerializeToString())


if __name__ == "__main__":
    main()
