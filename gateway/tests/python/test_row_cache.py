"""A cache per row (issue 46, item 2): a batched request to a route whose
one model has independent rows (a text model, `rows_independent` on by
default) is cached row by row. Rows seen before are not computed (the
model's pool counts only the new rows as executed), the others run as one
smaller batch, and the answer equals the Python reference
(test_text.Reference) in the request's order. V2 REST, gRPC and
`/v1/embeddings` share the rows; `x-cache: partial` and
`x-switchyard-cached-rows: k/n` say what happened; concurrent batches
sharing texts compute each text once. A model with
`rows_independent = false`, and a route whose answering model is chosen per
request, keep whole-request caching."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

from conftest import MODELS, Gateway
from test_text import ATOL, MAX_LENGTH, Reference

pytestmark = pytest.mark.skipif(
    not all((MODELS / f).is_file() for f in ["minilm-l3.onnx", "minilm-l6.onnx", "minilm-tokenizer.json"]),
    reason="text models not fetched (scripts/setup.sh test runs models/text_models.py)",
)


def config(whole: bool) -> str:
    """`whole`: add a text model with `rows_independent = false`, a route
    that chooses its model per request, and a digits route."""
    tokenizer = f'{{ path = "{MODELS / "minilm-tokenizer.json"}", max_length = {MAX_LENGTH} }}'
    batching = "{ max_batch_size = 32, max_queue_delay_us = 2000, queue_capacity = 256 }"
    text = f"""
[cache]
l1_max_bytes = "64MiB"

[[models]]
name = "minilm-l6"
path = "{MODELS / 'minilm-l6.onnx'}"
tokenizer = {tokenizer}
batching = {batching}

[[routes]]
name = "embed"
models = ["minilm-l6"]
"""
    if whole:
        text += f"""
[[models]]
name = "minilm-l3"
path = "{MODELS / 'minilm-l3.onnx'}"
tokenizer = {tokenizer}
batching = {batching}
quality = 1

[[models]]
name = "minilm-l6-whole"
path = "{MODELS / 'minilm-l6.onnx'}"
tokenizer = {tokenizer}
batching = {batching}
rows_independent = false
quality = 2

[[models]]
name = "digits"
path = "{MODELS / 'digits-cheap.onnx'}"

[[routes]]
name = "embed-whole"
models = ["minilm-l6-whole"]

[[routes]]
name = "embed-chosen"
models = ["minilm-l3", "minilm-l6-whole"]
budget_ms = {{ default = 5000, max = 10000 }}
policy = {{ type = "latency_budget" }}

[[routes]]
name = "digits-route"
models = ["digits"]
"""
    return text


def start(tmp_path_factory, whole):
    path = tmp_path_factory.mktemp("rows") / "rows.toml"
    path.write_text(config(whole))
    return Gateway(config=path, extra_args=["--grpc-listen", "127.0.0.1:0"])


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = start(tmp_path_factory, whole=False)
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def gw_whole(tmp_path_factory):
    gw = start(tmp_path_factory, whole=True)
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def reference():
    return Reference()


def executed_rows(gw, model):
    stats = requests.get(f"{gw.admin}/admin/stats", timeout=10).json()
    pools = next(m for m in stats["models"] if m["name"] == model)["pools"]
    return sum(p["executed_rows"] for p in pools)


def texts(tag, n):
    return [f"{tag}: sentence number {i} about {['cats', 'rivers', 'markets', 'music'][i % 4]}" for i in range(n)]


def interleaved(seen, new):
    """seen[0], new[0], seen[2], new[1], ...: cached rows between computed ones."""
    out = []
    for i in range(len(new)):
        out += [seen[2 * i], new[i]]
    return out


def rest(gw, route, batch):
    r = requests.post(f"{gw.base}/v2/models/{route}/infer", timeout=60, json={
        "inputs": [{"name": "text", "shape": [len(batch), 1], "datatype": "BYTES", "data": batch}],
    })
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    return np.array(out["data"], dtype=np.float32).reshape(out["shape"]), r.headers


def test_seen_rows_are_not_computed_and_the_answer_keeps_the_request_order(gw, reference):
    first = texts("rest", 8)
    before = executed_rows(gw, "minilm-l6")
    got, headers = rest(gw, "embed", first)
    assert (headers["x-cache"], headers["x-switchyard-cached-rows"]) == ("miss", "0/8")
    assert executed_rows(gw, "minilm-l6") - before == 8
    np.testing.assert_allclose(got, reference.embed("minilm-l6", first), atol=ATOL)

    second = interleaved(first, texts("rest-new", 4))
    before = executed_rows(gw, "minilm-l6")
    got, headers = rest(gw, "embed", second)
    assert executed_rows(gw, "minilm-l6") - before == 4, "only the 4 new rows ran"
    assert (headers["x-cache"], headers["x-switchyard-cached-rows"]) == ("partial", "4/8")
    np.testing.assert_allclose(got, reference.embed("minilm-l6", second), atol=ATOL)

    # Every row seen now: nothing runs, and the order is the request's.
    again = list(reversed(second))
    before = executed_rows(gw, "minilm-l6")
    got, headers = rest(gw, "embed", again)
    assert executed_rows(gw, "minilm-l6") == before
    assert (headers["x-cache"], headers["x-switchyard-cached-rows"]) == ("hit-l1", "8/8")
    np.testing.assert_allclose(got, reference.embed("minilm-l6", again), atol=ATOL)


def test_a_text_twice_in_one_batch_is_computed_once(gw, reference):
    batch = ["dup: the same text", "dup: another text", "dup: the same text"]
    before = executed_rows(gw, "minilm-l6")
    got, headers = rest(gw, "embed", batch)
    assert executed_rows(gw, "minilm-l6") - before == 2
    assert headers["x-switchyard-cached-rows"] == "0/3"
    np.testing.assert_allclose(got, reference.embed("minilm-l6", batch), atol=ATOL)


def test_concurrent_batches_sharing_texts_compute_each_text_once(gw):
    pool = texts("shared", 12)
    batches = [[pool[(4 * c + i) % 12] for i in range(8)] for c in range(4)]
    before = executed_rows(gw, "minilm-l6")
    with ThreadPoolExecutor(4) as ex:
        answers = list(ex.map(lambda b: rest(gw, "embed", b), batches))
    assert executed_rows(gw, "minilm-l6") - before == 12, "each of the 12 texts ran once"
    by_text = {}
    for batch, (got, _) in zip(batches, answers):
        for text, row in zip(batch, got):
            np.testing.assert_array_equal(by_text.setdefault(text, row), row)


def test_a_single_text_request_shares_its_row_entry(gw):
    rest(gw, "embed", texts("single", 2))
    r = requests.post(f"{gw.base}/v2/models/embed/infer", timeout=60, json={
        "inputs": [{"name": "text", "shape": [1, 1], "datatype": "BYTES", "data": texts("single", 1)}],
    })
    assert r.status_code == 200 and r.headers["x-cache"] == "hit-l1", r.headers


def test_no_cache_computes_every_row_and_no_store_keeps_the_whole_request_path(gw):
    batch = texts("control", 4)
    rest(gw, "embed", batch)
    r = requests.post(f"{gw.base}/v2/models/embed/infer", timeout=60, headers={"cache-control": "no-cache"},
                      json={"inputs": [{"name": "text", "shape": [4, 1], "datatype": "BYTES", "data": batch}]})
    assert (r.headers["x-cache"], r.headers["x-switchyard-cached-rows"]) == ("bypass", "0/4")
    r = requests.post(f"{gw.base}/v2/models/embed/infer", timeout=60, headers={"cache-control": "no-store"},
                      json={"inputs": [{"name": "text", "shape": [4, 1], "datatype": "BYTES", "data": batch}]})
    assert r.headers["x-cache"] == "bypass" and "x-switchyard-cached-rows" not in r.headers


def test_grpc_shares_the_rows(gw, reference):
    first = texts("grpc", 8)
    rest(gw, "embed", first)
    second = interleaved(first, texts("grpc-new", 4))
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{gw.grpc_port}")
    try:
        data = np.array([t.encode() for t in second], dtype=np.object_).reshape(8, 1)
        inp = grpcclient.InferInput("text", [8, 1], "BYTES")
        inp.set_data_from_numpy(data)
        before = executed_rows(gw, "minilm-l6")
        result = client.infer("embed", [inp])
    finally:
        client.close()
    assert executed_rows(gw, "minilm-l6") - before == 4
    params = {k: getattr(p, p.WhichOneof("parameter_choice")) for k, p in result.get_response().parameters.items()}
    assert (params["x-cache"], params["x-switchyard-cached-rows"]) == ("partial", "4/8")
    np.testing.assert_allclose(result.as_numpy("embedding"), reference.embed("minilm-l6", second), atol=ATOL)


def test_openai_embeddings_share_the_rows(gw, reference):
    first = texts("openai", 8)
    rest(gw, "embed", first)
    second = interleaved(first, texts("openai-new", 4))
    before = executed_rows(gw, "minilm-l6")
    r = requests.post(f"{gw.base}/v1/embeddings", json={"model": "embed", "input": second}, timeout=60)
    assert r.status_code == 200, r.text
    assert executed_rows(gw, "minilm-l6") - before == 4
    assert (r.headers["x-cache"], r.headers["x-switchyard-cached-rows"]) == ("partial", "4/8")
    got = np.array([d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])], dtype=np.float32)
    np.testing.assert_allclose(got, reference.embed("minilm-l6", second), atol=ATOL)


def test_rows_independent_false_and_a_per_request_choice_keep_whole_request_caching(gw_whole):
    gw = gw_whole
    for route, model in [("embed-whole", "minilm-l6-whole"), ("embed-chosen", None)]:
        first = texts(route, 8)
        rest(gw, route, first)
        second = interleaved(first, texts(route + "-new", 4))
        got, headers = rest(gw, route, second)
        assert headers["x-cache"] == "miss" and "x-switchyard-cached-rows" not in headers, (route, headers)
        if model:
            before = executed_rows(gw, model)
            rest(gw, route, list(reversed(second)))
            assert executed_rows(gw, model) - before == 8, "a new order is a new request"
        _, headers = rest(gw, route, second)
        assert headers["x-cache"] == "hit-l1", (route, headers)

    rows = np.random.default_rng(46).random((8, 64), dtype=np.float32)
    mixed = rows.copy()
    mixed[1::2] += 1.0
    for batch, cache in [(rows, "miss"), (mixed, "miss"), (mixed, "hit-l1")]:
        before = executed_rows(gw, "digits")
        r = requests.post(f"{gw.base}/v2/models/digits-route/infer", timeout=60, json={
            "inputs": [{"name": "X", "shape": [8, 64], "datatype": "FP32", "data": batch.ravel().tolist()}],
        })
        assert r.status_code == 200, r.text
        assert r.headers["x-cache"] == cache and "x-switchyard-cached-rows" not in r.headers, r.headers
        ran = executed_rows(gw, "digits") - before
        assert ran == (0 if cache == "hit-l1" else 8), "a model without independent rows runs every row"
