"""V2 upstreams on the real binary: routes whose models run on another V2
server (the FastAPI baseline, a second Switchyard, small fake servers),
through every routing feature: plain routes, cascades across a local and
an upstream model, the cache, failover when an address dies, budgets with
a slow upstream, garbage answers, and signatures read from the upstream."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests
import tritonclient.http as httpclient

from conftest import MODELS, Gateway, free_port
from proxy_util import fastapi_baseline, upstream_app
from routing_util import Reference, infer_body, output, write_config

LOCAL = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true
batching = { max_batch_size = 16, max_queue_delay_us = 200 }
"""


@pytest.fixture(scope="module")
def digits():
    data = json.loads((MODELS / "digits-test.json").read_text())
    return np.asarray(data["X"], np.float32), np.asarray(data["y"])


@pytest.fixture(scope="module")
def fastapi():
    server = fastapi_baseline("digits-heavy")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def front(fastapi, tmp_path_factory):
    config = LOCAL + f"""
[cache]

[[upstreams]]
name = "fastapi"
kind = "v2"
addrs = ["{fastapi.addr}"]
health = {{ interval_ms = 300 }}
models = [{{ name = "heavy-remote", model = "digits-heavy", cost = 10.0, quality = 10 }}]

[[routes]]
name = "remote"
models = ["heavy-remote"]
cache = {{ enabled = false }}

[[routes]]
name = "digits"
models = ["digits-cheap", "heavy-remote"]
budget_ms = {{ default = 2000 }}
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
cache = {{ enabled = false }}

[[routes]]
name = "cached"
models = ["heavy-remote"]

[[routes]]
name = "digits-seq"
models = ["digits-cheap", "heavy-remote"]
budget_ms = {{ default = 2000 }}
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
draft = {{ mode = "sequential" }}
cache = {{ enabled = false }}
"""
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("v2up"), config))
    yield gw
    gw.stop()


def post(gw, route, body, headers=None):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=body, headers=headers or {}, timeout=30)


def test_route_over_a_v2_upstream_with_tritonclient(front, digits):
    x, _ = digits
    ref_label, ref_probs = Reference("digits-heavy").run("digits-heavy", x[:8])
    client = httpclient.InferenceServerClient(url=front.url)
    meta = client.get_model_metadata("remote")
    assert meta["inputs"][0]["name"] == "X" and meta["outputs"][1]["shape"] == [-1, 10]
    for binary in (True, False):
        inp = httpclient.InferInput("X", [8, 64], "FP32")
        inp.set_data_from_numpy(x[:8], binary_data=binary)
        outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("label", "probabilities")]
        result = client.infer("remote", [inp], outputs=outs)
        np.testing.assert_array_equal(result.as_numpy("label"), ref_label)
        np.testing.assert_allclose(result.as_numpy("probabilities"), ref_probs, rtol=1e-5, atol=1e-6)
        params = result.get_response()["parameters"]
        assert (params["switchyard_model"], params["switchyard_device"], params["switchyard_pool"]) == (
            "heavy-remote", "upstream", "fastapi")
    assert client.is_model_ready("remote")


def test_cascade_across_a_local_cheap_and_an_upstream_heavy_model(front, digits):
    x, _ = digits
    ref = Reference("digits-cheap", "digits-heavy")
    _, cheap_probs = ref.run("digits-cheap", x[:40])
    heavy_label, _ = ref.run("digits-heavy", x[:40])
    seen = set()
    for i in range(40):
        r = post(front, "digits", infer_body(x[i:i + 1]))
        assert r.status_code == 200, r.text
        confident = cheap_probs[i].max() >= 0.8
        model, device = r.headers["x-switchyard-model"], r.headers["x-switchyard-device"]
        if confident:
            assert (model, device, r.headers["x-switchyard-reason"]) == ("digits-cheap", "cpu", "cascade_confident")
        else:
            assert (model, device, r.headers["x-switchyard-reason"]) == ("heavy-remote", "upstream", "cascade_escalate")
            assert output(r.json(), "label") == [int(heavy_label[i])]
        seen.add(model)
    assert seen == {"digits-cheap", "heavy-remote"}, "the sample has both kinds of rows"


def test_the_cache_answers_upstream_routes(front, fastapi, digits):
    x, _ = digits
    body = infer_body(x[3:4])
    first, second = post(front, "cached", body), post(front, "cached", body)
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("miss", "hit-l1")
    assert first.json()["outputs"] == second.json()["outputs"]
    stats = requests.get(f"http://127.0.0.1:{front.admin_port}/admin/stats", timeout=5).json()
    up = stats["upstreams"][0]
    assert up["models"][0]["signature"] == "known"
    assert up["addresses"][0]["requests"] >= 1 and up["addresses"][0]["latency_ms"] > 0


def test_bad_input_is_refused_before_the_upstream(front):
    r = post(front, "remote", {"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})
    assert r.status_code == 400, r.text


def switchyard_upstream():
    """A second Switchyard with the built-in config (digits-heavy and others)."""
    return Gateway()


def test_killed_upstream_during_a_run_loses_no_request(tmp_path, digits):
    x, _ = digits
    a, b = switchyard_upstream(), switchyard_upstream()
    config = f"""
[[upstreams]]
name = "pair"
kind = "v2"
addrs = ["{a.url}", "{b.url}"]
health = {{ interval_ms = 200 }}
models = [{{ name = "heavy-remote", model = "digits-heavy" }}]

[[routes]]
name = "remote"
models = ["heavy-remote"]
"""
    front = Gateway(config=write_config(tmp_path, config))
    try:
        total, done = 600, []

        def one(i):
            with requests.Session() as s:
                r = s.post(f"{front.base}/v2/models/remote/infer", json=infer_body(x[i % len(x):i % len(x) + 1]),
                           timeout=10)
            done.append(i)
            return r.status_code, r.text

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(one, i) for i in range(total)]
            while len(done) < total // 3:
                time.sleep(0.01)
            a.proc.kill()
            results = [f.result() for f in futures]
        failed = [r for r in results if r[0] != 200]
        assert not failed, f"{len(failed)} of {total} failed, e.g. {failed[:2]}"
        stats = requests.get(f"http://127.0.0.1:{front.admin_port}/admin/stats", timeout=5).json()
        addresses = {x["addr"]: x for x in stats["upstreams"][0]["addresses"]}
        assert addresses[a.url]["requests"] > 20 and addresses[b.url]["requests"] > 20, addresses
        assert not addresses[a.url]["usable"]
    finally:
        front.stop()
        a.stop()
        b.stop()


def test_slow_upstream_respects_the_budget(tmp_path, digits):
    x, _ = digits
    slow = upstream_app("v2-slow", 5000)
    config = LOCAL + f"""
[[upstreams]]
name = "slow"
kind = "v2"
addrs = ["{slow.addr}"]
models = [{{ name = "slow-remote", model = "digits", quality = 10 }}]

[[routes]]
name = "slow-only"
models = ["slow-remote"]
budget_ms = {{ default = 300 }}

[[routes]]
name = "either"
models = ["digits-cheap", "slow-remote"]
budget_ms = {{ default = 300 }}
policy = {{ type = "latency_budget" }}
"""
    gw = Gateway(config=write_config(tmp_path, config))
    try:
        started = time.monotonic()
        r = post(gw, "slow-only", infer_body(x[:1]))
        elapsed = time.monotonic() - started
        assert r.status_code == 504, r.text
        assert "budget" in r.json()["error"] or "within" in r.json()["error"], r.text
        assert elapsed < 2.5, f"{elapsed:.2f}s for a 300 ms budget (the upstream takes 5 s)"
        answers = []
        for i in range(6):
            started = time.monotonic()
            r = post(gw, "either", infer_body(x[i:i + 1]))
            answers.append((r.status_code, r.headers.get("x-switchyard-model"), time.monotonic() - started))
        assert all(t < 2.5 for _, _, t in answers), answers
        assert all(s in (200, 504) for s, _, _ in answers), answers
        assert answers[-1][:2] == (200, "digits-cheap"), f"the slow upstream is avoided once measured: {answers}"
    finally:
        gw.stop()
        slow.stop()


def test_garbage_from_a_v2_upstream_is_a_clear_502(tmp_path, digits):
    x, _ = digits
    bad = upstream_app("v2-garbage")
    config = f"""
[[upstreams]]
name = "bad"
kind = "v2"
addrs = ["{bad.addr}"]
models = [{{ name = "bad-remote", model = "digits" }}]
"""
    gw = Gateway(config=write_config(tmp_path, config))
    try:
        for _ in range(3):
            r = post(gw, "bad-remote", infer_body(x[:1]))
            assert r.status_code == 502, r.text
            assert "invalid V2 response" in r.json()["error"], r.text
        assert gw.alive()
        assert requests.get(f"{gw.base}/v2/models/bad-remote", timeout=5).status_code == 200
    finally:
        gw.stop()
        bad.stop()


def test_upstream_down_at_start_is_used_once_it_comes_up(tmp_path, digits):
    x, _ = digits
    port = free_port()
    config = LOCAL + f"""
[[upstreams]]
name = "late"
kind = "v2"
addrs = ["127.0.0.1:{port}"]
health = {{ interval_ms = 200 }}
models = [{{ name = "late-remote", model = "digits" }}]

[[routes]]
name = "late"
models = ["digits-cheap", "late-remote"]
policy = {{ type = "fixed", model = "late-remote" }}
"""
    gw = Gateway(config=write_config(tmp_path, config))
    late = None
    try:
        r = post(gw, "late", infer_body(x[:1]))
        assert r.status_code == 200 and r.headers["x-switchyard-model"] == "digits-cheap", "falls back while down"
        assert requests.get(f"{gw.base}/v2/models/late/ready", timeout=5).status_code == 503
        late = upstream_app("v2-slow", 0, port=port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = post(gw, "late", infer_body(x[:1]))
            if r.headers.get("x-switchyard-model") == "late-remote":
                break
            time.sleep(0.1)
        assert r.headers.get("x-switchyard-model") == "late-remote", r.headers
        assert output(r.json(), "label") == [7]
    finally:
        gw.stop()
        if late:
            late.stop()


def test_an_incompatible_upstream_model_fails_start_up(tmp_path):
    other = upstream_app("v2-other")
    config = LOCAL + f"""
[[upstreams]]
name = "other"
kind = "v2"
addrs = ["{other.addr}"]
models = [{{ name = "other-remote", model = "digits" }}]

[[routes]]
name = "mixed"
models = ["digits-cheap", "other-remote"]
"""
    try:
        with pytest.raises(RuntimeError) as err:
            Gateway(config=write_config(tmp_path, config))
        assert "routes[0].models[1]" in str(err.value) and "input" in str(err.value), str(err.value)
    finally:
        other.stop()


def test_draft_then_final_with_a_local_draft_and_an_upstream_final(front, digits):
    """Streaming over a cascade route: the local cheap model drafts, the
    heavy model on the upstream gives the final of unconfident rows. The
    route runs its pair sequentially: in parallel mode a heavy answer that
    comes first is the final and the draft is dropped (by design), which on
    a busy machine made this test's draft come and go."""
    from sse_util import Stream

    x, _ = digits
    ref = Reference("digits-cheap", "digits-heavy")
    _, cheap_probs = ref.run("digits-cheap", x[:40])
    heavy_label, _ = ref.run("digits-heavy", x[:40])
    unsure = next(i for i in range(40) if cheap_probs[i].max() < 0.8)
    stream = Stream(front, "digits-seq", infer_body(x[unsure:unsure + 1]))
    try:
        assert stream.response.status_code == 200
        events = stream.all()
    finally:
        stream.close()
    assert [name for name, _ in events] == ["draft", "final"], events
    draft, final = events[0][1], events[1][1]
    assert draft["parameters"]["model"] == "digits-cheap"
    assert (final["parameters"]["model"], final["parameters"]["device"]) == ("heavy-remote", "upstream")
    assert output(final, "label") == [int(heavy_label[unsure])]
