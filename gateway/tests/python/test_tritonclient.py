"""Unmodified tritonclient[http] against the real gateway: metadata,
config, and inference on every example model in JSON and binary modes,
with outputs compared to onnxruntime's own on the same inputs."""

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from conftest import MODELS

EXAMPLE_MODELS = ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"]


@pytest.fixture(scope="module")
def client(gateway):
    c = httpclient.InferenceServerClient(url=gateway.url)
    yield c
    c.close()


def reference(model: str, x: np.ndarray) -> dict:
    sess = ort.InferenceSession(str(MODELS / f"{model}.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {"X": x})))


def sample_rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)


def test_server_metadata_and_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "switchyard"
    assert "binary_tensor_data" in meta["extensions"]


@pytest.mark.parametrize("name", EXAMPLE_MODELS + ["digits"])
def test_model_metadata_and_config(client, name):
    assert client.is_model_ready(name)
    meta = client.get_model_metadata(name)
    assert meta["name"] == name
    assert [i["name"] for i in meta["inputs"]] == ["X"]
    assert meta["inputs"][0]["datatype"] == "FP32"
    assert meta["inputs"][0]["shape"] == [-1, 64]
    outputs = {o["name"]: o for o in meta["outputs"]}
    assert outputs["label"]["datatype"] == "INT64"
    assert outputs["probabilities"]["shape"] == [-1, 10]
    config = client.get_model_config(name)
    assert config["max_batch_size"] > 0
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["input"][0]["dims"] == [64]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_infer_matches_onnxruntime(client, name, binary):
    x = sample_rows(3, seed=len(name))
    inp = httpclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    outputs = [
        httpclient.InferRequestedOutput("label", binary_data=binary),
        httpclient.InferRequestedOutput("probabilities", binary_data=binary),
    ]
    result = client.infer(name, [inp], outputs=outputs, request_id="req-7")
    expected = reference(name, x)
    assert result.get_response()["id"] == "req-7"
    np.testing.assert_array_equal(result.as_numpy("label"), expected["label"])
    np.testing.assert_allclose(result.as_numpy("probabilities"), expected["probabilities"], rtol=1e-5, atol=1e-6)


def test_route_answers_with_its_model(client):
    x = sample_rows(2, seed=11)
    inp = httpclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    result = client.infer("digits", [inp])
    response = result.get_response()
    assert response["model_name"] == "digits"
    assert response["parameters"]["switchyard_model"] in ("digits-cheap", "digits-heavy")
    model = response["parameters"]["switchyard_model"]
    np.testing.assert_array_equal(result.as_numpy("label"), reference(model, x)["label"])


def test_output_selection(client):
    x = sample_rows(1, seed=3)
    inp = httpclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer("digits-cheap", [inp], outputs=[httpclient.InferRequestedOutput("label")])
    names = [o["name"] for o in result.get_response()["outputs"]]
    assert names == ["label"]
