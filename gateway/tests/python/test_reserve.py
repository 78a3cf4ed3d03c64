"""A session reserved for the first class (`batching.reserve_top_class`),
on the real binary, on synth-heavy (one CPU worker, milliseconds a
batch; `inline_max_us = 0`, so every request is queued, none runs on the
caller's thread): first-class requests (`x-priority: 1`) run on the
reserved session, one batch each when sent one after another, counted
in `/admin/stats` (`reserved_batches`) and
`switchyard_pool_reserved_batches_total`; low-class requests
(`x-priority: 4`) never do; under a steady low-class load with
first-class requests beside it, every request of both classes is
answered 200 with onnxruntime's answer and nothing is preempted or
refused. No timing is asserted."""

import concurrent.futures as cf
import threading

import numpy as np
import pytest
import requests

from conftest import Gateway
from routing_util import Reference, infer_body, write_config
from sse_util import pool_stats

CONFIG = """
[[models]]
name = "rsv"
path = "{models}/synth-heavy.onnx"
warmup = true
batching = { max_batch_size = 8, queue_capacity = 64, inline_max_us = 0, reserve_top_class = true }
"""

LOW_CLIENTS = 3
ROWS = 4
ALONE = 5
HIGH = 40


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = Gateway(config=write_config(tmp_path_factory.mktemp("reserve"), CONFIG))
    yield g
    g.stop()


def inputs(seed):
    return np.random.default_rng(seed).normal(0, 1, (ROWS, 64)).astype(np.float32)


def call(session, gw, seed, priority):
    r = session.post(f"{gw.base}/v2/models/rsv/infer", json=infer_body(inputs(seed)),
                     headers={"x-priority": str(priority)}, timeout=60)
    assert r.status_code == 200, r.text
    out = {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in r.json()["outputs"]}
    return seed, out


def check_answers(answers):
    reference = Reference("synth-heavy")
    for seed, out in answers:
        label, probs = reference.run("synth-heavy", inputs(seed))
        assert np.array_equal(out["label"], label), seed
        np.testing.assert_allclose(out["probabilities"], probs, rtol=1e-4, atol=1e-6)


def metric(gw):
    text = requests.get(f"{gw.admin}/metrics", timeout=10).text
    line = next((l for l in text.splitlines()
                 if l.startswith("switchyard_pool_reserved_batches_total{") and 'model="rsv"' in l), None)
    assert line is not None, "switchyard_pool_reserved_batches_total is exported"
    return float(line.rsplit(" ", 1)[1])


def test_first_class_requests_run_on_the_reserved_session_and_low_ones_never_do(gw):
    before = pool_stats(gw, "rsv")["reserved_batches"]
    with requests.Session() as s:
        answers = [call(s, gw, 100 + i, 1) for i in range(ALONE)]
        stats = pool_stats(gw, "rsv")
        assert stats["reserved_batches"] - before == ALONE, stats
        answers += [call(s, gw, 200 + i, 4) for i in range(ALONE)]
        answers += [call(s, gw, 300 + i, 2) for i in range(ALONE)]
    check_answers(answers)
    after = pool_stats(gw, "rsv")
    assert after["reserved_batches"] == stats["reserved_batches"], "classes 4 and 2 ran elsewhere"
    assert metric(gw) == after["reserved_batches"]


def low_client(gw, first_seed, stop, answers):
    with requests.Session() as s:
        seed = first_seed
        while not stop.is_set():
            answers.append(call(s, gw, seed, 4))
            seed += 1


def test_under_a_low_class_load_both_classes_are_answered_right_and_nothing_is_stopped(gw):
    before = pool_stats(gw, "rsv")
    stop = threading.Event()
    low, high = [], []
    with cf.ThreadPoolExecutor(LOW_CLIENTS) as pool:
        lows = [pool.submit(low_client, gw, c * 1_000_000, stop, low) for c in range(LOW_CLIENTS)]
        try:
            with requests.Session() as s:
                high = [call(s, gw, 10_000_000 + i, 1) for i in range(HIGH)]
        finally:
            stop.set()
        for f in lows:
            f.result()
    assert low and high
    check_answers(low + high)
    stats = pool_stats(gw, "rsv")
    reserved = stats["reserved_batches"] - before["reserved_batches"]
    assert 0 < reserved <= HIGH, stats
    assert stats["executions"] - before["executions"] >= reserved, "reserved batches count as executions too"
    assert stats["errors"] == 0 and stats["rejected"] == 0 and stats["preemptions"] == 0, stats
    assert stats["queue_depth"] == 0 and stats["in_flight"] == 0, stats
