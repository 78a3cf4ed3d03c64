"""Triton's statistics extension over REST (issue 38, item 1):
`GET /v2/models[/{m}[/versions/{v}]]/stats` with tritonclient.http (and
its asyncio client, as Triton's simple_http_aio_infer_client.py calls it),
the same numbers as gRPC's ModelStatistics, listed in `GET /v2`'s
extensions, and the statistics of key-protected models kept from callers
without their key, as gRPC keeps them."""

import asyncio

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
from tritonclient.utils import InferenceServerException

from conftest import Gateway
from routing_util import write_config
from sse_util import wait_for

KEY = "stats-test-key-0123456789"

CONFIG = """
[cache]

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 500, max = 1000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }

[[models]]
name = "private-cheap"
path = "{models}/digits-cheap.onnx"

[[routes]]
name = "private"
models = ["private-cheap"]
auth = { keys = [{ key = "%s", tenant = "team-a" }] }

[[routes]]
name = "shared"
models = ["private-cheap"]
""" % KEY


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("stats"), CONFIG),
                 extra_args=["--grpc-listen", "127.0.0.1:0"])
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def http(gw):
    c = httpclient.InferenceServerClient(url=gw.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def grpc(gw):
    c = grpcclient.InferenceServerClient(url=f"127.0.0.1:{gw.grpc_port}")
    yield c
    c.close()


def x_input(module, n, seed):
    x = np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)
    i = module.InferInput("X", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def counts(stat: dict) -> tuple:
    """The numbers of one model_stat that gRPC and REST must agree on
    (gRPC's JSON leaves zeros out)."""
    infer = stat["inference_stats"]
    return (stat["name"], stat["version"], int(stat.get("inference_count", 0)), int(stat.get("execution_count", 0)),
            *(int(infer[k].get("count", 0)) for k in ["success", "fail", "queue", "compute_infer"]))


def grpc_counts(client, name="", version="", headers=None) -> list:
    doc = client.get_inference_statistics(name, version, headers=headers, as_json=True)
    return [counts(s) for s in doc.get("model_stats", [])]


def http_counts(client, name="", version="", headers=None) -> list:
    doc = client.get_inference_statistics(name, version, headers=headers)
    return [counts(s) for s in doc["model_stats"]]


def test_statistics_is_an_extension(http):
    assert "statistics" in http.get_server_metadata()["extensions"]


def test_rest_statistics_count_infers_as_grpc_does(http, grpc):
    for seed in range(5):
        http.infer("digits-cheap", [x_input(httpclient, 3, seed)])
    grpc.infer("digits-cheap", [x_input(grpcclient, 2, 9)])

    def agree():
        rest = http_counts(http, "digits-cheap")
        return rest if rest == grpc_counts(grpc, "digits-cheap") and rest[0][2] >= 17 else None

    (name, version, rows, executions, success, fail, queue, compute) = wait_for(agree, "REST = gRPC")[0]
    assert (name, version, fail) == ("digits-cheap", "1", 0)
    assert rows >= 17 and success >= 6 and 1 <= executions <= rows and compute == executions
    # One version, and every model: the same numbers.
    assert http_counts(http, "digits-cheap", "1") == grpc_counts(grpc, "digits-cheap", "1")
    everything = http_counts(http)
    assert everything == grpc_counts(grpc)
    assert {"digits-cheap", "digits-heavy"} <= {s[0] for s in everything}
    # A route lists its models, cheapest first, as gRPC does.
    assert [s[0] for s in http_counts(http, "digits")] == ["digits-cheap", "digits-heavy"]
    doc = http.get_inference_statistics("digits-cheap")["model_stats"][0]
    assert set(doc["inference_stats"]) >= {"success", "fail", "queue", "compute_input", "compute_infer",
                                          "compute_output", "cache_hit", "cache_miss"}
    assert doc["batch_stats"] == [] and doc["last_inference"] == 0


def test_unknown_model_or_version_is_not_found(gw, http):
    """404 with Triton's `{"error": ...}` body naming what is missing (the
    statistics endpoint exists: the error is about the model)."""
    for path, says in [("/v2/models/nope/stats", 'unknown model or route "nope"'),
                       ("/v2/models/digits-cheap/versions/7/stats", 'has no version "7"')]:
        r = requests.get(f"{gw.base}{path}", timeout=10)
        assert r.status_code == 404, (path, r.text)
        assert says in r.json()["error"], r.text
    with pytest.raises(InferenceServerException):
        http.get_inference_statistics("nope")


def test_statistics_of_protected_models_need_their_key(gw, http, grpc):
    keyed = {"x-api-key": KEY}
    anonymous = {s[0] for s in http_counts(http)}
    assert "digits-cheap" in anonymous and "private-cheap" not in anonymous
    assert "private-cheap" in {s[0] for s in http_counts(http, headers=keyed)}
    # Named without its key: 401 over REST, as gRPC answers UNAUTHENTICATED.
    r = requests.get(f"{gw.base}/v2/models/private/stats", timeout=10)
    assert r.status_code == 401, r.text
    with pytest.raises(InferenceServerException) as e:
        grpc.get_inference_statistics("private")
    assert "UNAUTHENTICATED" in str(e.value.status())
    assert [s[0] for s in http_counts(http, "private", headers=keyed)] == ["private-cheap"]
    # An open route sharing the protected model does not show its counters.
    assert http_counts(http, "shared") == [] == grpc_counts(grpc, "shared")
    assert [s[0] for s in http_counts(http, "shared", headers=keyed)] == ["private-cheap"]


def test_tritons_example_flow_infer_then_statistics(gw):
    """As simple_http_infer_client.py and its asyncio twin do: infer, then
    `get_inference_statistics(model_name)` must list exactly that model."""
    client = httpclient.InferenceServerClient(url=gw.url)
    try:
        result = client.infer("digits-cheap", [x_input(httpclient, 1, 42)])
        assert result.as_numpy("probabilities").shape == (1, 10)
        statistics = client.get_inference_statistics(model_name="digits-cheap")
        assert len(statistics["model_stats"]) == 1, statistics
    finally:
        client.close()

    async def aio_flow():
        client = aiohttpclient.InferenceServerClient(url=gw.url)
        try:
            await client.infer("digits-cheap", [x_input(aiohttpclient, 1, 43)])
            return await client.get_inference_statistics(model_name="digits-cheap")
        finally:
            await client.close()

    statistics = asyncio.run(aio_flow())
    assert len(statistics["model_stats"]) == 1, statistics
