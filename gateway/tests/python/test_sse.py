"""Draft-then-final over server-sent events, on the real binary and models,
read with a real SSE client: event order and V2 payloads, parallel and
sequential modes, cancellation of heavy work that has not started (the
runtime's execution counters), disconnects, heartbeats, caching, and a
heavy model that fails after the draft was sent.

"Not started" is made deterministic with the admin pool pause hook: a
paused pool holds its queued requests; on resume the runtime skips those
whose caller went away and counts them as `cancelled`."""

import json
import threading

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import Reference, infer_body, output, write_config
from sse_util import FIXTURES, Stream, pause, pool_stats, resume, stream_stats, wait_for

CONFIG = """
[cache]

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true
batching = { max_batch_size = 16, max_queue_delay_us = 200 }
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true
batching = { max_batch_size = 16, max_queue_delay_us = 200 }
[[models]]
name = "draft-cheap"
path = "{fixtures}/draft-cheap.onnx"
warmup = true
[[models]]
name = "draft-flaky"
path = "{fixtures}/draft-flaky.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
draft = { heartbeat_ms = 100 }

[[routes]]
name = "digits-seq"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
draft = { mode = "sequential", heartbeat_ms = 100 }

[[routes]]
name = "digits-limited"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
draft = { parallel_queue_limit = 1, heartbeat_ms = 100 }

[[routes]]
name = "flaky"
models = ["draft-cheap", "draft-flaky"]
policy = { type = "fixed", model = "draft-flaky" }
draft = { confidence_output = "probabilities", threshold = 0.9, heartbeat_ms = 100 }

[[routes]]
name = "heavy-only"
models = ["digits-heavy"]
"""

NO_STORE = {"Cache-Control": "no-store"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    text = CONFIG.replace("{fixtures}", str(FIXTURES))
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("sse"), text))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def digits():
    """Test-set rows the cheap model is sure of (>= 0.9) and unsure of (<= 0.6)."""
    data = json.loads((MODELS / "digits-test.json").read_text())
    x = np.asarray(data["X"], np.float32)
    ref = Reference("digits-cheap", "digits-heavy")
    _, probs = ref.run("digits-cheap", x)
    top = probs.max(axis=1)
    return {
        "x": x,
        "ref": ref,
        "sure": [int(i) for i in np.flatnonzero(top >= 0.9)],
        "unsure": [int(i) for i in np.flatnonzero(top <= 0.6)],
    }


def assert_v2_response(data, route):
    assert data["model_name"] == route
    assert data["model_version"] == "1"
    for out in data["outputs"]:
        assert set(out) >= {"name", "datatype", "shape", "data"}
        assert int(np.prod(out["shape"])) == len(out["data"])


def row(digits, kind, n):
    i = digits[kind][n]
    return digits["x"][i : i + 1]


def held_until_draft(gw, route, body, heavy, headers=None):
    """Streams `body` while `heavy`'s pool is paused until the draft is in
    (so the draft provably comes first), then lets it run; returns the
    stream and every event."""
    pause(gw, heavy)
    try:
        s = Stream(gw, route, body, headers)
        first = s.next_event()
        assert first[0] == "draft", first
    finally:
        resume(gw, heavy)
    return s, [first] + s.all()


def test_draft_then_final_order_and_valid_v2_payloads(gw, digits):
    x = row(digits, "unsure", 0)
    body = infer_body(x, outputs=["label", "probabilities"])
    s, events = held_until_draft(gw, "digits", body, "digits-heavy", NO_STORE)
    assert s.response.status_code == 200
    assert s.response.headers["content-type"] == "text/event-stream"
    assert s.response.headers["transfer-encoding"] == "chunked"
    assert [name for name, _ in events] == ["draft", "final"]
    (_, draft), (_, final) = events
    for data in (draft, final):
        assert_v2_response(data, "digits")
    cheap_label, cheap_probs = digits["ref"].run("digits-cheap", x)
    heavy_label, heavy_probs = digits["ref"].run("digits-heavy", x)
    p = draft["parameters"]
    assert (p["stage"], p["model"], p["device"]) == ("draft", "digits-cheap", "cpu")
    assert p["confidence"] == pytest.approx(float(cheap_probs.max()), abs=1e-5)
    assert output(draft, "label") == cheap_label.tolist()
    p = final["parameters"]
    assert (p["stage"], p["model"], p["device"], p["from_draft"]) == ("final", "digits-heavy", "cpu", False)
    assert p["confidence"] == pytest.approx(float(heavy_probs.max()), abs=1e-5)
    assert p["switchyard_reason"] == "cascade_escalate"
    assert output(final, "label") == heavy_label.tolist()


def test_stream_parameter_and_json_only_outputs(gw, digits):
    body = infer_body(row(digits, "unsure", 1), outputs=["label"])
    body["parameters"] = {"stream": True, "binary_data_output": True}
    r = requests.post(f"{gw.base}/v2/models/digits-seq/infer", json=body, headers=NO_STORE, stream=True, timeout=30)
    assert r.headers["content-type"] == "text/event-stream"
    text = r.text
    assert text.index("event: draft") < text.index("event: final")
    assert '"data":[' in text, "events carry JSON tensors, never binary"


def test_parallel_confident_draft_cancels_heavy_run_not_started(gw, digits):
    before = pool_stats(gw, "digits-heavy")
    pause(gw, "digits-heavy")
    try:
        s = Stream(gw, "digits", infer_body(row(digits, "sure", 0), outputs=["label"]), NO_STORE)
        # Both events arrive while the heavy pool holds its run: nothing waited for it.
        events = s.all()
    finally:
        resume(gw, "digits-heavy")
    assert [name for name, _ in events] == ["draft", "final"]
    final = events[1][1]
    assert final["parameters"]["from_draft"] is True
    assert final["parameters"]["model"] == "digits-cheap"
    assert final["parameters"]["switchyard_reason"] == "cascade_confident"
    assert final["outputs"] == events[0][1]["outputs"]
    after = wait_for(lambda: (lambda p: p if p["cancelled"] == before["cancelled"] + 1 else None)(
        pool_stats(gw, "digits-heavy")), "the queued heavy run to be skipped")
    assert after["requests"] == before["requests"] + 1, "parallel mode queued the heavy model"
    assert after["executions"] == before["executions"], "the heavy run never executed"


def test_sequential_confident_draft_never_runs_heavy(gw, digits):
    before = pool_stats(gw, "digits-heavy")
    events = Stream(gw, "digits-seq", infer_body(row(digits, "sure", 1)), NO_STORE).all()
    assert [name for name, _ in events] == ["draft", "final"]
    assert events[1][1]["parameters"]["from_draft"] is True
    assert events[1][1]["parameters"]["draft_mode"] == "sequential"
    after = pool_stats(gw, "digits-heavy")
    assert (after["requests"], after["executions"]) == (before["requests"], before["executions"])


def test_sequential_unconfident_draft_runs_heavy_after_it(gw, digits):
    before = pool_stats(gw, "digits-heavy")
    events = Stream(gw, "digits-seq", infer_body(row(digits, "unsure", 2)), NO_STORE).all()
    assert [name for name, _ in events] == ["draft", "final"]
    assert events[1][1]["parameters"]["model"] == "digits-heavy"
    assert pool_stats(gw, "digits-heavy")["executions"] == before["executions"] + 1


def test_parallel_turns_sequential_while_the_heavy_pool_is_loaded(gw, digits):
    pause(gw, "digits-heavy")
    waiting = threading.Thread(target=lambda: requests.post(
        f"{gw.base}/v2/models/heavy-only/infer", json=infer_body(row(digits, "unsure", 8)), timeout=60))
    try:
        waiting.start()
        wait_for(lambda: pool_stats(gw, "digits-heavy")["queue_depth"] >= 1, "a request queued on the heavy pool")
        before = pool_stats(gw, "digits-heavy")
        events = Stream(gw, "digits-limited", infer_body(row(digits, "sure", 3)), NO_STORE).all()
        after = pool_stats(gw, "digits-heavy")
    finally:
        resume(gw, "digits-heavy")
        waiting.join()
    assert [name for name, _ in events] == ["draft", "final"]
    assert events[1][1]["parameters"]["draft_mode"] == "sequential_under_load"
    assert events[1][1]["parameters"]["from_draft"] is True
    assert after["requests"] == before["requests"], "no speculative heavy run on a loaded pool"


@pytest.mark.parametrize("route", ["digits", "digits-seq"])
def test_disconnect_cancels_heavy_work_not_started(gw, digits, route):
    before = pool_stats(gw, "digits-heavy")
    gone = stream_stats(gw)["client_gone"]
    pause(gw, "digits-heavy")
    try:
        s = Stream(gw, route, infer_body(row(digits, "unsure", 3)), NO_STORE)
        assert s.next_event()[0] == "draft"
        s.close()
        wait_for(lambda: stream_stats(gw)["client_gone"] == gone + 1, "the gateway to notice the disconnect")
    finally:
        resume(gw, "digits-heavy")
    after = wait_for(lambda: (lambda p: p if p["cancelled"] == before["cancelled"] + 1 else None)(
        pool_stats(gw, "digits-heavy")), "the abandoned heavy run to be skipped")
    assert after["executions"] == before["executions"], "the runtime did not execute it"
    assert gw.alive()


def test_heartbeat_keeps_a_long_heavy_run_alive(gw, digits):
    pause(gw, "digits-heavy")
    try:
        s = Stream(gw, "digits", infer_body(row(digits, "unsure", 4)), NO_STORE)
        assert s.next_event()[0] == "draft"
        # The heavy run is held: only comments arrive, every 100 ms.
        while s.heartbeats() < 2:
            assert s.pump().startswith(b":"), "only comments while the heavy run is held"
    finally:
        resume(gw, "digits-heavy")
    name, final = s.next_event()
    assert name == "final" and final["parameters"]["model"] == "digits-heavy"


def test_only_the_final_is_cached_and_served_to_streams_and_plain_requests(gw, digits):
    body = infer_body(row(digits, "unsure", 5), outputs=["label", "probabilities"])
    first, events = held_until_draft(gw, "digits", body, "digits-heavy")
    assert first.response.headers["x-cache"] == "miss"
    assert [name for name, _ in events] == ["draft", "final"]
    final = events[1][1]
    again = Stream(gw, "digits", body)
    assert again.response.headers["x-cache"] == "hit-l1"
    cached = again.all()
    assert [name for name, _ in cached] == ["final"], "a cached final is sent at once, alone"
    assert cached[0][1]["outputs"] == final["outputs"]
    assert cached[0][1]["parameters"]["cache"] == "hit-l1"
    plain = requests.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=30)
    assert plain.headers["x-cache"] == "hit-l1"
    assert plain.headers["x-switchyard-model"] == "digits-heavy"
    assert plain.json()["outputs"] == final["outputs"]


def test_a_plain_answer_is_a_cached_final_for_streams(gw, digits):
    body = infer_body(row(digits, "sure", 2), outputs=["label"])
    plain = requests.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=30)
    assert plain.headers["x-cache"] == "miss"
    events = Stream(gw, "digits", body).all()
    assert [name for name, _ in events] == ["final"]
    assert events[0][1]["outputs"] == plain.json()["outputs"]


def flaky_body(fail, confident=False):
    x = np.zeros((1, 64), np.float32)
    if confident:
        x[0, 2] = 20.0
    x[0, 15] = 3.0  # the flaky model's answer: class 5
    x[0, 63] = 1.0 if fail else 0.0
    return infer_body(x, outputs=["label"])


def test_heavy_failure_after_the_draft_ends_the_stream_with_an_error_event(gw):
    before = pool_stats(gw, "draft-flaky")
    s = Stream(gw, "flaky", flaky_body(fail=True))
    events = s.all()
    assert [name for name, _ in events] == ["draft", "error"]
    draft, error = events[0][1], events[1][1]
    assert_v2_response(draft, "flaky")
    assert draft["parameters"]["model"] == "draft-cheap"
    assert draft["parameters"]["confidence"] == pytest.approx(0.1, abs=1e-6)
    assert "draft-flaky" in error["error"] and error["status"] == 500
    assert pool_stats(gw, "draft-flaky")["errors"] == before["errors"] + 1
    # Neither the draft nor the error was cached: the same input runs again
    # (and the plain route falls back to its other model).
    plain = requests.post(f"{gw.base}/v2/models/flaky/infer", json=flaky_body(fail=True), timeout=30)
    assert plain.status_code == 200 and plain.headers["x-cache"] == "miss"
    assert plain.headers["x-switchyard-model"] == "draft-cheap"
    assert pool_stats(gw, "draft-flaky")["executions"] == before["executions"] + 2


def test_non_cascade_route_with_a_draft_table(gw):
    _, events = held_until_draft(gw, "flaky", flaky_body(fail=False), "draft-flaky", NO_STORE)
    assert [name for name, _ in events] == ["draft", "final"]
    assert events[1][1]["parameters"]["model"] == "draft-flaky"
    assert output(events[1][1], "label") == [5]
    pause(gw, "draft-flaky")
    try:
        events = Stream(gw, "flaky", flaky_body(fail=False, confident=True), NO_STORE).all()
    finally:
        resume(gw, "draft-flaky")
    assert [name for name, _ in events] == ["draft", "final"]
    assert events[1][1]["parameters"]["from_draft"] is True
    assert output(events[1][1], "label") == [2]


@pytest.mark.parametrize("name", ["heavy-only", "digits-cheap"])
def test_a_target_without_a_pair_streams_one_final(gw, digits, name):
    events = Stream(gw, name, infer_body(row(digits, "unsure", 6)), NO_STORE).all()
    assert [n for n, _ in events] == ["final"]
    assert events[0][1]["parameters"]["draft_mode"] == "single"
    assert_v2_response(events[0][1], name) if name == "heavy-only" else None


def test_errors_before_any_event_keep_their_status(gw, digits):
    body = infer_body(row(digits, "unsure", 7))
    r = requests.post(f"{gw.base}/v2/models/digits/infer", json=body,
                      headers={"Accept": "text/event-stream", "x-latency-budget-ms": "-5"}, timeout=30)
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    assert "x-latency-budget-ms" in r.json()["error"]
    body["parameters"] = {"stream": "yes"}
    r = requests.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=30)
    assert r.status_code == 400 and "stream" in r.json()["error"]
