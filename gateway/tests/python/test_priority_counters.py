"""Per-class counters on the real binary (issue 41, visibility): requests
of each priority class admitted by routing, answered, shed (refused at a
full queue, or displaced from it by a higher class) and failed, in
`/admin/stats` ("priority") and in `/metrics`
(`switchyard_priority_admitted_total`, `switchyard_priority_requests_total`).
The pool's one worker is paused so the queue fills without any timing."""

import re
import threading

import numpy as np
import pytest
import requests

from conftest import Gateway
from routing_util import infer_body, write_config
from sse_util import admin, pause, pool_stats, resume, wait_for

CONFIG = """
[[models]]
name = "shed"
path = "{models}/digits-heavy.onnx"
batching = { max_batch_size = 4, max_queue_delay_us = 200, queue_capacity = 2 }
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("priority-counters"), CONFIG))
    yield gw
    gw.stop()


class Call:
    """One request of class `priority` in a thread."""

    def __init__(self, gw, value, priority):
        body = infer_body(np.full((1, 64), float(value)), parameters={"priority": priority})
        self.response = None
        self.done = threading.Event()

        def run():
            try:
                self.response = requests.post(f"{gw.base}/v2/models/shed/infer", json=body,
                                              headers={"x-latency-budget-ms": "9000"}, timeout=30)
            finally:
                self.done.set()

        threading.Thread(target=run, daemon=True).start()

    def status(self):
        assert self.done.wait(30), "no answer"
        return self.response.status_code


def metric(gw, name, **labels):
    text = requests.get(f"http://127.0.0.1:{gw.admin_port}/metrics", timeout=10).text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{name}{{{re.escape(want)}}} (\S+)$", text, re.M)
    assert found, f"{name}{{{want}}} is not in /metrics"
    return float(found.group(1))


def test_each_class_counts_admitted_answered_and_shed(gw):
    pause(gw, "shed")
    low, high = [], []
    try:
        # Class 4 fills the queue until one is refused (shed on arrival).
        for i in range(8):
            call = Call(gw, 100 + i, 4)
            wait_for(lambda: call.done.is_set() or pool_stats(gw, "shed")["queue_depth"] == len(low) + 1,
                     "the low-class request to be queued or refused")
            low.append(call)
            if call.done.is_set():
                assert call.status() == 429, call.response.text
                break
        else:
            pytest.fail("the queue never filled")
        # Class 1 takes a free place if there is one, then displaces the
        # youngest class-4 waiter (shed with 429).
        waiting_low = low[:-1]
        depth = pool_stats(gw, "shed")["queue_depth"]
        for i in range(3):
            call = Call(gw, 200 + i, 1)
            high.append(call)
            wait_for(lambda: call.done.is_set() or waiting_low[-1].done.is_set()
                     or pool_stats(gw, "shed")["queue_depth"] == depth + 1,
                     "the high-class request to be queued, or a waiter shed")
            if waiting_low[-1].done.is_set():
                break
            depth += 1
        assert waiting_low[-1].status() == 429, "a class-4 waiter was displaced"
    finally:
        resume(gw, "shed")
    for call in high + waiting_low[:-1]:
        assert call.status() == 200, call.response.text
    # A malformed class is refused before routing (400): it counts nowhere.
    bad = requests.post(f"{gw.base}/v2/models/shed/infer", json=infer_body(np.zeros((1, 64)), parameters={"priority": "x"}),
                        timeout=10)
    assert bad.status_code == 400

    stats = admin(gw, "/admin/stats")["priority"]
    assert stats["4"] == {"admitted": len(low), "answered": len(low) - 2, "shed": 2, "failed": 0}, stats
    assert stats["1"] == {"admitted": len(high), "answered": len(high), "shed": 0, "failed": 0}, stats
    for quiet in ("2", "3"):
        assert stats[quiet] == {"admitted": 0, "answered": 0, "shed": 0, "failed": 0}, stats

    assert metric(gw, "switchyard_priority_admitted_total", **{"class": "4"}) == len(low)
    assert metric(gw, "switchyard_priority_requests_total", **{"class": "4", "outcome": "shed"}) == 2
    assert metric(gw, "switchyard_priority_requests_total", **{"class": "4", "outcome": "answered"}) == len(low) - 2
    assert metric(gw, "switchyard_priority_requests_total", **{"class": "1", "outcome": "answered"}) == len(high)
    assert metric(gw, "switchyard_priority_requests_total", **{"class": "2", "outcome": "failed"}) == 0
