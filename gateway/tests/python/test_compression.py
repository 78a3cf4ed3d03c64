"""Compressed bodies both ways (issue 38, item 2), against the real binary:
`tritonclient.http` with `request_compression_algorithm` and
`response_compression_algorithm` (gzip, deflate; JSON and binary tensors)
answers as it does uncompressed; `tritonclient.grpc` with
`compression_algorithm`; the cache keyed on the decompressed tensors; and
the limits on the decompressed size: a REST or gRPC decompression bomb
(1 GiB of zeros, about 1 MB sent) is refused while it is read, with the
gateway's memory flat. A corrupt stream is a 400, an unknown coding 415."""

import gzip
import http.client
import json
import zlib

import grpc
import h2.events
import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2

from conftest import Gateway
from h2_raw import SERVICE, RawH2, frame
from routing_util import write_config

MiB = 1 << 20
LIMIT = 8 * MiB
CONFIG = f"""
[server]
max_body_bytes = "{LIMIT // MiB}MiB"

[cache]

[[models]]
name = "digits-cheap"
path = "{{models}}/digits-cheap.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]
"""
CODINGS = ["gzip", "deflate"]
INFER = "/v2/models/digits/infer"


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = Gateway(config=write_config(tmp_path_factory.mktemp("compression"), CONFIG),
                extra_args=["--grpc-listen", "127.0.0.1:0"])
    yield g
    g.stop()


def rows(n, seed):
    return np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)


def http_infer(gw, x, binary, **compression):
    client = httpclient.InferenceServerClient(url=gw.url, network_timeout=60)
    try:
        i = httpclient.InferInput("X", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        out = [httpclient.InferRequestedOutput("probabilities", binary_data=binary)]
        return client.infer("digits", [i], outputs=out, **compression).as_numpy("probabilities")
    finally:
        client.close()


def compress(coding, data: bytes) -> bytes:
    return gzip.compress(data) if coding == "gzip" else zlib.compress(data)


def decompress(coding, data: bytes) -> bytes:
    return gzip.decompress(data) if coding == "gzip" else zlib.decompress(data)


def raw_post(gw, body: bytes, headers: dict):
    """POSTs `body` as is; (status, headers, body as sent on the wire)."""
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
    try:
        conn.request("POST", INFER, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def json_body(x):
    return json.dumps({"inputs": [{"name": "X", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}],
                       "outputs": [{"name": "probabilities"}]}).encode()


def binary_body(x, binary_output=False):
    header = json.dumps({"inputs": [{"name": "X", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "probabilities",
                                      "parameters": {"binary_data": binary_output}}]}).encode()
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Type": "application/octet-stream"}


def status_kib(gw, field):
    with open(f"/proc/{gw.proc.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc status")


def zeros_gzip(total=1 << 30):
    """`total` zero bytes, gzipped a MiB at a time (about total / 1000 bytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join(packer.compress(block) for _ in range(total // MiB)) + packer.flush()


@pytest.fixture(scope="module")
def bomb():
    return zeros_gzip()


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("coding", CODINGS)
def test_tritonclient_http_sends_compressed_requests(gw, coding, binary):
    x = rows(20, seed=CODINGS.index(coding) * 2 + binary)
    plain = http_infer(gw, x, binary)
    assert np.array_equal(http_infer(gw, x, binary, request_compression_algorithm=coding), plain)
    both = http_infer(gw, x, binary, request_compression_algorithm=coding, response_compression_algorithm=coding)
    assert np.array_equal(both, plain)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("coding", CODINGS)
def test_responses_are_compressed_when_accepted(gw, coding, binary):
    x = rows(64, seed=7 if binary else 8)
    assert np.array_equal(http_infer(gw, x, binary, response_compression_algorithm=coding),
                          http_infer(gw, x, binary))
    body, headers = binary_body(x, binary_output=True) if binary else (json_body(x), {})
    status, plain_headers, plain = raw_post(gw, body, headers)
    assert status == 200 and "content-encoding" not in plain_headers
    status, got, wire = raw_post(gw, body, {**headers, "Accept-Encoding": f"br;q=1, {coding};q=0.9"})
    assert status == 200, wire[:300]
    assert got.get("content-encoding") == coding and got.get("vary") == "Accept-Encoding"
    assert int(got["content-length"]) == len(wire) < len(plain)
    assert decompress(coding, wire) == plain
    if binary:
        # The header length counts the JSON in the decompressed body.
        length = int(got["inference-header-content-length"])
        assert length == int(plain_headers["inference-header-content-length"])
        assert json.loads(plain[:length])["outputs"][0]["parameters"]["binary_data_size"] == 64 * 10 * 4
    status, got, _ = raw_post(gw, body, {**headers, "Accept-Encoding": f"{coding};q=0"})
    assert status == 200 and "content-encoding" not in got


@pytest.mark.parametrize("coding", CODINGS)
def test_tritonclient_grpc_compression(gw, coding):
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{gw.grpc_port}")
    try:
        x = rows(32, seed=11)
        i = grpcclient.InferInput("X", list(x.shape), "FP32")
        i.set_data_from_numpy(x)
        out = [grpcclient.InferRequestedOutput("probabilities")]
        plain = client.infer("digits", [i], outputs=out).as_numpy("probabilities")
        packed = client.infer("digits", [i], outputs=out, compression_algorithm=coding)
        assert np.array_equal(packed.as_numpy("probabilities"), plain)
    finally:
        client.close()


def open_call(raw, method, *headers):
    """Opens a gRPC call on a raw HTTP/2 connection with extra `headers`."""
    sid = raw.conn.get_next_available_stream_id()
    raw.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
                                (":authority", "127.0.0.1"), ("content-type", "application/grpc"),
                                ("te", "trailers"), *headers])
    raw.flush()
    return sid


def infer_request(x):
    tensor = service_pb2.ModelInferRequest().InferInputTensor(
        name="X", datatype="FP32", shape=list(x.shape),
        contents=service_pb2.InferTensorContents(fp32_contents=x.ravel().tolist()))
    return service_pb2.ModelInferRequest(model_name="digits", inputs=[tensor])


@pytest.mark.parametrize("coding", CODINGS)
def test_grpc_answers_are_compressed_when_the_client_accepts_it(gw, coding):
    raw = RawH2(gw.grpc_port)
    try:
        sid = open_call(raw, "ModelInfer", ("grpc-accept-encoding", coding))
        raw.send(sid, frame(infer_request(rows(16, seed=5))), end_stream=True)
        assert raw.status_of(sid, 30) == (0, "")
        head = next(e for e in raw.events if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid)
        assert (b"grpc-encoding", coding.encode()) in head.headers
        data = b"".join(e.data for e in raw.events if isinstance(e, h2.events.DataReceived) and e.stream_id == sid)
        assert data[0] == 1 and int.from_bytes(data[1:5], "big") == len(data) - 5
        answer = service_pb2.ModelInferResponse.FromString(decompress(coding, data[5:]))
        assert answer.model_name == "digits" and len(answer.raw_output_contents) == 2
    finally:
        raw.close()


@pytest.mark.parametrize("method", ["ModelInfer", "ModelStreamInfer"])
def test_a_corrupt_grpc_message_is_invalid_argument(gw, method):
    raw = RawH2(gw.grpc_port)
    try:
        sid = open_call(raw, method, ("grpc-encoding", "gzip"))
        payload = gzip.compress(infer_request(rows(1, seed=1)).SerializeToString())[:-6]
        raw.send(sid, b"\x01" + len(payload).to_bytes(4, "big") + payload, end_stream=True)
        code, message = raw.status_of(sid, 30) or (None, "")
        assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0], (code, message)
        assert message.startswith("Error%20decompressing")
    finally:
        raw.close()


def test_a_gzip_request_hits_the_entry_of_the_plain_one(gw):
    x = rows(3, seed=21)
    first = requests.post(f"{gw.base}{INFER}", data=json_body(x), timeout=30)
    assert first.status_code == 200 and first.headers["x-cache"] == "miss"
    for coding in CODINGS:
        again = requests.post(f"{gw.base}{INFER}", data=compress(coding, json_body(x)),
                              headers={"Content-Encoding": coding}, timeout=30)
        assert again.status_code == 200, again.text
        assert again.headers["x-cache"] == "hit-l1"
        assert again.json()["outputs"] == first.json()["outputs"]
    body, headers = binary_body(x)
    binary = requests.post(f"{gw.base}{INFER}", data=gzip.compress(body),
                           headers={**headers, "Content-Encoding": "gzip"}, timeout=30)
    assert binary.status_code == 200, binary.text
    assert binary.headers["x-cache"] == "hit-l1"
    assert binary.json()["outputs"] == first.json()["outputs"]


def test_a_rest_decompression_bomb_is_413_with_memory_flat(gw, bomb):
    assert len(bomb) < 2 * MiB
    rss, peak = status_kib(gw, "VmRSS"), status_kib(gw, "VmHWM")
    for _ in range(3):
        status, _, body = raw_post(gw, bomb, {"Content-Encoding": "gzip", "Content-Type": "application/json"})
        assert status == 413, body[:300]
        assert str(LIMIT) in json.loads(body)["error"]
    grown_rss = (status_kib(gw, "VmRSS") - rss) / 1024
    grown_peak = (status_kib(gw, "VmHWM") - peak) / 1024
    assert grown_rss < 100 and grown_peak < 100, f"RSS +{grown_rss:.0f} MB, peak +{grown_peak:.0f} MB"
    assert requests.get(f"{gw.base}/v2/health/ready", timeout=10).status_code == 200


def test_a_grpc_decompression_bomb_is_resource_exhausted_with_memory_flat(gw, bomb):
    peak = status_kib(gw, "VmHWM")
    raw = RawH2(gw.grpc_port)
    try:
        for _ in range(3):
            sid = open_call(raw, "ModelInfer", ("grpc-encoding", "gzip"))
            raw.send(sid, b"\x01" + len(bomb).to_bytes(4, "big") + bomb, end_stream=True)
            code, message = raw.status_of(sid, 60) or (None, "")
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], (code, message)
            assert str(LIMIT) in message
    finally:
        raw.close()
    grown = (status_kib(gw, "VmHWM") - peak) / 1024
    assert grown < 100, f"peak RSS +{grown:.0f} MB"
    assert gw.alive()


@pytest.mark.parametrize("coding", CODINGS)
def test_a_corrupt_stream_is_400(gw, coding):
    body = json_body(rows(1, seed=3))
    for bad in [body, compress(coding, body)[:-5]]:
        r = requests.post(f"{gw.base}{INFER}", data=bad, headers={"Content-Encoding": coding}, timeout=30)
        assert r.status_code == 400, r.text
        assert coding in r.json()["error"]


def test_an_unknown_coding_is_415(gw):
    body = json_body(rows(1, seed=3))
    for coding in ["br", "gzip, gzip", "compress"]:
        r = requests.post(f"{gw.base}{INFER}", data=body, headers={"Content-Encoding": coding}, timeout=30)
        assert r.status_code == 415, r.text
        assert "gzip or deflate" in r.json()["error"]
