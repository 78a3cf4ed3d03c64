"""Preemption of a running lower-class batch (`batching.preempt`), on the
real binary: under a steady low-class load (`x-priority: 4`) on synth-heavy
(one CPU worker, milliseconds a batch), high-class requests
(`x-priority: 1`) arrive while low batches run. Every request of both
classes is answered 200 with onnxruntime's answer (a preempted low request
runs again, nothing is lost); the model with `preempt = true` counts
preemptions in `/admin/stats` and `switchyard_pool_preemptions_total`, its
twin with `preempt = false` none. No timing is asserted."""

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
name = "on"
path = "{models}/synth-heavy.onnx"
warmup = true
batching = { max_batch_size = 8, queue_capacity = 64, preempt = true }

[[models]]
name = "off"
path = "{models}/synth-heavy.onnx"
warmup = true
batching = { max_batch_size = 8, queue_capacity = 64, preempt = false }
"""

LOW_CLIENTS = 3
ROWS = 4
MAX_HIGH = 100  # high requests at most, per model, until one preempted


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = Gateway(config=write_config(tmp_path_factory.mktemp("preempt"), CONFIG))
    yield g
    g.stop()


def inputs(seed):
    return np.random.default_rng(seed).normal(0, 1, (ROWS, 64)).astype(np.float32)


def call(session, gw, model, seed, priority):
    r = session.post(f"{gw.base}/v2/models/{model}/infer", json=infer_body(inputs(seed)),
                     headers={"x-priority": str(priority)}, timeout=60)
    assert r.status_code == 200, r.text
    out = {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in r.json()["outputs"]}
    return seed, out


def low_client(gw, model, first_seed, stop, answers):
    with requests.Session() as s:
        seed = first_seed
        while not stop.is_set():
            answers.append(call(s, gw, model, seed, 4))
            seed += 1


def high_client(gw, model, answers):
    """High-class requests one after another until the model counts a
    preemption (or MAX_HIGH were sent), then ten more."""
    extra = None
    with requests.Session() as s:
        for i in range(MAX_HIGH):
            answers.append(call(s, gw, model, 10_000_000 + i, 1))
            if extra is None and pool_stats(gw, model)["preemptions"] > 0:
                extra = 10
            if extra is not None:
                extra -= 1
                if extra == 0:
                    return


def mixed_load(gw, model):
    stop = threading.Event()
    low, high = [], []
    with cf.ThreadPoolExecutor(LOW_CLIENTS + 1) as pool:
        lows = [pool.submit(low_client, gw, model, c * 1_000_000, stop, low) for c in range(LOW_CLIENTS)]
        try:
            pool.submit(high_client, gw, model, high).result()
        finally:
            stop.set()
        for f in lows:
            f.result()
    return low, high


def check_answers(answers):
    reference = Reference("synth-heavy")
    for seed, out in answers:
        label, probs = reference.run("synth-heavy", inputs(seed))
        assert np.array_equal(out["label"], label), seed
        np.testing.assert_allclose(out["probabilities"], probs, rtol=1e-4, atol=1e-6)


def metric(gw, model):
    text = requests.get(f"{gw.admin}/metrics", timeout=10).text
    line = next((l for l in text.splitlines()
                 if l.startswith("switchyard_pool_preemptions_total{") and f'model="{model}"' in l), None)
    assert line is not None, "switchyard_pool_preemptions_total is exported"
    return float(line.rsplit(" ", 1)[1])


@pytest.mark.parametrize("model", ["on", "off"])
def test_mixed_classes_are_all_answered_right_and_only_the_preempting_pool_preempts(gw, model):
    low, high = mixed_load(gw, model)
    assert low and high
    check_answers(low + high)
    stats = pool_stats(gw, model)
    assert stats["errors"] == 0 and stats["rejected"] == 0, stats
    assert stats["queue_depth"] == 0 and stats["in_flight"] == 0, stats
    if model == "on":
        assert stats["preemptions"] > 0, stats
    else:
        assert stats["preemptions"] == 0, stats
        assert len(high) == MAX_HIGH
    assert metric(gw, model) == stats["preemptions"]
