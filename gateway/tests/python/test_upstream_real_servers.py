"""Real V2 servers as upstream members, on the real binary: MLServer 1.7
and KServe's Python model server, each serving the digits-heavy model
(input X FP32 [N,64], outputs label INT64 [N], probabilities FP32 [N,10])
as an `[[upstreams]]` member: a plain route answers what the server
answers when called directly, a cascade escalates from the local cheap
model to the heavy model on the server, and two server processes behind
one upstream lose no request when one is killed under load.

Switchyard calls V2 upstreams over REST (HTTP/1.1) only, so the servers'
gRPC listeners play no part here. It sends binary tensors to a server
whose `GET /v2` lists `binary_tensor_data`, JSON tensors to one that does
not: MLServer 1.7 has no binary tensor extension (it lists no extensions;
a binary body is answered 500), so it gets JSON (`upstreams[].tensors =
"auto"`, the default)."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import Reference, infer_body, write_config
from v2_servers import infer_json, kserve, mlserver, outputs

LOCAL = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true
"""


@pytest.fixture(scope="module")
def digits():
    data = json.loads((MODELS / "digits-test.json").read_text())
    return np.asarray(data["X"], np.float32), np.asarray(data["y"])


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One MLServer and one KServe server, both serving digits-heavy."""
    started = {}
    try:
        started["mlserver"] = mlserver(tmp_path_factory.mktemp("mlserver"))
        started["kserve"] = kserve()
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture(scope="module")
def front(servers, tmp_path_factory):
    """A gateway with a plain route and a cascade over each server."""
    config = LOCAL
    for name, server in servers.items():
        config += f"""
[[upstreams]]
name = "{name}"
kind = "v2"
addrs = ["{server.addr}"]
health = {{ interval_ms = 300 }}
models = [{{ name = "heavy-{name}", model = "digits-heavy", cost = 10.0, quality = 10 }}]

[[routes]]
name = "plain-{name}"
models = ["heavy-{name}"]
cache = {{ enabled = false }}

[[routes]]
name = "cascade-{name}"
models = ["digits-cheap", "heavy-{name}"]
budget_ms = {{ default = 5000 }}
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
cache = {{ enabled = false }}
"""
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("real-v2"), config))
    yield gw
    gw.stop()


def post(gw, route, x):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=infer_body(x), timeout=30)


def same_outputs(got: dict, want: dict):
    """Same output names, datatypes and values, row by row (a label column
    [N,1] and a vector [N] are the same rows)."""
    assert got.keys() == want.keys(), (got.keys(), want.keys())
    for name, (dtype, values) in want.items():
        assert got[name][0] == dtype, (name, got[name][0], dtype)
        rows = len(values)
        np.testing.assert_array_equal(got[name][1].reshape(rows, -1), values.reshape(rows, -1), err_msg=name)


SERVERS = ["mlserver", "kserve"]


def test_each_server_publishes_the_digits_signature_switchyard_reads(front):
    """Both servers' metadata is read at start-up: the upstream models
    carry the server's signature (MLServer's comes from the ONNX file,
    set by the benchmark runtime at load; KServe's from the model class)."""
    for name in ("mlserver", "kserve"):
        meta = requests.get(f"{front.base}/v2/models/heavy-{name}", timeout=5).json()
        assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [("X", "FP32", [-1, 64])], meta
        assert {(t["name"], t["datatype"], tuple(t["shape"])) for t in meta["outputs"]} == {
            ("label", "INT64", (-1,)), ("probabilities", "FP32", (-1, 10))}, meta


@pytest.mark.parametrize("name", SERVERS)
def test_a_route_on_a_real_server_answers_what_the_server_answers(front, servers, digits, name):
    x, _ = digits
    rows = x[:8]
    direct = outputs(infer_json(servers[name].base, "digits-heavy", rows))
    ref_label, ref_probs = Reference("digits-heavy").run("digits-heavy", rows)
    np.testing.assert_array_equal(direct["label"][1].ravel(), ref_label)
    np.testing.assert_allclose(direct["probabilities"][1], ref_probs, rtol=1e-5, atol=1e-6)
    r = post(front, f"plain-{name}", rows)
    assert r.status_code == 200, r.text
    assert (r.headers["x-switchyard-model"], r.headers["x-switchyard-device"]) == (f"heavy-{name}", "upstream")
    assert r.json()["parameters"]["switchyard_pool"] == name
    same_outputs(outputs(r.json()), direct)
    for i in range(3):
        one = post(front, f"plain-{name}", rows[i:i + 1])
        assert one.status_code == 200, one.text
        same_outputs(outputs(one.json()), outputs(infer_json(servers[name].base, "digits-heavy", rows[i:i + 1])))


@pytest.mark.parametrize("name", SERVERS)
def test_a_cascade_escalates_to_the_heavy_model_on_a_real_server(front, servers, digits, name):
    x, _ = digits
    ref = Reference("digits-cheap")
    _, cheap_probs = ref.run("digits-cheap", x[:40])
    seen = set()
    for i in range(40):
        r = post(front, f"cascade-{name}", x[i:i + 1])
        assert r.status_code == 200, r.text
        model, device, reason = (r.headers[h] for h in ("x-switchyard-model", "x-switchyard-device",
                                                          "x-switchyard-reason"))
        if cheap_probs[i].max() >= 0.8:
            assert (model, device, reason) == ("digits-cheap", "cpu", "cascade_confident")
        else:
            assert (model, device, reason) == (f"heavy-{name}", "upstream", "cascade_escalate")
            same_outputs(outputs(r.json()), outputs(infer_json(servers[name].base, "digits-heavy", x[i:i + 1])))
        seen.add(model)
    assert seen == {"digits-cheap", f"heavy-{name}"}, "the sample has both kinds of rows"


def test_a_kserve_process_killed_under_load_loses_no_request(tmp_path, digits):
    """Two KServe processes behind one upstream, 8 client threads; one
    process is SIGKILLed a third of the way through: every request is
    answered 200 (failed attempts move to the other address), and both
    addresses took a share before the kill."""
    x, _ = digits
    a, b = kserve(), kserve()
    front = None
    try:
        config = f"""
[[upstreams]]
name = "pair"
kind = "v2"
addrs = ["{a.addr}", "{b.addr}"]
health = {{ interval_ms = 200 }}
models = [{{ name = "heavy-remote", model = "digits-heavy" }}]

[[routes]]
name = "remote"
models = ["heavy-remote"]
budget_ms = {{ default = 10000 }}
cache = {{ enabled = false }}
"""
        front = Gateway(config=write_config(tmp_path, config))
        total, done = 480, []

        def one(i):
            row = x[i % len(x):i % len(x) + 1]
            with requests.Session() as s:
                r = s.post(f"{front.base}/v2/models/remote/infer", json=infer_body(row), timeout=30)
            done.append(i)
            return r.status_code, r.text

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(one, i) for i in range(total)]
            while len(done) < total // 3:
                time.sleep(0.01)
            a.kill()
            results = [f.result() for f in futures]
        failed = [r for r in results if r[0] != 200]
        assert not failed, f"{len(failed)} of {total} failed, e.g. {failed[:2]}"
        stats = requests.get(f"{front.admin}/admin/stats", timeout=5).json()
        addresses = {s["addr"]: s for s in stats["upstreams"][0]["addresses"]}
        assert addresses[a.addr]["requests"] > 20 and addresses[b.addr]["requests"] > 20, addresses
        assert not addresses[a.addr]["usable"], addresses
    finally:
        if front:
            front.stop()
        a.stop()
        b.stop()
