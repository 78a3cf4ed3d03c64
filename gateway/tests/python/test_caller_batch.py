"""Batches run on the HTTP thread while the pool is busy (the runtime's
`caller_batch`): a one-thread server under 40 concurrent keep-alive clients
answers every request as onnxruntime does, its requests share batches that
their callers ran (`caller_batches` in `/admin/stats` and
`switchyard_pool_caller_batches_total`), and nothing is left queued; with
`inline_max_us = 0` no caller runs a batch and the worker does it all."""

import concurrent.futures as cf
import json

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import Reference, infer_body, write_config
from sse_util import pool_stats

CLIENTS = 40
PER_CLIENT = 40

CONFIG = """
[server]
threads = 1

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true
# A debug build on a busy machine runs a row slower than the 50 us default;
# the test is about the rule, not the limit.
batching = { inline_max_us = 100000 }

[[models]]
name = "digits-worker"
path = "{models}/digits-cheap.onnx"
warmup = true
batching = { inline_max_us = 0 }
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = Gateway(config=write_config(tmp_path_factory.mktemp("caller-batch"), CONFIG))
    yield g
    g.stop()


def rows():
    x = np.asarray(json.load(open(MODELS / "digits-test.json"))["X"], np.float32)
    return x


def client(port, model, data, start):
    """One keep-alive client sending PER_CLIENT one-row requests."""
    labels = []
    with requests.Session() as s:
        for i in range(PER_CLIENT):
            row = data[(start + i) % len(data)]
            r = s.post(f"http://127.0.0.1:{port}/v2/models/{model}/infer", json=infer_body([row]), timeout=60)
            assert r.status_code == 200, r.text
            labels.append(((start + i) % len(data), r.json()["outputs"][0]["data"][0]))
    return labels


def load(gw, model, data):
    with cf.ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(client, gw.port, model, data, c * PER_CLIENT) for c in range(CLIENTS)]
        return [pair for f in futures for pair in f.result()]


def test_busy_one_thread_server_runs_shared_batches_on_the_callers_thread(gw):
    data = rows()
    expected, _ = Reference("digits-cheap").run("digits-cheap", data)
    for model in ["digits-cheap", "digits-worker"]:
        answers = load(gw, model, data)
        assert len(answers) == CLIENTS * PER_CLIENT
        assert all(label == expected[i] for i, label in answers), f"{model}: a label differs from onnxruntime's"
    mine, worker = pool_stats(gw, "digits-cheap"), pool_stats(gw, "digits-worker")
    assert mine["caller_batches"] > 0, mine
    assert mine["executions"] < mine["requests"], f"requests shared batches: {mine}"
    assert (mine["queue_depth"], mine["in_flight"]) == (0, 0)
    assert worker["caller_batches"] == 0 and worker["inline_runs"] == 0, worker
    metrics = requests.get(f"http://127.0.0.1:{gw.admin_port}/metrics", timeout=10).text
    line = next(
        (l for l in metrics.splitlines()
         if l.startswith("switchyard_pool_caller_batches_total{") and 'model="digits-cheap"' in l),
        None,
    )
    assert line is not None and float(line.rsplit(" ", 1)[1]) == mine["caller_batches"], line
