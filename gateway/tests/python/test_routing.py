"""Routing policies on the real binary and models: cascade, budgets,
shedding, weighted splits and device fallback."""

import json

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import Reference, infer_body, output, write_config

MODELS_TOML = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
batching = { max_batch_size = 16, max_queue_delay_us = 200 }
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true
batching = { max_batch_size = 16, max_queue_delay_us = 200 }
pools = [{ name = "gpu", device = "cuda" }, { name = "cpu", device = "cpu" }]
[[models]]
name = "synth-heavy"
path = "{models}/synth-heavy.onnx"
batching = { max_batch_size = 1, queue_capacity = 64 }
"""

ROUTES_TOML = """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 200, max = 1000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }

[[routes]]
name = "split"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "weighted", weights = [{ model = "digits-cheap", weight = 3 }, { model = "digits-heavy", weight = 1 }] }

[[routes]]
name = "strict"
models = ["synth-heavy"]
budget_ms = { default = 1, max = 5000 }
policy = { type = "latency_budget", shed_margin = 0.0 }

[[routes]]
name = "heavy-only"
models = ["digits-heavy"]
"""


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("routing"), MODELS_TOML + ROUTES_TOML))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def digits():
    data = json.loads((MODELS / "digits-test.json").read_text())
    return np.asarray(data["X"], np.float32), np.asarray(data["y"])


def post(gw, route, body, headers=None):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=body, headers=headers or {}, timeout=30)


def test_cascade_answers_cheap_when_confident_and_heavy_otherwise(routed, digits):
    x, _ = digits
    ref = Reference("digits-cheap", "digits-heavy")
    _, cheap_probs = ref.run("digits-cheap", x)
    top = cheap_probs.max(axis=1)
    confident = np.flatnonzero(top >= 0.85)[:15]
    unsure = np.flatnonzero(top <= 0.75)[:15]
    assert len(confident) >= 10 and len(unsure) >= 10
    for i, expect_model in [(i, "digits-cheap") for i in confident] + [(i, "digits-heavy") for i in unsure]:
        r = post(routed, "digits", infer_body(x[i : i + 1], outputs=["label"]))
        assert r.status_code == 200, r.text
        assert r.headers["x-switchyard-model"] == expect_model, (i, top[i])
        reason = "cascade_confident" if expect_model == "digits-cheap" else "cascade_escalate"
        assert r.headers["x-switchyard-reason"] == reason
        assert [o["name"] for o in r.json()["outputs"]] == ["label"], "the confidence output is not leaked"
        label, _ = ref.run(expect_model, x[i : i + 1])
        assert output(r.json(), "label") == label.tolist()
        assert r.json()["parameters"]["switchyard_model"] == expect_model


def test_cascade_multi_row_escalates_when_any_row_is_unsure(routed, digits):
    x, _ = digits
    _, cheap_probs = Reference("digits-cheap").run("digits-cheap", x)
    top = cheap_probs.max(axis=1)
    rows = x[[int(np.flatnonzero(top >= 0.9)[0]), int(np.flatnonzero(top <= 0.7)[0])]]
    r = post(routed, "digits", infer_body(rows))
    assert r.status_code == 200, r.text
    assert r.headers["x-switchyard-model"] == "digits-heavy"


def test_budget_header_is_clamped_and_reported(routed):
    body = infer_body(np.zeros((1, 64)))
    r = post(routed, "digits", body)
    assert r.headers["x-switchyard-budget-ms"] == "200"
    r = post(routed, "digits", body, {"x-latency-budget-ms": "99999"})
    assert r.status_code == 200 and r.headers["x-switchyard-budget-ms"] == "1000"
    r = post(routed, "digits", infer_body(np.zeros((1, 64)), parameters={"timeout": 50_000}))
    assert r.status_code == 200 and r.headers["x-switchyard-budget-ms"] == "50"


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5", ""])
def test_invalid_budget_header_is_400(routed, value):
    r = post(routed, "digits", infer_body(np.zeros((1, 64))), {"x-latency-budget-ms": value})
    assert r.status_code == 400, r.text
    assert "x-latency-budget-ms" in r.json()["error"]


def test_invalid_timeout_parameter_is_400(routed):
    r = post(routed, "digits", infer_body(np.zeros((1, 64)), parameters={"timeout": "soon"}))
    assert r.status_code == 400 and "timeout" in r.json()["error"]


def test_impossible_budget_is_shed_with_retry_after(routed):
    # synth-heavy needs >1 ms per row on one thread (prior: 2 ms), so a 1 ms
    # budget with shed_margin 0 can never fit: deterministic 429.
    for _ in range(3):
        r = post(routed, "strict", infer_body(np.zeros((1, 64))))
        assert r.status_code == 429, r.text
        assert int(r.headers["retry-after"]) >= 1
        assert "shed" in r.json()["error"]
    r = post(routed, "strict", infer_body(np.zeros((1, 64))), {"x-latency-budget-ms": "2000"})
    assert r.status_code == 200, r.text
    assert r.headers["x-switchyard-reason"] == "budget_fit"


def test_weighted_split_roughly_respects_weights(routed):
    body = infer_body(np.zeros((1, 64)))
    models = [post(routed, "split", body).headers["x-switchyard-model"] for _ in range(200)]
    cheap = models.count("digits-cheap") / len(models)
    assert 0.6 <= cheap <= 0.9, cheap
    assert set(models) == {"digits-cheap", "digits-heavy"}


def test_missing_cuda_pool_falls_back_to_cpu(routed):
    for _ in range(3):
        r = post(routed, "heavy-only", infer_body(np.zeros((1, 64))))
        assert r.status_code == 200, r.text
        assert r.headers["x-switchyard-device"] == "cpu"
        assert r.headers["x-switchyard-reason"] == "fallback"
        assert r.json()["parameters"]["switchyard_pool"] == "cpu"


def test_decisions_are_counted_in_admin_stats(routed):
    post(routed, "heavy-only", infer_body(np.zeros((1, 64))))
    stats = requests.get(f"http://127.0.0.1:{routed.admin_port}/admin/stats", timeout=10).json()
    rows = [d for d in stats["decisions"] if d["route"] == "heavy-only"]
    assert rows and rows[0]["model"] == "digits-heavy" and rows[0]["device"] == "cpu"
    assert sum(d["count"] for d in rows) >= 1
