"""Degraded answers are not cached (issue 24, item 5). An answer a policy gave
only because of pressure, from another model than it gives without pressure
(the cheap model because the heavy one would miss a tight budget:
`cascade_no_budget`, `latency_budget` choosing a less accurate model; or
because the preferred model was unavailable: `fallback`), is neither stored
in L1 nor written to Redis, and identical in-flight requests that asked with
a larger budget do not take it over. A budget chooses how fast, not what."""

import json
import signal
import threading
import time

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import Reference, infer_body

MODELS_TOML = f"""
[[models]]
name = "digits-cheap"
path = "{MODELS}/digits-cheap.onnx"
warmup = true
batching = {{ max_batch_size = 16, max_queue_delay_us = 200 }}
[[models]]
name = "digits-heavy"
path = "{MODELS}/digits-heavy.onnx"
batching = {{ max_batch_size = 16, max_queue_delay_us = 200 }}
HEAVY_POOLS
[[models]]
name = "synth-heavy"
path = "{MODELS}/synth-heavy.onnx"
warmup = true
batching = {{ max_batch_size = 4, max_queue_delay_us = 200 }}
"""

ROUTES_TOML = """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 1000, max = 10000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }

[[routes]]
name = "accurate"
models = ["digits-cheap", "synth-heavy"]
budget_ms = { default = 1000, max = 10000 }
policy = { type = "latency_budget", shed_margin = inf }

[[routes]]
name = "pinned"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "fixed", model = "digits-heavy" }
"""

TIGHT = {"x-latency-budget-ms": "1"}
ROOMY = {"x-latency-budget-ms": "10000"}


def config_text(redis=None, heavy_pools="", l2=""):
    cache = "[cache]\nl1_max_bytes = \"16MiB\"\n"
    if redis:
        cache += f'redis = {{ url = "{redis}", {l2 or "timeout_ms = 500"} }}\n'
    return cache + MODELS_TOML.replace("HEAVY_POOLS", heavy_pools) + ROUTES_TOML


def start(tmp_path, name, **kw):
    path = tmp_path / f"{name}.toml"
    path.write_text(config_text(**kw))
    return Gateway(config=path), path


@pytest.fixture(scope="module")
def unsure_rows():
    """Test digits the cheap model is unsure about (top probability <= 0.6):
    with time to spare the cascade escalates them to the heavy model."""
    x = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
    _, probs = Reference("digits-cheap").run("digits-cheap", x)
    return x[np.flatnonzero(probs.max(axis=1) <= 0.6)]


def post(gw, route, rows, headers=None):
    r = requests.post(f"{gw.base}/v2/models/{route}/infer", json=infer_body(rows), headers=headers or {}, timeout=30)
    assert r.status_code == 200, r.text
    return r


def how(r):
    return r.headers["x-switchyard-model"], r.headers["x-switchyard-reason"], r.headers["x-cache"]


def test_a_cascade_no_budget_answer_is_not_served_to_a_roomier_budget(tmp_path, unsure_rows):
    gw, _ = start(tmp_path, "no-budget")
    try:
        row = unsure_rows[0:1]
        assert how(post(gw, "digits", row, TIGHT)) == ("digits-cheap", "cascade_no_budget", "miss")
        assert how(post(gw, "digits", row, TIGHT)) == ("digits-cheap", "cascade_no_budget", "miss"), \
            "the degraded answer was cached"
        assert how(post(gw, "digits", row, ROOMY)) == ("digits-heavy", "cascade_escalate", "miss")
        # The accurate answer is cached, and served fast to any budget.
        assert how(post(gw, "digits", row, ROOMY)) == ("digits-heavy", "cascade_escalate", "hit-l1")
        assert how(post(gw, "digits", row, TIGHT)) == ("digits-heavy", "cascade_escalate", "hit-l1")
    finally:
        gw.stop()


def test_a_less_accurate_model_chosen_for_a_tight_budget_is_not_cached(tmp_path, unsure_rows):
    gw, _ = start(tmp_path, "tight-fit")
    try:
        # Latency statistics for both models (without them their estimates
        # tie and the more accurate model is chosen even for 1 ms). The
        # accurate model (synth-heavy) needs more than 1 ms per row. Both
        # are warmed up at start, so these first measured runs are not
        # ONNX Runtime's lazy first run (a cold digits-cheap run could
        # measure slower than synth-heavy's on a busy machine).
        post(gw, "digits", unsure_rows[10:11], ROOMY)
        assert post(gw, "accurate", unsure_rows[11:12], ROOMY).headers["x-switchyard-model"] == "synth-heavy"
        row = unsure_rows[1:2]
        tight = post(gw, "accurate", row, TIGHT)
        assert tight.headers["x-switchyard-model"] == "digits-cheap", how(tight)
        assert how(post(gw, "accurate", row, ROOMY)) == ("synth-heavy", "budget_fit", "miss")
        assert how(post(gw, "accurate", row, TIGHT)) == ("synth-heavy", "budget_fit", "hit-l1")
    finally:
        gw.stop()


def test_a_fallback_answer_is_not_served_once_the_model_is_back(tmp_path, unsure_rows):
    # The pinned heavy model has only a CUDA pool, which this build lacks:
    # the route falls back to the cheap model.
    gw, path = start(tmp_path, "fallback", heavy_pools='pools = [{ name = "gpu", device = "cuda" }]')
    try:
        row = unsure_rows[2:3]
        assert how(post(gw, "pinned", row)) == ("digits-cheap", "fallback", "miss")
        assert how(post(gw, "pinned", row)) == ("digits-cheap", "fallback", "miss"), "the fallback was cached"
        # The heavy model comes back (a CPU pool; the cache key is unchanged).
        path.write_text(config_text())
        reload = requests.post(f"{gw.admin}/admin/reload", timeout=60)
        assert reload.status_code == 200, reload.text
        assert how(post(gw, "pinned", row)) == ("digits-heavy", "fixed", "miss")
        assert how(post(gw, "pinned", row)) == ("digits-heavy", "fixed", "hit-l1")
    finally:
        gw.stop()


def test_degraded_answers_are_not_written_to_redis(tmp_path, redis_server, unsure_rows):
    a, _ = start(tmp_path, "a", redis=redis_server.url)
    b, _ = start(tmp_path, "b", redis=redis_server.url)
    try:
        row = unsure_rows[3:4]
        assert how(post(a, "digits", row, TIGHT))[:2] == ("digits-cheap", "cascade_no_budget")
        # A cacheable answer after it: once it is in Redis, the L2 writer
        # has handled everything queued before it.
        post(a, "digits", unsure_rows[4:5], ROOMY)
        deadline = time.monotonic() + 5
        while redis_server.dbsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert redis_server.dbsize() == 1, "only the escalated answer is in Redis"
        assert how(post(b, "digits", row, ROOMY)) == ("digits-heavy", "cascade_escalate", "miss")
    finally:
        a.stop()
        b.stop()


def test_coalesced_requests_with_roomier_budgets_do_not_take_a_degraded_answer(tmp_path, redis_server, unsure_rows):
    """A stalled Redis holds the leader in its L2 lookup (1 s) while the
    others join it; the leader's 1 ms budget is then spent and its answer is
    the cheap model's (`cascade_no_budget`). Requests that asked for 10 s
    compute their own answer; one that asked for as little shares it."""
    gw, _ = start(tmp_path, "coalesce", redis=redis_server.url,
                  l2="timeout_ms = 1000, breaker_failures = 100")
    row = unsure_rows[5:6]
    results = {}

    def call(name, headers):
        results[name] = post(gw, "digits", row, headers)

    redis_server.proc.send_signal(signal.SIGSTOP)
    try:
        leader = threading.Thread(target=call, args=("leader", TIGHT))
        leader.start()
        time.sleep(0.3)
        others = [threading.Thread(target=call, args=(f"roomy{i}", ROOMY)) for i in range(3)]
        others.append(threading.Thread(target=call, args=("tight", TIGHT)))
        for t in others:
            t.start()
        for t in [leader, *others]:
            t.join(timeout=30)
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
        gw.stop()
    assert how(results["leader"])[:2] == ("digits-cheap", "cascade_no_budget")
    assert how(results["tight"])[:2] == ("digits-cheap", "cascade_no_budget")
    for i in range(3):
        assert how(results[f"roomy{i}"])[:2] == ("digits-heavy", "cascade_escalate"), i
