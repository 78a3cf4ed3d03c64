"""A request is validated completely before the cache answers it or it joins
identical in-flight requests (issue 24, items 4 and 14): an invalid latency
budget (`x-latency-budget-ms`, `parameters.timeout`) gets its 400 on a
cached body too, exact-repeat replay included; and an error that belongs to
one request (its invalid budget, a shed caused by its own tiny budget) never
reaches identical valid requests that waited for it."""

import signal
import threading
import time

import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import infer_body

CONFIG = f"""
[cache]
l1_max_bytes = "16MiB"
REDIS

[[models]]
name = "digits-heavy"
path = "{MODELS}/digits-heavy.onnx"
batching = {{ max_batch_size = 64, max_queue_delay_us = QUEUE_DELAY, idle_dispatch = IDLE_DISPATCH }}
[[models]]
name = "synth-heavy"
path = "{MODELS}/synth-heavy.onnx"
batching = {{ max_batch_size = 1, queue_capacity = 64 }}

[[routes]]
name = "digits"
models = ["digits-heavy"]
budget_ms = {{ default = 1000, max = 10000 }}

[[routes]]
name = "strict"
models = ["synth-heavy"]
budget_ms = {{ default = 1, max = 5000 }}
policy = {{ type = "latency_budget", shed_margin = 0.0 }}
"""


def start(tmp_path, name, redis=None, queue_delay_us=200, hold=False):
    """`hold`: the batcher waits the whole queue delay even on an idle pool
    (`idle_dispatch = false`), so a test can have requests arrive while the
    first one is in flight."""
    l2 = f'redis = {{ url = "{redis}", timeout_ms = 1000, breaker_failures = 100 }}' if redis else ""
    path = tmp_path / f"{name}.toml"
    path.write_text(CONFIG.replace("REDIS", l2).replace("QUEUE_DELAY", str(queue_delay_us))
                    .replace("IDLE_DISPATCH", "false" if hold else "true"))
    return Gateway(config=path)


def body(seed, rows=16, parameters=None):
    data = [[float((seed * 31 + r * 13 + i * 7) % 17) for i in range(64)] for r in range(rows)]
    return infer_body(data, parameters=parameters)


def post(gw, payload, headers=None, route="digits"):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=payload, headers=headers or {}, timeout=30)


INVALID_HEADERS = ["-1", "abc", "0", "", "1.5"]


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    gw = start(tmp_path_factory.mktemp("admission"), "cached")
    yield gw
    gw.stop()


def test_an_invalid_budget_header_is_refused_on_a_replayed_body(cached):
    payload = body(1)
    assert post(cached, payload).headers["x-cache"] == "miss"
    assert post(cached, payload).headers["x-cache"] == "hit-l1", "the exact repeat is replayed"
    for value in INVALID_HEADERS:
        r = post(cached, payload, {"x-latency-budget-ms": value})
        assert r.status_code == 400, (value, r.status_code, r.headers.get("x-cache"))
        assert "x-latency-budget-ms" in r.json()["error"]


def test_an_invalid_budget_is_refused_on_a_cached_body(cached):
    payload = body(2)
    assert post(cached, payload).headers["x-cache"] == "miss"
    # Other bytes for the same tensors (an id): the full path, an L1 hit.
    with_id = {**payload, "id": "other"}
    assert post(cached, with_id).headers["x-cache"] == "hit-l1"
    timed = {**payload, "parameters": {"timeout": 500_000}}
    assert post(cached, timed).headers["x-cache"] == "hit-l1", "timeout is not part of the key"
    for value in INVALID_HEADERS:
        r = post(cached, with_id, {"x-latency-budget-ms": value})
        assert r.status_code == 400, (value, r.status_code, r.headers.get("x-cache"))
    for value in ["x", -5, True, [1]]:
        r = post(cached, {**payload, "parameters": {"timeout": value}})
        assert r.status_code == 400, (value, r.status_code, r.headers.get("x-cache"))
        assert "timeout" in r.json()["error"]


def run_together(first, others, delay=0.3):
    """Starts `first`, then after `delay` each of `others` (name -> call);
    returns name -> response."""
    results = {}

    def run(name, call):
        results[name] = call()

    threads = [threading.Thread(target=run, args=first)]
    threads[0].start()
    time.sleep(delay)
    for item in others.items():
        threads.append(threading.Thread(target=run, args=item))
        threads[-1].start()
    for t in threads:
        t.join(timeout=30)
    return results


def test_an_invalid_request_does_not_join_a_valid_computation(tmp_path):
    # The batcher holds the leader's rows up to 1 s waiting for more, so the
    # identical requests arrive while it is in flight.
    gw = start(tmp_path, "join", queue_delay_us=1_000_000, hold=True)
    try:
        payload = body(3)
        others = {f"bad{v}": (lambda v=v: post(gw, payload, {"x-latency-budget-ms": v})) for v in ["-5", "abc"]}
        others["bad-timeout"] = lambda: post(gw, {**payload, "parameters": {"timeout": -5}})
        results = run_together(("leader", lambda: post(gw, payload)), others)
        assert results["leader"].status_code == 200, results["leader"].text
        for name in others:
            assert results[name].status_code == 400, (name, results[name].status_code)
    finally:
        gw.stop()


def test_an_invalid_leader_does_not_fail_identical_valid_requests(tmp_path, redis_server):
    """A stalled Redis holds whoever leads in its L2 lookup (1 s), so the
    valid requests sent after the invalid one would wait for it."""
    gw = start(tmp_path, "leader", redis=redis_server.url)
    redis_server.proc.send_signal(signal.SIGSTOP)
    try:
        payload = body(4)
        valid = {f"valid{i}": (lambda: post(gw, payload)) for i in range(3)}
        results = run_together(("bad", lambda: post(gw, payload, {"x-latency-budget-ms": "-5"})), valid)
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
        gw.stop()
    assert results["bad"].status_code == 400
    for name in valid:
        assert results[name].status_code == 200, (name, results[name].text)


def test_a_shed_caused_by_the_leaders_tiny_budget_is_not_shared(tmp_path, redis_server):
    """The leader's 1 ms budget is spent in the stalled L2 lookup, so the
    policy sheds it (429); requests that asked for 5 s and waited for it
    compute their own answer instead of inheriting the shed."""
    gw = start(tmp_path, "shed", redis=redis_server.url)
    redis_server.proc.send_signal(signal.SIGSTOP)
    try:
        payload = body(5, rows=1)
        roomy = {f"roomy{i}": (lambda: post(gw, payload, {"x-latency-budget-ms": "5000"}, "strict")) for i in range(3)}
        results = run_together(("tiny", lambda: post(gw, payload, route="strict")), roomy)
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
        gw.stop()
    assert results["tiny"].status_code == 429, results["tiny"].text
    for name in roomy:
        assert results[name].status_code == 200, (name, results[name].status_code, results[name].text)
