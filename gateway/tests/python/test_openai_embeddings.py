"""The OpenAI-compatible API (`POST /v1/embeddings`, `GET /v1/models`)
driven by the official `openai` Python SDK, unmodified, pointed at the real
gateway with `base_url`: float and base64 vectors equal the Python
reference (tokenizers + onnxruntime + numpy, test_text.Reference), `usage`
counts the tokenizer's tokens, bad inputs get OpenAI-shaped 4xx errors
(never 5xx), an identical second call is a cache hit, and a route with API
keys wants `Authorization: Bearer`."""

import base64
import json
import struct
import time

import numpy as np
import openai
import pytest
import requests
from tokenizers import Tokenizer

from conftest import MODELS, Gateway
from test_text import ATOL, MAX_LENGTH, SENTENCES, Reference

KEY = "openai-test-key-0001"
MAX_ROWS = 8
MAX_TOKENS = 400
# SENTENCES without the empty one: OpenAI refuses empty strings.
TEXTS = [s for s in SENTENCES if s]

pytestmark = pytest.mark.skipif(
    not all((MODELS / f).is_file() for f in ["minilm-l3.onnx", "minilm-l6.onnx", "minilm-tokenizer.json"]),
    reason="text models not fetched (scripts/setup.sh test runs models/text_models.py)",
)


def config_text(folder) -> str:
    """Text models and routes; `recorded` samples every call into `folder`/traffic."""
    tokenizer = f'{{ path = "{MODELS / "minilm-tokenizer.json"}", max_length = {MAX_LENGTH} }}'
    return f"""
[cache]
l1_max_bytes = "64MiB"

[[models]]
name = "minilm-l3"
path = "{MODELS / 'minilm-l3.onnx'}"
tokenizer = {tokenizer}
batching = {{ max_batch_size = 16, max_queue_delay_us = 2000, queue_capacity = 256 }}
limits = {{ max_rows = {MAX_ROWS}, max_tokens = {MAX_TOKENS} }}
quality = 1

[[models]]
name = "minilm-l6"
path = "{MODELS / 'minilm-l6.onnx'}"
tokenizer = {tokenizer}
batching = {{ max_batch_size = 16, max_queue_delay_us = 2000, queue_capacity = 256 }}
quality = 2

[[models]]
name = "minilm-l6-private"
path = "{MODELS / 'minilm-l6.onnx'}"
tokenizer = {tokenizer}

[[models]]
name = "digits"
path = "{MODELS / 'digits-cheap.onnx'}"

[[routes]]
name = "minilm"
models = ["minilm-l3", "minilm-l6"]
budget_ms = {{ default = 5000, max = 10000 }}
policy = {{ type = "latency_budget" }}

[[routes]]
name = "recorded"
models = ["minilm-l3"]
record = {{ sample = 1.0, path = "{folder}/traffic/recorded.jsonl" }}

[[routes]]
name = "private"
models = ["minilm-l6-private"]
auth = {{ keys = [{{ key = "{KEY}", tenant = "team-a" }}] }}
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    folder = tmp_path_factory.mktemp("openai")
    path = folder / "openai.toml"
    path.write_text(config_text(folder))
    gw = Gateway(config=path)
    gw.traffic = folder / "traffic"
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def client(gateway):
    c = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key="unused", max_retries=0, timeout=60)
    yield c
    c.close()


@pytest.fixture(scope="module")
def reference():
    return Reference()


def token_count(texts) -> int:
    tok = Tokenizer.from_file(str(MODELS / "minilm-tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH)
    return sum(len(tok.encode(t).ids) for t in texts)


@pytest.mark.parametrize("fmt", [None, "float", "base64"], ids=["sdk-default", "float", "base64"])
def test_sdk_embeddings_equal_the_python_reference(client, reference, fmt):
    # Left out, the SDK asks for base64 and decodes it itself; asked for
    # explicitly, base64 comes back as the string the server sent.
    extra = {} if fmt is None else {"encoding_format": fmt}
    got = client.embeddings.create(model="minilm-l6", input=TEXTS, **extra)
    assert got.object == "list" and got.model == "minilm-l6"
    assert [d.index for d in got.data] == list(range(len(TEXTS)))
    assert all(d.object == "embedding" for d in got.data)
    if fmt == "base64":
        vectors = np.array([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in got.data])
    else:
        vectors = np.array([d.embedding for d in got.data], dtype=np.float32)
    assert vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(vectors, reference.embed("minilm-l6", TEXTS), atol=ATOL, rtol=0)
    assert got.usage.prompt_tokens == got.usage.total_tokens == token_count(TEXTS)


def test_token_ids_of_the_models_tokenizer_embed_as_their_texts(client, reference):
    # The ids the model's own tokenizer gives, with and without [CLS]/[SEP]:
    # the vectors are the texts' vectors, and usage counts the same tokens.
    tok = Tokenizer.from_file(str(MODELS / "minilm-tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH)
    ids = [tok.encode(t).ids for t in TEXTS]
    ids = [seq if i % 2 else seq[1:-1] for i, seq in enumerate(ids)]
    got = client.embeddings.create(model="minilm-l6", input=ids, encoding_format="float")
    vectors = np.array([d.embedding for d in got.data], dtype=np.float32)
    np.testing.assert_allclose(vectors, reference.embed("minilm-l6", TEXTS), atol=ATOL, rtol=0)
    assert got.usage.prompt_tokens == token_count(TEXTS)
    # One sequence alone is one text.
    one = client.embeddings.create(model="minilm-l6", input=ids[1], encoding_format="float")
    np.testing.assert_allclose(np.array(one.data[0].embedding, dtype=np.float32),
                               reference.embed("minilm-l6", [TEXTS[1]])[0], atol=ATOL, rtol=0)


def test_dimensions_equal_to_the_models_width_is_accepted(client, reference):
    got = client.embeddings.create(model="minilm-l6", input=TEXTS[:2], dimensions=384, encoding_format="float")
    np.testing.assert_allclose(np.array([d.embedding for d in got.data], dtype=np.float32),
                               reference.embed("minilm-l6", TEXTS[:2]), atol=ATOL, rtol=0)


def test_base64_is_little_endian_f32_bytes(gateway, reference):
    r = requests.post(f"{gateway.base}/v1/embeddings", timeout=60,
                      json={"model": "minilm-l3", "input": "A man is playing a guitar.", "encoding_format": "base64"})
    assert r.status_code == 200, r.text
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    vector = np.frombuffer(raw, dtype="<f4")
    np.testing.assert_allclose(vector, reference.embed("minilm-l3", ["A man is playing a guitar."])[0], atol=ATOL)


def test_a_single_string_on_a_route_with_a_budget(client, reference, gateway):
    # A loose budget fits the heavy model, as for a V2 call (test_text.py).
    raw = client.embeddings.with_raw_response.create(model="minilm", input="Someone plays an instrument.",
                                                     user="someone", extra_headers={"x-latency-budget-ms": "5000"})
    assert raw.headers["x-switchyard-model"] == "minilm-l6"
    assert raw.headers["x-switchyard-budget-ms"] == "5000"
    got = raw.parse()
    [row] = got.data
    assert got.model == "minilm"
    np.testing.assert_allclose(row.embedding, reference.embed("minilm-l6", ["Someone plays an instrument."])[0],
                               atol=ATOL, rtol=0)
    r = requests.post(f"{gateway.base}/v1/embeddings", json={"model": "minilm", "input": "a"},
                      headers={"x-latency-budget-ms": "soon"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text


def test_the_second_identical_call_is_a_cache_hit(client):
    texts = ["cache me once", "and only once"]
    first = client.embeddings.with_raw_response.create(model="minilm", input=texts)
    again = client.embeddings.with_raw_response.create(model="minilm", input=texts)
    assert first.headers["x-cache"] == "miss"
    assert again.headers["x-cache"] == "hit-l1"
    assert first.parse().data[0].embedding == again.parse().data[0].embedding
    assert again.parse().usage.prompt_tokens == token_count(texts)


def test_models_lists_text_models_and_routes_the_caller_may_see(client, gateway):
    ids = sorted(m.id for m in client.models.list())
    # Not digits (no tokenizer); the private route and its model need the key.
    assert ids == ["minilm", "minilm-l3", "minilm-l6", "recorded"], ids
    keyed = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key=KEY, max_retries=0)
    assert sorted(m.id for m in keyed.models.list()) == ["minilm", "minilm-l3", "minilm-l6", "minilm-l6-private", "private", "recorded"]
    doc = requests.get(f"{gateway.base}/v1/models", timeout=30).json()
    assert doc["object"] == "list"
    assert doc["data"][0] == {"id": doc["data"][0]["id"], "object": "model", "created": 0, "owned_by": "switchyard"}


def test_an_api_key_route_wants_a_bearer_key(gateway, reference):
    anonymous = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as err:
        anonymous.embeddings.create(model="private", input=["hello"])
    assert err.value.status_code == 401
    assert err.value.body["type"] == "authentication_error"
    r = requests.post(f"{gateway.base}/v1/embeddings", json={"model": "private", "input": "hello"}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    keyed = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key=KEY, max_retries=0)
    got = keyed.embeddings.create(model="private", input=["hello"])
    np.testing.assert_allclose(got.data[0].embedding, reference.embed("minilm-l6", ["hello"])[0], atol=ATOL, rtol=0)


def long_text(i):
    return f"text {i} " + " ".join(["tokenization"] * 200)


@pytest.mark.parametrize(
    "body,status,kind,param,needle",
    [
        ({"model": "minilm", "input": []}, 400, "invalid_request_error", "input", "empty array"),
        ({"model": "minilm", "input": ""}, 400, "invalid_request_error", "input", "empty string"),
        ({"model": "minilm", "input": ["a", ""]}, 400, "invalid_request_error", "input", "input[1]"),
        ({"model": "minilm", "input": ["a", 3]}, 400, "invalid_request_error", "input", "input[1]"),
        ({"model": "minilm", "input": {"text": "a"}}, 400, "invalid_request_error", "input", "an object"),
        # tiktoken's cl100k ids for "hello world" (what langchain sends by default)
        ({"model": "minilm", "input": [[15339, 1917], [100257]]}, 400, "invalid_request_error", "input",
         "outside the model's vocabulary"),
        ({"model": "minilm", "input": [101, 102]}, 400, "invalid_request_error", "input", "no token ids"),
        ({"model": "minilm", "input": [[101, 2023], [-1]]}, 400, "invalid_request_error", "input", "input[1][0]"),
        ({"model": "minilm", "input": [[101, 2023], []]}, 400, "invalid_request_error", "input", "input[1]"),
        ({"model": 7, "input": "a"}, 400, "invalid_request_error", "model", "a string"),
        ({"input": "a"}, 400, "invalid_request_error", "model", "required"),
        ({"model": "minilm"}, 400, "invalid_request_error", "input", "required"),
        ({"model": "minilm", "input": "a", "encoding_format": "int8"}, 400, "invalid_request_error",
         "encoding_format", "base64"),
        ({"model": "minilm", "input": "a", "dimensions": 64}, 400, "invalid_request_error", "dimensions",
         "set it to 384"),
        ({"model": "minilm", "input": "a", "dimensions": -3}, 400, "invalid_request_error", "dimensions",
         "positive integer"),
        ({"model": "digits", "input": "a"}, 400, "invalid_request_error", "model", "not a text embedding model"),
        ({"model": "nope", "input": "a"}, 404, "invalid_request_error", None, "unknown model"),
        ({"model": "minilm", "input": ["x"] * (MAX_ROWS + 1)}, 413, "invalid_request_error", None, "max_rows"),
        ({"model": "minilm-l3", "input": [long_text(i) for i in range(4)]}, 413, "invalid_request_error", None,
         "max_tokens"),
    ],
    ids=["empty-list", "empty-string", "empty-element", "number-element", "object", "tiktoken-ids",
         "only-special-ids", "negative-id", "empty-id-array", "model-type", "no-model", "no-input", "encoding",
         "dimensions", "negative-dimensions", "not-text",
         "unknown-model", "too-many-texts", "too-many-tokens"],
)
def test_bad_requests_get_openai_errors(gateway, body, status, kind, param, needle):
    r = requests.post(f"{gateway.base}/v1/embeddings", data=json.dumps(body), timeout=60,
                      headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert (error["type"], error["param"]) == (kind, param), error
    assert needle in error["message"], error
    assert gateway.alive()


def test_malformed_json_and_wrong_methods(gateway):
    r = requests.post(f"{gateway.base}/v1/embeddings", data=b'{"model": "minilm", "input": [', timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "body", r.text
    r = requests.get(f"{gateway.base}/v1/embeddings", timeout=30)
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_sdk_raises_its_own_error_types(client):
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="a")
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="minilm", input="a", dimensions=64)
    assert err.value.body["param"] == "dimensions"


def test_calls_are_counted_under_their_route_and_endpoint(gateway, client):
    client.embeddings.create(model="minilm", input=["count me"])
    client.models.list()
    text = requests.get(f"http://127.0.0.1:{gateway.admin_port}/metrics", timeout=30).text
    counted = [line for line in text.splitlines() if line.startswith("switchyard_requests_total{")]
    assert any('endpoint="openai_embeddings"' in line and 'route="minilm"' in line and 'status="200"' in line
               for line in counted), counted
    assert any('endpoint="openai_models"' in line for line in counted), counted


def test_a_sampled_call_is_recorded_like_a_v2_call(gateway, client):
    texts = ["record this", "and this"]
    client.embeddings.create(model="recorded", input=texts)
    path = gateway.traffic / "recorded.jsonl"
    deadline = time.monotonic() + 30  # the sample is written by its own thread
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [line] = [json.loads(l) for l in path.read_text().splitlines()]
    assert (line["route"], line["protocol"]) == ("recorded", "openai")
    [entry] = line["inputs"]
    assert (entry["name"], entry["datatype"], entry["shape"]) == ("text", "BYTES", [2, 1])
    raw, got = base64.b64decode(entry["data_b64"]), []
    while raw:  # Triton's binary BYTES layout: a 4-byte little-endian length, then the bytes
        (n,) = struct.unpack("<I", raw[:4])
        got.append(raw[4:4 + n].decode())
        raw = raw[4 + n:]
    assert got == texts
