"""Online cascade calibration (`routes[].calibrate`) on the real gateway:
shadow runs of both models on a share of the calls, after they are
answered, only while the heavy model is idle; the suggested threshold for a
target agreement equals the one computed offline from the same rows with
onnxruntime (within one grid step); a busy heavy model stops the shadows;
streamed calls (draft then final, over SSE or a gRPC stream) are shadowed
and counted like plain ones."""

import json
import queue

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

from conftest import MODELS, Gateway
from routing_util import DIGITS_MODELS, Reference, write_config
from sse_util import Stream, admin, pause, resume, wait_for

TARGET = 0.99

CONFIG = DIGITS_MODELS + """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 2000, max = 5000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
calibrate = { shadow = 1.0, target = %s }
""" % TARGET


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("calibration"), CONFIG),
                 extra_args=["--grpc-listen", "127.0.0.1:0"])
    yield gw
    gw.stop()


def calibration(gw):
    return admin(gw, "/admin/stats")["calibration"].get("digits", {"rows": 0, "skipped_busy": 0, "shadow_runs": 0})


def infer(session, gw, row):
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row.tolist()}]}
    r = session.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r


def reference_threshold(x, target=TARGET):
    """The lowest grid threshold whose agreement reaches `target`, from
    onnxruntime's outputs: the same computation, offline."""
    ref = Reference("digits-cheap", "digits-heavy")
    _, cheap = ref.run("digits-cheap", x)
    _, heavy = ref.run("digits-heavy", x)
    confidence = cheap.max(axis=1).astype(np.float32)
    agrees = cheap.argmax(axis=1) == heavy.argmax(axis=1)
    # float32 arithmetic, as the cascade compares its float32 threshold.
    bucket = np.minimum(np.floor(confidence * np.float32(100)), 100)
    for k in range(101):
        accepted = bucket >= k
        agreement = agrees[accepted].mean() if accepted.any() else 1.0
        if agreement >= target:
            return k / 100
    return None


def test_the_suggested_threshold_matches_the_offline_one(gw):
    x = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
    session = requests.Session()
    for i, row in enumerate(x):
        infer(session, gw, row)
        # One shadow at a time: the next call finds the heavy model idle.
        wait_for(lambda: calibration(gw)["rows"] + calibration(gw)["skipped_busy"] >= i + 1, f"shadow of call {i}")
    view = calibration(gw)
    assert view["skipped_busy"] == 0 and view["failed"] == 0
    assert view["rows"] == len(x) and view["shadow_runs"] == len(x)
    expected = reference_threshold(x)
    assert expected is not None
    assert view["suggested_threshold"] == pytest.approx(expected, abs=0.01 + 1e-9), (view["suggested_threshold"], expected)
    point = next(p for p in view["curve"] if abs(p["threshold"] - view["suggested_threshold"]) < 1e-9)
    assert point["agreement"] >= TARGET
    metrics = requests.get(f"{gw.admin}/metrics", timeout=5).text
    assert 'switchyard_calibration_suggested_threshold{route="digits"}' in metrics
    # Never applied by itself.
    routes = admin(gw, "/admin/config")["config"]["routes"]
    assert routes[0]["policy"]["threshold"] == pytest.approx(0.8)
    assert routes[0]["calibrate"] == {"shadow": 1.0, "target": TARGET}


def test_a_busy_heavy_model_stops_the_shadows_and_answers_do_not_wait(gw):
    x = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
    _, cheap = Reference("digits-cheap").run("digits-cheap", x)
    sure = x[cheap.max(axis=1) >= 0.95][:20]
    before = calibration(gw)
    pause(gw, "digits-heavy")
    try:
        session = requests.Session()
        for row in sure:
            r = infer(session, gw, row)
            assert r.headers["x-switchyard-model"] == "digits-cheap"
    finally:
        resume(gw, "digits-heavy")
    after = calibration(gw)
    assert after["skipped_busy"] - before["skipped_busy"] == len(sure)
    assert after["shadow_runs"] == before["shadow_runs"]


def shadowed(gw):
    """Calls of the route the shadow has seen: run, skipped or failed."""
    view = calibration(gw)
    return view["shadow_runs"] + view["skipped_busy"] + view.get("failed", 0)


def decided(gw):
    """Routing decisions counted for the route."""
    return sum(d["count"] for d in admin(gw, "/admin/stats")["decisions"] if d["route"] == "digits")


def sse_call(gw, row):
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row.tolist()}]}
    stream = Stream(gw, "digits", body, headers={"cache-control": "no-store"})
    try:
        events = stream.all()
    finally:
        stream.close()
    assert [name for name, _ in events][-1] == "final", events
    return events[-1][1]["parameters"]["draft_mode"]


def grpc_call(gw, row):
    responses = queue.Queue()
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{gw.grpc_port}")
    client.start_stream(callback=lambda result, error: responses.put((result, error)),
                        headers={"cache-control": "no-store"})
    x = grpcclient.InferInput("X", [1, 64], "FP32")
    x.set_data_from_numpy(row[None, :])
    client.async_stream_infer("digits", [x], request_id="shadowed")
    try:
        while True:
            result, error = responses.get(timeout=30)
            assert error is None, error
            p = result.get_response().parameters
            if p["triton_final_response"].bool_param:
                return p["draft_mode"].string_param
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("call", [sse_call, grpc_call], ids=["sse", "grpc-stream"])
def test_streamed_calls_are_shadowed_and_counted_like_plain_ones(gw, call):
    """Draft then final runs inside routing: the stream's call takes the
    same path as a plain one, so the calibration shadow sees it and its
    decision is counted once."""
    x = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
    row = x[1 if call is grpc_call else 0]
    before = (shadowed(gw), decided(gw))
    assert call(gw, row) in ("parallel", "sequential_under_load"), "the route's pair ran"
    wait_for(lambda: shadowed(gw) == before[0] + 1, "the streamed call's shadow")
    assert decided(gw) == before[1] + 1
