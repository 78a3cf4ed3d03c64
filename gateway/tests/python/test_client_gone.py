"""Plain (non-streamed) infer calls whose client leaves before the answer:
their queued work is not computed. 40 clients each send a 64-row request to
a compute-bound model (about 90 ms of work each, 3.6 s in all on one
worker) and hang up after 50 ms; the pool executes a small part of those
rows and counts the rest as cancelled, and the access log records each as
499 `client_gone`."""

import json
import socket
import time

import numpy as np
import pytest

from conftest import Gateway
from routing_util import infer_body, write_config
from sse_util import pause, pool_stats, resume, wait_for

ROWS = 64
CLIENTS = 40

CONFIG = """
[[models]]
name = "synth-heavy"
path = "{models}/synth-heavy.onnx"
batching = { max_batch_size = 64, max_queue_delay_us = 100, queue_capacity = 4096 }
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]

[[routes]]
name = "heavy"
models = ["synth-heavy"]
budget_ms = { default = 60000, max = 60000 }
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = Gateway(config=write_config(tmp_path_factory.mktemp("gone"), CONFIG))
    yield g
    g.stop()


def send_and_leave(gw, seed):
    """A complete infer request on a raw connection, which is closed before any answer."""
    rows = np.random.default_rng(seed).uniform(0, 16, size=(ROWS, 64))
    body = json.dumps(infer_body(rows)).encode()
    sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    sock.sendall(b"POST /v2/models/heavy/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def settled(gw):
    """The pool's stats once its queue is empty and nothing moved for 0.3 s."""
    first = pool_stats(gw, "synth-heavy")
    time.sleep(0.3)
    second = pool_stats(gw, "synth-heavy")
    quiet = first == second and second["queue_depth"] == 0 and second["in_flight"] == 0
    return second if quiet else None


def test_work_of_clients_that_left_is_not_computed(gw):
    before = pool_stats(gw, "synth-heavy")
    sockets = [send_and_leave(gw, seed) for seed in range(CLIENTS)]
    time.sleep(0.05)
    for s in sockets:
        s.close()
    after = wait_for(lambda: settled(gw), "the pool to settle", timeout=30)
    executed = after["executed_rows"] - before["executed_rows"]
    cancelled = after["cancelled"] - before["cancelled"]
    assert executed <= CLIENTS * ROWS // 4, f"{executed} of {CLIENTS * ROWS} rows computed for clients that left"
    assert cancelled >= CLIENTS * 3 // 4, f"only {cancelled} of {CLIENTS} requests cancelled"
    gw.log.flush()
    log = gw.log_path.read_text()
    assert log.count('status=499 error="client_gone"') >= CLIENTS * 3 // 4


def test_work_queued_on_a_paused_pool_by_clients_that_left_is_not_computed(gw):
    """Requests queued while the pool is paused, whose clients hang up: on
    resume, none of their rows is computed (the promise of
    docs/src/reference/admin-api.md, "Pausing a pool")."""
    before = pool_stats(gw, "synth-heavy")
    pause(gw, "synth-heavy")
    try:
        sockets = [send_and_leave(gw, 1000 + seed) for seed in range(20)]
        wait_for(lambda: pool_stats(gw, "synth-heavy")["queue_depth"] >= 20, "the requests to queue")
        for s in sockets:
            s.close()
        time.sleep(0.2)  # several client checks (every 20 ms) while still paused
    finally:
        resume(gw, "synth-heavy")
    after = wait_for(lambda: settled(gw), "the pool to settle", timeout=30)
    executed = after["executed_rows"] - before["executed_rows"]
    cancelled = after["cancelled"] - before["cancelled"]
    assert executed == 0, f"{executed} rows computed for 20 clients that left while the pool was paused"
    assert cancelled == 20, f"{cancelled} of 20 abandoned requests cancelled"


def test_clients_that_stay_still_get_their_answer(gw):
    import requests
    rows = np.random.default_rng(99).uniform(0, 16, size=(ROWS, 64))
    r = requests.post(f"{gw.base}/v2/models/heavy/infer", json=infer_body(rows), timeout=30)
    assert r.status_code == 200
    assert next(o for o in r.json()["outputs"] if o["name"] == "label")["shape"] == [ROWS]
