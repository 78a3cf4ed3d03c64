"""Real text models (MiniLM-L3 and -L6, fetched by models/text_models.py)
through the real gateway with unmodified tritonclient[http]: metadata and
config describe the public contract (BYTES in, FP32 embedding out), and the
embeddings equal a Python reference computed independently of the gateway:
tokenizers + onnxruntime (the encoder's hidden state, read from inside the
same ONNX file) + numpy mean pooling and L2 normalisation."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import requests
import tritonclient.http as httpclient
from tokenizers import Tokenizer
from tritonclient.utils import InferenceServerException

from conftest import MODELS, Gateway

TEXT_MODELS = ["minilm-l3", "minilm-l6"]
MAX_LENGTH = 128
# Embeddings are unit vectors; batching and padding change only the order of
# float sums inside ONNX Runtime, which moves components by ~1e-7 (6e-8 seen).
ATOL = 1e-6

SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays an instrument.",
    "The stock market fell sharply today.",
    "",
    "Café crème, naïve résumé — ünïcödé façade 日本語のテキスト 🙂",
    "short",
    " ".join(["tokenization"] * 200),  # ~400 tokens: truncated to 128
]

pytestmark = pytest.mark.skipif(
    not all((MODELS / f).is_file() for f in ["minilm-l3.onnx", "minilm-l6.onnx", "minilm-tokenizer.json"]),
    reason="text models not fetched (scripts/setup.sh test runs models/text_models.py)",
)


def config_text() -> str:
    models = "".join(
        f"""
[[models]]
name = "{name}"
path = "{MODELS / (name + '.onnx')}"
tokenizer = {{ path = "{MODELS / 'minilm-tokenizer.json'}", max_length = {MAX_LENGTH} }}
batching = {{ max_batch_size = 16, max_queue_delay_us = 2000, queue_capacity = 256 }}
quality = {i + 1}
"""
        for i, name in enumerate(TEXT_MODELS)
    )
    route = """
[[routes]]
name = "minilm"
models = ["minilm-l3", "minilm-l6"]
budget_ms = { default = 5000, max = 10000 }
policy = { type = "latency_budget" }
"""
    return models + route


@pytest.fixture(scope="module")
def text_gateway(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.toml"
    path.write_text(config_text())
    gw = Gateway(config=path)
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def client(text_gateway):
    c = httpclient.InferenceServerClient(url=text_gateway.url)
    yield c
    c.close()


class Reference:
    """sentence-transformers' computation, step by step, per sentence."""

    def __init__(self):
        self.tokenizer = Tokenizer.from_file(str(MODELS / "minilm-tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_LENGTH)
        self.sessions = {}

    def session(self, model: str):
        if model not in self.sessions:
            proto = onnx.load(str(MODELS / f"{model}.onnx"))
            hidden = {p.key: p.value for p in proto.metadata_props}["switchyard.hidden_state"]
            proto.graph.output.append(onnx.helper.make_empty_tensor_value_info(hidden))
            self.sessions[model] = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return self.sessions[model]

    def embed(self, model: str, texts) -> np.ndarray:
        sess = self.session(model)
        wanted = {i.name for i in sess.get_inputs()}
        rows = []
        for text in texts:
            enc = self.tokenizer.encode(text)
            feeds = {
                "input_ids": np.array([enc.ids], dtype=np.int64),
                "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
                "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
            }
            hidden = sess.run(None, {k: v for k, v in feeds.items() if k in wanted})[1]
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            mean = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            rows.append(mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12))
        return np.concatenate(rows).astype(np.float32)


@pytest.fixture(scope="module")
def reference():
    return Reference()


def text_input(texts, binary, shape=None):
    data = np.array([t.encode("utf-8") if isinstance(t, str) else t for t in texts], dtype=np.object_)
    if shape is not None:
        data = data.reshape(shape)
    inp = httpclient.InferInput("text", list(data.shape), "BYTES")
    inp.set_data_from_numpy(data, binary_data=binary)
    return inp


@pytest.mark.parametrize("name", TEXT_MODELS + ["minilm"])
def test_metadata_and_config_describe_the_public_contract(client, name):
    meta = client.get_model_metadata(name)
    assert meta["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1, 1]}]
    assert meta["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, 384]}]
    config = client.get_model_config(name)
    assert config["max_batch_size"] == 16
    [inp] = config["input"]
    assert (inp["name"], inp["data_type"], inp["dims"]) == ("text", "TYPE_STRING", [1])
    assert "reshape" not in inp
    [out] = config["output"]
    assert (out["name"], out["data_type"], out["dims"]) == ("embedding", "TYPE_FP32", [384])


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("name", TEXT_MODELS)
def test_embeddings_equal_the_python_reference(client, reference, name, binary):
    result = client.infer(name, [text_input(SENTENCES, binary)],
                          outputs=[httpclient.InferRequestedOutput("embedding", binary_data=binary)])
    got = result.as_numpy("embedding")
    assert got.dtype == np.float32 and got.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(got, reference.embed(name, SENTENCES), atol=ATOL, rtol=0)
    assert result.get_response()["parameters"]["switchyard_model"] == name


def test_column_shape_and_single_rows_give_the_same_embeddings(client, reference):
    # SENTENCES go as [N] elsewhere; here as the declared [N, 1], and one by one.
    col = client.infer("minilm-l3", [text_input(SENTENCES[:3], True, shape=(3, 1))]).as_numpy("embedding")
    ref = reference.embed("minilm-l3", SENTENCES[:3])
    np.testing.assert_allclose(col, ref, atol=ATOL, rtol=0)
    for i, text in enumerate(SENTENCES[:3]):
        one = client.infer("minilm-l3", [text_input([text], False)]).as_numpy("embedding")
        np.testing.assert_allclose(one[0], ref[i], atol=ATOL, rtol=0)


def test_route_with_a_loose_budget_answers_with_the_heavy_model(client, reference):
    result = client.infer("minilm", [text_input(SENTENCES[:2], True)], headers={"x-latency-budget-ms": "5000"})
    assert result.get_response()["parameters"]["switchyard_model"] == "minilm-l6"
    np.testing.assert_allclose(result.as_numpy("embedding"), reference.embed("minilm-l6", SENTENCES[:2]),
                               atol=ATOL, rtol=0)


def test_non_utf8_text_is_a_400_naming_the_element(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("minilm-l3", [text_input([b"fine", b"\xff\xfe bad"], True)])
    assert err.value.status() == "400"
    assert "element 1" in err.value.message() and "UTF-8" in err.value.message()


def test_wrong_datatype_is_a_400(client):
    inp = httpclient.InferInput("text", [2], "FP32")
    inp.set_data_from_numpy(np.array([1.0, 2.0], dtype=np.float32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("minilm", [inp])
    assert err.value.status() == "400"
    assert "BYTES" in err.value.message()


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"inputs": [{"name": "text", "shape": [0], "datatype": "BYTES", "data": []}]}, "N >= 1"),
        ({"inputs": [{"name": "text", "shape": [1, 2], "datatype": "BYTES", "data": ["a", "b"]}]}, "shape"),
        ({"inputs": [{"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [101, 102]}]}, "input_ids"),
        ({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": [7]}]}, "text"),
    ],
    ids=["empty", "matrix", "token-ids", "number-as-text"],
)
def test_malformed_text_requests_are_400(text_gateway, body, needle):
    r = requests.post(f"{text_gateway.base}/v2/models/minilm-l6/infer", data=json.dumps(body), timeout=30)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"], r.text
    assert text_gateway.alive()


def test_fastapi_baseline_computes_the_same_embeddings(reference, tmp_path):
    """The benchmark's Python baseline must answer the same question: its
    embeddings (tokenizers with per-request padding + onnxruntime) equal the
    reference too, so the text benchmark compares like with like."""
    import subprocess
    import sys
    import time

    from conftest import REPO, free_port

    port = free_port()
    log = open(tmp_path / "baseline.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks/baseline/fastapi_server.py"), "--models-dir", str(MODELS),
         "--models", "minilm-l3,minilm-l6", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "baseline.log").read_text()
            try:
                if requests.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "baseline did not start"
            time.sleep(0.2)
        c = httpclient.InferenceServerClient(url=f"127.0.0.1:{port}")
        for name in TEXT_MODELS:
            for binary in (False, True):
                got = c.infer(name, [text_input(SENTENCES, binary)]).as_numpy("embedding")
                np.testing.assert_allclose(got, reference.embed(name, SENTENCES), atol=ATOL, rtol=0)
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()
