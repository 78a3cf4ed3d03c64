"""Malformed requests: each must get a 4xx with a clear JSON error, never a
5xx, and the process must keep serving."""

import json
import struct

import pytest
import requests

GOOD_X = [0.5] * 64


def infer_url(gw, model="digits-cheap", version=None):
    v = f"/versions/{version}" if version else ""
    return f"{gw.base}/v2/models/{model}{v}/infer"


def body(inputs, **extra):
    return json.dumps({"inputs": inputs, **extra}).encode()


def x_input(shape=(1, 64), data=None, datatype="FP32", name="X"):
    return {"name": name, "shape": list(shape), "datatype": datatype, "data": data if data is not None else GOOD_X}


def binary_request(x_bytes_declared, payload, header_len_delta=0):
    header = json.dumps({
        "inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32",
                    "parameters": {"binary_data_size": x_bytes_declared}}],
    }).encode()
    headers = {"Inference-Header-Content-Length": str(len(header) + header_len_delta),
               "Content-Type": "application/octet-stream"}
    return header + payload, headers


FLOATS_64 = struct.pack("<64f", *GOOD_X)

# (case id, method, model, version, body bytes, extra headers, expected status)
CASES = [
    ("invalid-json", "POST", "digits-cheap", None, b"{not json", {}, 400),
    ("empty-body", "POST", "digits-cheap", None, b"", {}, 400),
    ("missing-inputs", "POST", "digits-cheap", None, b'{"id": "1"}', {}, 400),
    ("input-missing-shape", "POST", "digits-cheap", None,
     body([{"name": "X", "datatype": "FP32", "data": GOOD_X}]), {}, 400),
    ("unknown-datatype", "POST", "digits-cheap", None, body([x_input(datatype="FLOAT99")]), {}, 400),
    ("shape-data-mismatch", "POST", "digits-cheap", None, body([x_input(shape=(2, 64))]), {}, 400),
    ("string-in-fp32", "POST", "digits-cheap", None, body([x_input(data=["a"] * 64)]), {}, 400),
    ("huge-declared-shape", "POST", "digits-cheap", None,
     body([x_input(shape=(2**40, 2**40), data=[1.0])]), {}, 400),
    ("wrong-input-name", "POST", "digits-cheap", None, body([x_input(name="Y")]), {}, 400),
    ("wrong-dtype-for-model", "POST", "digits-cheap", None,
     body([x_input(datatype="INT32", data=[1] * 64)]), {}, 400),
    ("wrong-shape-for-model", "POST", "digits-cheap", None,
     body([x_input(shape=(1, 63), data=[0.5] * 63)]), {}, 400),
    ("unknown-output", "POST", "digits-cheap", None,
     body([x_input()], outputs=[{"name": "nope"}]), {}, 400),
    ("binary-overruns-body", "POST", "digits-cheap", None, *binary_request(512, FLOATS_64), 400),
    ("binary-underruns-body", "POST", "digits-cheap", None, *binary_request(256, FLOATS_64 + b"\0" * 16), 400),
    ("binary-size-not-shape", "POST", "digits-cheap", None, *binary_request(128, FLOATS_64[:128]), 400),
    ("header-length-beyond-body", "POST", "digits-cheap", None, *binary_request(256, b"", header_len_delta=4096), 400),
    ("header-length-not-a-number", "POST", "digits-cheap", None, body([x_input()]),
     {"Inference-Header-Content-Length": "ten"}, 400),
    ("unknown-model", "POST", "no-such-model", None, body([x_input()]), {}, 404),
    ("unknown-version", "POST", "digits-cheap", "99", body([x_input()]), {}, 404),
    ("wrong-method", "GET", "digits-cheap", None, b"", {}, 405),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_request_is_a_clear_4xx(gateway, case):
    _, method, model, version, data, headers, expected = case
    resp = requests.request(method, infer_url(gateway, model, version), data=data, headers=headers, timeout=30)
    assert resp.status_code == expected, resp.text
    error = resp.json()["error"]
    assert isinstance(error, str) and len(error) > 5
    assert gateway.alive()


def test_oversized_body_is_413(gateway):
    data = b"0" * (65 << 20)  # the default limit is 64 MiB
    try:
        resp = requests.post(infer_url(gateway), data=data, timeout=60)
        assert resp.status_code == 413, resp.text
    except requests.ConnectionError:
        # The server may answer 413 and close before the client finished
        # sending; the process must survive either way.
        pass
    assert gateway.alive()


def test_still_serving_after_bad_requests(gateway):
    resp = requests.post(infer_url(gateway), data=body([x_input()]), timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["outputs"][0]["name"] in ("label", "probabilities")


def test_unknown_path_is_404(gateway):
    assert requests.get(f"{gateway.base}/v2/models/digits-cheap/bogus", timeout=10).status_code == 404
    assert requests.get(f"{gateway.base}/nothing-here", timeout=10).status_code == 404
