"""Tenant limits against the real binary (issue 41): requests per second
with a burst, rows per second, requests computing at once and a daily
quota, per tenant (`[[tenants]]`) and per route x tenant
(`routes[].auth.tenants`). Over a limit: 429 with Retry-After and the IETF
draft's RateLimit-Policy / RateLimit headers (gRPC: RESOURCE_EXHAUSTED
with the same in the trailers; /v1/embeddings: OpenAI's error shape).
Cache hits count against the request rate and the quota, never against
rows or concurrency. Limits are chosen so slow (one request per 1000 s)
that no cell comes back while a test runs: no timing is asserted."""

import os
import subprocess
import threading

import grpc
import numpy as np
import pytest
import requests
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import REPO, Gateway
from routing_util import MODELS, infer_body, write_config
from sse_util import pause, pool_stats, resume, wait_for

KEYS = {t: f"key-of-{t}-0123456789abcdef" for t in
        ["slow", "other", "rows", "daily", "conc", "shared", "grpc", "text", "free", "strict"]}


def keys_toml(tenants):
    return ", ".join(f'{{ key = "{KEYS[t]}", tenant = "{t}" }}' for t in tenants)


CONFIG = f"""
[cache]
l1_max_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "{{models}}/digits-cheap.onnx"
warmup = true

[[models]]
name = "digits-heavy"
path = "{{models}}/digits-heavy.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]
budget_ms = {{ default = 10000, max = 20000 }}
auth = {{ keys = [{keys_toml(["slow", "other", "rows", "daily", "conc", "shared", "grpc", "free", "strict"])}],
         tenants = [{{ name = "shared", limits = {{ requests_per_day = 1 }} }}] }}

[[routes]]
name = "heavy"
models = ["digits-heavy"]
auth = {{ keys = [{keys_toml(["shared"])}] }}

[[tenants]]
name = "slow"
limits = {{ requests_per_s = 0.001, burst = 2 }}

[[tenants]]
name = "rows"
limits = {{ rows_per_s = 0.001, rows_burst = 4 }}

[[tenants]]
name = "daily"
limits = {{ requests_per_day = 3 }}

[[tenants]]
name = "conc"
limits = {{ concurrent = 1 }}

[[tenants]]
name = "grpc"
limits = {{ requests_per_day = 1 }}

[[tenants]]
name = "strict"
limits = {{ requests_per_day = 1 }}
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    path = write_config(tmp_path_factory.mktemp("tenants"), CONFIG)
    g = Gateway(config=path, extra_args=["--grpc-listen", "127.0.0.1:0"])
    g.config_path = path
    yield g
    g.stop()


def rows(n, seed):
    return np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)


def infer(gw, tenant, x, route="digits", timeout=30):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=infer_body(x),
                         headers={"x-api-key": KEYS[tenant]}, timeout=timeout)


def assert_limited(r, policy, fragment):
    """A 429 by limit `policy` (the RateLimit item's name) whose
    RateLimit-Policy contains `fragment`."""
    assert r.status_code == 429, r.text
    assert int(r.headers["retry-after"]) >= 1, r.headers
    assert r.headers["ratelimit"].startswith(f'"{policy}";r=0;t='), r.headers
    assert int(r.headers["ratelimit"].rsplit("t=", 1)[1]) >= 1
    assert fragment in r.headers["ratelimit-policy"], r.headers
    assert "error" in r.json()


def test_request_rate_refuses_past_the_burst_with_retry_after_and_ratelimit_headers(gw):
    answers = [infer(gw, "slow", rows(1, seed)) for seed in (1, 2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert [a.headers["ratelimit"] for a in answers] == ['"requests";r=1;t=1000', '"requests";r=0;t=2000']
    assert answers[0].headers["ratelimit-policy"] == '"requests";q=2;w=2000'
    r = infer(gw, "slow", rows(1, 3))
    assert_limited(r, "requests", '"requests";q=2;w=2000')
    assert int(r.headers["retry-after"]) > 100, "the next cell is ~1000 s away"
    assert "slow" in r.json()["error"] and "requests" in r.json()["error"]
    assert infer(gw, "other", rows(1, 3)).status_code == 200, "another tenant of the route is not limited"


def test_hits_are_not_charged_rows_but_new_rows_are(gw):
    x = rows(4, 10)
    first = infer(gw, "rows", x)
    assert first.status_code == 200 and first.headers["x-cache"] == "miss", first.text
    for _ in range(3):
        hit = infer(gw, "rows", x)
        assert hit.status_code == 200, hit.text
        assert hit.headers["x-cache"].startswith("hit"), hit.headers
    assert_limited(infer(gw, "rows", rows(1, 11)), "rows", '"rows";q=4;w=4000;qu="rows"')


def test_a_batch_larger_than_the_row_burst_is_413(gw):
    r = infer(gw, "rows", rows(5, 12))
    assert r.status_code == 413, r.text
    assert "rows_burst" in r.json()["error"]


def test_the_daily_quota_counts_hits_too(gw):
    x = rows(1, 20)
    answers = [infer(gw, "daily", x) for _ in range(3)]
    assert [a.status_code for a in answers] == [200] * 3
    left = [a.headers["ratelimit"].split(";t=")[0] for a in answers]
    assert left == ['"daily";r=2', '"daily";r=1', '"daily";r=0'], "each hit, repeat ones too, says what is left"
    assert all(a.headers["x-cache"].startswith("hit") for a in answers[1:]), [a.headers for a in answers]
    r = infer(gw, "daily", x)
    assert_limited(r, "daily", '"daily";q=3;w=86400')
    assert 1 <= int(r.headers["retry-after"]) <= 86400, "until 00:00 UTC"


def test_admin_config_shows_the_limits_and_no_key(gw):
    doc = requests.get(f"{gw.admin}/admin/config", timeout=30).json()["config"]
    slow = next(t for t in doc["tenants"] if t["name"] == "slow")
    assert slow["limits"]["requests_per_s"] == 0.001 and slow["limits"]["burst"] == 2, slow
    assert slow["limits"]["requests_per_day"] is None and slow["weight"] == 1, slow
    auth = doc["routes"][0]["auth"]
    assert auth["tenants"] == [{"name": "shared", "weight": 1, "limits": {
        "requests_per_s": None, "burst": None, "rows_per_s": None, "rows_burst": None, "concurrent": None,
        "requests_per_day": 1}}], auth
    assert auth["fair_share"] is True
    assert not any(k in str(doc) for k in KEYS.values()), "keys are never shown"


def test_a_refused_bad_request_spends_nothing(gw):
    headers = {"x-api-key": KEYS["strict"]}
    bad_shape = {"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}
    for _ in range(3):
        r = requests.post(f"{gw.base}/v2/models/digits/infer", json=bad_shape, headers=headers, timeout=30)
        assert r.status_code == 400, r.text
    r = requests.post(f"{gw.base}/v2/models/digits/infer", json=infer_body(rows(1, 25)),
                      headers={**headers, "x-latency-budget-ms": "nope"}, timeout=30)
    assert r.status_code == 400, r.text
    assert infer(gw, "strict", rows(1, 26)).status_code == 200, "the day's one request is still there"
    assert_limited(infer(gw, "strict", rows(1, 27)), "daily", '"daily";q=1;w=86400')


def test_concurrency_limits_computing_requests_but_not_hits(gw):
    cached = rows(1, 30)
    assert infer(gw, "conc", cached).status_code == 200
    pause(gw, "digits-cheap")
    held = {}
    worker = threading.Thread(target=lambda: held.setdefault("r", infer(gw, "conc", rows(1, 31))))
    try:
        worker.start()
        wait_for(lambda: pool_stats(gw, "digits-cheap")["queue_depth"] >= 1, "one request held in the queue")
        assert_limited(infer(gw, "conc", rows(1, 32)), "concurrent", '"concurrent";q=1;qu="concurrent-requests"')
        hit = infer(gw, "conc", cached)
        assert hit.status_code == 200 and hit.headers["x-cache"].startswith("hit"), hit.text
    finally:
        resume(gw, "digits-cheap")
        worker.join(timeout=30)
    assert held["r"].status_code == 200, held["r"].text
    assert infer(gw, "conc", rows(1, 33)).status_code == 200, "the place came back"


def test_a_route_limit_holds_on_its_route_only(gw):
    assert infer(gw, "shared", rows(1, 40)).status_code == 200
    assert_limited(infer(gw, "shared", rows(1, 41)), "digits/daily", '"digits/daily";q=1;w=86400')
    for seed in (42, 43, 44):
        assert infer(gw, "shared", rows(1, seed), route="heavy").status_code == 200


def test_grpc_is_resource_exhausted_with_retry_after_and_ratelimit_trailers(gw):
    channel = grpc.insecure_channel(f"127.0.0.1:{gw.grpc_port}")
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)

    def call(seed):
        x = rows(1, seed)
        req = service_pb2.ModelInferRequest(model_name="digits")
        tensor = req.inputs.add(name="X", datatype="FP32", shape=[1, 64])
        tensor.contents.fp32_contents.extend(x.ravel().tolist())
        return stub.ModelInfer(req, metadata=[("x-api-key", KEYS["grpc"])], timeout=30)

    try:
        assert call(50).model_name == "digits"
        with pytest.raises(grpc.RpcError) as e:
            call(51)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        trailers = dict(e.value.trailing_metadata())
        assert int(trailers["retry-after"]) >= 1, trailers
        assert trailers["ratelimit"].startswith('"daily";r=0;t='), trailers
        assert trailers["ratelimit-policy"] == '"daily";q=1;w=86400', trailers
        assert "grpc" in e.value.details()
    finally:
        channel.close()


def test_a_reload_keeps_the_day_spent_and_applies_new_limits(gw, tmp_path):
    before = gw.config_path.read_text()
    try:
        spent = [infer(gw, "grpc", rows(1, seed)).status_code for seed in (58, 59)]
        assert spent[-1] == 429, spent
        gw.config_path.write_text(before + "\n# an unrelated change\n")
        assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
        assert infer(gw, "grpc", rows(1, 61)).status_code == 429, "a reload hands out no second day"
        gw.config_path.write_text(before.replace(
            'name = "grpc"\nlimits = { requests_per_day = 1 }', 'name = "grpc"\nlimits = { requests_per_day = 2 }'))
        assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
        assert infer(gw, "grpc", rows(1, 62)).status_code == 200, "the raised quota counts what was spent"
        assert_limited(infer(gw, "grpc", rows(1, 63)), "daily", '"daily";q=2;w=86400')
    finally:
        gw.config_path.write_text(before)
        requests.post(f"{gw.admin}/admin/reload", timeout=60)


def binary():
    return os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))


@pytest.mark.parametrize("extra, path", [
    ('[[tenants]]\nname = "nobody"\n', "tenants[0].name"),
    ('[[tenants]]\nname = "a"\nlimits = { concurrent = 0 }\n', "tenants[0].limits.concurrent"),
    ('[[tenants]]\nname = "a"\nlimits = { requests_per_s = -2 }\n', "tenants[0].limits.requests_per_s"),
    ('[[tenants]]\nname = "a"\nlimits = { burst = 3 }\n', "tenants[0].limits.burst"),
])
def test_bad_limits_are_refused_with_their_field_path(tmp_path, extra, path):
    text = f"""
[[models]]
name = "digits-cheap"
path = "{MODELS}/digits-cheap.onnx"
[[routes]]
name = "r"
models = ["digits-cheap"]
auth = {{ keys = [{{ key = "key-of-a-0123456789abcdef", tenant = "a" }}],
         tenants = [{{ name = "a", limits = {{ rows_per_s = 0 }} }}] }}
""" + extra
    config = tmp_path / "bad.toml"
    config.write_text(text)
    out = subprocess.run([binary(), "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0, out.stdout
    assert path in out.stdout + out.stderr, out.stdout + out.stderr
    assert "routes[0].auth.tenants[0].limits.rows_per_s" in out.stdout + out.stderr


TEXT_MODELS = ["minilm-l3.onnx", "minilm-tokenizer.json"]


@pytest.mark.skipif(not all((MODELS / f).is_file() for f in TEXT_MODELS),
                    reason="text models not fetched (scripts/setup.sh test runs models/text_models.py)")
def test_embeddings_over_a_limit_is_429_in_openai_shape(tmp_path):
    tokenizer = f'{{ path = "{MODELS / "minilm-tokenizer.json"}", max_length = 64 }}'
    config = write_config(tmp_path, f"""
[[models]]
name = "minilm-l3"
path = "{MODELS / 'minilm-l3.onnx'}"
tokenizer = {tokenizer}

[[routes]]
name = "minilm"
models = ["minilm-l3"]
auth = {{ keys = [{keys_toml(["text"])}] }}

[[tenants]]
name = "text"
limits = {{ requests_per_s = 0.001, burst = 1 }}
""")
    g = Gateway(config=config)
    try:
        def embed(text):
            return requests.post(f"{g.base}/v1/embeddings", json={"model": "minilm", "input": [text]},
                                 headers={"authorization": f"Bearer {KEYS['text']}"}, timeout=60)

        first = embed("a first sentence")
        assert first.status_code == 200 and first.headers["ratelimit"] == '"requests";r=0;t=1000', first.headers
        r = embed("a second sentence")
        assert_limited(r, "requests", '"requests";q=1;w=1000')
        assert r.headers["ratelimit"].startswith('"requests";r=0;t=')
        error = r.json()["error"]
        assert error["type"] == "rate_limit_error" and error["code"] == "tenant_requests", error
        assert "text" in error["message"]
    finally:
        g.stop()


def sample(metrics, name, **labels):
    """The value of the series `name{labels}` (labels in any order), or None."""
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        text, value = line.rsplit(" ", 1)
        found = dict(part.split("=", 1) for part in text[len(name) + 1:-1].split(","))
        if found == {k: f'"{v}"' for k, v in labels.items()}:
            return float(value)
    return None


def test_metrics_and_stats_count_per_listed_tenant_and_the_rest_as_other(tmp_path):
    config = write_config(tmp_path, f"""
[cache]
l1_max_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "{{models}}/digits-cheap.onnx"

[[routes]]
name = "digits"
models = ["digits-cheap"]
auth = {{ keys = [{keys_toml(["daily", "free"])}], tenants = [{{ name = "daily", limits = {{ requests_per_day = 5 }} }}] }}

[[tenants]]
name = "daily"
limits = {{ requests_per_day = 3 }}
""")
    g = Gateway(config=config)
    try:
        x = rows(2, 70)
        assert [infer(g, "daily", x).status_code for _ in range(2)] == [200, 200], "a miss (2 rows), a hit"
        assert infer(g, "daily", rows(1, 71)).status_code == 200
        assert infer(g, "daily", rows(1, 72)).status_code == 429
        free = infer(g, "free", rows(1, 73))
        assert free.status_code == 200 and "ratelimit" not in free.headers, "no limits, no headers"
        metrics = requests.get(f"{g.admin}/metrics", timeout=30).text
        assert sample(metrics, "switchyard_tenant_admitted_total", tenant="daily") == 3
        assert sample(metrics, "switchyard_tenant_limited_total", tenant="daily", limit="daily") == 1
        assert sample(metrics, "switchyard_tenant_limited_total", tenant="daily", limit="requests") == 0
        assert sample(metrics, "switchyard_tenant_rows_total", tenant="daily") == 3, "the hit computed nothing"
        assert sample(metrics, "switchyard_tenant_quota_left", tenant="daily", route="*") == 0
        assert sample(metrics, "switchyard_tenant_quota_left", tenant="daily", route="digits") == 2
        assert sample(metrics, "switchyard_tenant_admitted_total", tenant="_other") == 1
        assert 'tenant="free"' not in metrics, "an unlisted tenant has no label of its own"
        stats = requests.get(f"{g.admin}/admin/stats", timeout=30).json()["tenants"]
        assert stats["daily"]["admitted"] == 3 and stats["daily"]["rows"] == 3, stats
        assert stats["daily"]["limited"]["daily"] == 1, stats
        assert stats["daily"]["quota_left"] == {"*": 0, "digits": 2}, stats
        assert stats["_other"]["admitted"] == 1 and "free" not in stats, stats
    finally:
        g.stop()
