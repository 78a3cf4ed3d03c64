"""Pausing a pool (admin API) on the real binary: requests spill over to
the route's other pools and models, and a request that must wait on a
paused pool (nowhere else to go, or queued before the pause) ends at its
deadline with 503 + Retry-After instead of hanging until the resume."""

import threading
import time

import numpy as np
import pytest
import requests

from conftest import Gateway
from routing_util import infer_body, write_config
from sse_util import pause, pool_stats, resume, wait_for

CONFIG = """
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
name = "synth-heavy"
path = "{models}/synth-heavy.onnx"
warmup = true
batching = { max_batch_size = 1, queue_capacity = 256 }

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }

[[routes]]
name = "pinned"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "fixed", model = "digits-heavy" }

[[routes]]
name = "budgeted"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "latency_budget" }
"""

BUDGET = {"x-latency-budget-ms": "100"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("pause"), CONFIG))
    yield gw
    gw.stop()


def post(gw, name, body, headers=BUDGET, timeout=10):
    started = time.monotonic()
    r = requests.post(f"{gw.base}/v2/models/{name}/infer", json=body, headers=headers, timeout=timeout)
    return r, time.monotonic() - started


@pytest.mark.parametrize("route, paused, answers", [
    ("digits", "digits-cheap", "digits-heavy"),
    ("digits", "digits-heavy", "digits-cheap"),
    ("pinned", "digits-heavy", "digits-cheap"),
    ("budgeted", "digits-heavy", "digits-cheap"),
])
def test_a_route_spills_over_to_its_other_model(gw, route, paused, answers):
    before = pool_stats(gw, paused)
    pause(gw, paused)
    try:
        r, took = post(gw, route, infer_body(np.zeros((1, 64))))
    finally:
        resume(gw, paused)
    assert r.status_code == 200, r.text
    assert r.headers["x-switchyard-model"] == answers
    assert took < 2.0, f"answered in {took:.2f} s"
    assert pool_stats(gw, paused)["requests"] == before["requests"], "nothing was queued on the paused pool"


def test_nowhere_else_to_go_answers_503_at_the_deadline(gw):
    before = pool_stats(gw, "digits-heavy")
    pause(gw, "digits-heavy")
    try:
        assert pool_stats(gw, "digits-heavy")["paused"] is True
        r, took = post(gw, "digits-heavy", infer_body(np.ones((1, 64))))
    finally:
        resume(gw, "digits-heavy")
    assert r.status_code == 503, r.text
    assert "paused" in r.json()["error"]
    assert int(r.headers["retry-after"]) >= 1
    assert 0.09 <= took < 2.0, f"answered in {took:.2f} s, the budget is 100 ms"
    after = wait_for(lambda: (lambda p: p if p["cancelled"] == before["cancelled"] + 1 else None)(
        pool_stats(gw, "digits-heavy")), "the expired request to be skipped")
    assert after["executions"] == before["executions"], "it was not executed after the resume"
    assert after["paused"] is False


def test_every_model_paused(gw):
    for model in ("digits-cheap", "digits-heavy"):
        pause(gw, model)
    try:
        pinned, took = post(gw, "pinned", infer_body(np.ones((1, 64)) * 2))
        assert (pinned.status_code, "paused" in pinned.text) == (503, True), pinned.text
        assert took < 2.0
        shed, took = post(gw, "budgeted", infer_body(np.ones((1, 64)) * 3))
        assert shed.status_code == 429 and "retry-after" in shed.headers, shed.text
        assert took < 2.0
    finally:
        for model in ("digits-cheap", "digits-heavy"):
            resume(gw, model)


def test_a_request_queued_before_the_pause_ends_when_the_pool_is_paused(gw):
    """A small request waits behind a busy (unbatched) pool past its
    100 ms budget; it still runs late while the pool works, but once the
    pool is paused it ends at once with 503 rather than waiting for the
    resume."""
    big = infer_body(np.zeros((48, 64)))
    # The queue leaves by deadline (earliest first): the big requests' 50 ms
    # budgets keep them ahead of the small one's 100 ms.
    early = {"x-latency-budget-ms": "50"}
    busy = [threading.Thread(target=post, args=(gw, "synth-heavy", big, early, 60)) for _ in range(24)]
    for t in busy:
        t.start()
    wait_for(lambda: pool_stats(gw, "synth-heavy")["queue_depth"] >= 12, "a long queue on synth-heavy")
    result = {}

    def small():
        result["r"], result["took"] = post(gw, "synth-heavy", infer_body(np.ones((1, 64))))
        result["at"] = time.monotonic()

    waiting = threading.Thread(target=small)
    waiting.start()
    time.sleep(0.3)
    assert waiting.is_alive(), "the small request was answered before the queue drained"
    pause(gw, "synth-heavy")
    paused_at = time.monotonic()
    waiting.join(timeout=5)
    resumed_at = time.monotonic()
    resume(gw, "synth-heavy")
    for t in busy:
        t.join()
    assert "r" in result and result["at"] < resumed_at, "the small request waited for the resume"
    assert result["r"].status_code == 503, result["r"].text
    assert result["at"] - paused_at < 1.0
