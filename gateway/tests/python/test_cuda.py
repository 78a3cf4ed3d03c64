"""CUDA pools on a real GPU, through the real gateway: the same models on a
CUDA pool and on a CPU pool give the same answers within float tolerance,
the answer says which device computed it, and dynamic batching forms
batches on the GPU.

Runs only where a GPU is: `SWITCHYARD_CUDA=1`, `SWITCHYARD_BIN` a build with
`--features cuda`, `ORT_DYLIB_PATH` the onnxruntime-gpu library and CUDA's
libraries on `LD_LIBRARY_PATH` (benchmarks/gpu/README.md says how, and
benchmarks/gpu/run.sh runs it). Everywhere else every test is skipped with
that reason."""

import json
import os
import re
import threading

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway

pytestmark = pytest.mark.skipif(
    os.environ.get("SWITCHYARD_CUDA") != "1",
    reason="needs an NVIDIA GPU, a --features cuda build and onnxruntime-gpu (SWITCHYARD_CUDA=1; "
    "see benchmarks/gpu/README.md)",
)

# The models are float32 end to end; cuBLAS/cuDNN kernels sum in another
# order than MLAS on the CPU (and may use TF32 where allowed), so answers
# agree to a relative tolerance, not bit for bit.
RTOL = 1e-3
ATOL = 1e-4
ROW_MODELS = ["synth-heavy", "synth-wide"]
TEXTS = ["A man is playing a guitar.", "The stock market fell sharply today.", "short", "Café crème 日本語"]


def config_text() -> str:
    text = ""
    for model in ROW_MODELS:
        for device in ["cpu", "cuda"]:
            text += f"""
[[models]]
name = "{model}-{device}"
path = "{MODELS / (model + '.onnx')}"
warmup = true
batching = {{ max_batch_size = 32, max_queue_delay_us = 50000, idle_dispatch = false }}
pools = [{{ name = "{device}", device = "{device}" }}]
"""
    for device in ["cpu", "cuda"]:
        text += f"""
[[models]]
name = "minilm-l6-{device}"
path = "{MODELS / 'minilm-l6.onnx'}"
tokenizer = {{ path = "{MODELS / 'minilm-tokenizer.json'}", max_length = 128 }}
warmup = true
pools = [{{ name = "{device}", device = "{device}" }}]
"""
    return text


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    path = tmp_path_factory.mktemp("cuda") / "cuda.toml"
    path.write_text(config_text())
    gateway = Gateway(config=path)
    yield gateway
    gateway.stop()


def rows(n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 17, size=n * 64).astype(np.float32).tolist()


def infer_rows(gw, model: str, n: int, seed: int):
    body = {"inputs": [{"name": "X", "shape": [n, 64], "datatype": "FP32", "data": rows(n, seed)}]}
    r = requests.post(f"{gw.base}/v2/models/{model}/infer", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r


def outputs(response) -> dict:
    return {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in response.json()["outputs"]}


@pytest.mark.parametrize("model", ROW_MODELS)
@pytest.mark.parametrize("n", [1, 8, 32])
def test_a_cuda_pool_answers_as_the_cpu_pool_does(gw, model, n):
    cpu = infer_rows(gw, f"{model}-cpu", n, seed=n)
    gpu = infer_rows(gw, f"{model}-cuda", n, seed=n)
    assert cpu.headers["x-switchyard-device"] == "cpu"
    assert gpu.headers["x-switchyard-device"] == "cuda"
    a, b = outputs(cpu), outputs(gpu)
    np.testing.assert_allclose(b["probabilities"], a["probabilities"], rtol=RTOL, atol=ATOL)
    # A label may differ only where the two top probabilities are a tie
    # within the tolerance.
    top2 = np.sort(a["probabilities"], axis=1)[:, -2:]
    close = np.abs(top2[:, 1] - top2[:, 0]) < ATOL
    assert np.all((a["label"] == b["label"]) | close)


def test_minilm_embeddings_on_cuda_equal_the_cpu_ones(gw):
    def embed(model):
        body = {"inputs": [{"name": "text", "shape": [len(TEXTS)], "datatype": "BYTES", "data": TEXTS}]}
        r = requests.post(f"{gw.base}/v2/models/{model}/infer", data=json.dumps(body), timeout=60)
        assert r.status_code == 200, r.text
        return r, outputs(r)

    cpu_r, cpu = embed("minilm-l6-cpu")
    gpu_r, gpu = embed("minilm-l6-cuda")
    assert gpu_r.headers["x-switchyard-device"] == "cuda"
    (name,) = cpu.keys()
    assert cpu[name].shape == gpu[name].shape == (len(TEXTS), 384)
    np.testing.assert_allclose(gpu[name], cpu[name], rtol=RTOL, atol=ATOL)
    # Unit vectors that point the same way.
    cosine = np.sum(cpu[name] * gpu[name], axis=1)
    assert np.all(cosine > 0.9999), cosine


def batch_rows(gw, model: str) -> tuple[float, float]:
    """(rows, executions) of `model`'s pool batches so far, from /metrics."""
    text = requests.get(f"{gw.admin}/metrics", timeout=10).text
    total = {"sum": 0.0, "count": 0.0}
    for kind in total:
        pattern = rf'^switchyard_pool_batch_size_rows_{kind}\{{[^}}]*model="{re.escape(model)}"[^}}]*\}} (\S+)$'
        total[kind] = sum(float(v) for v in re.findall(pattern, text, re.MULTILINE))
    return total["sum"], total["count"]


def test_dynamic_batching_forms_batches_on_the_gpu(gw):
    model = "synth-heavy-cuda"
    rows_before, runs_before = batch_rows(gw, model)
    n = 24
    barrier = threading.Barrier(n)
    failures = []

    def call(i):
        barrier.wait()
        try:
            r = infer_rows(gw, model, 1, seed=100 + i)
            assert r.headers["x-switchyard-device"] == "cuda"
        except AssertionError as e:
            failures.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures
    rows_after, runs_after = batch_rows(gw, model)
    rows, runs = rows_after - rows_before, runs_after - runs_before
    assert rows == n, (rows, runs)
    # 24 one-row requests sent at once, held up to 50 ms for company: far
    # fewer executions than requests.
    assert runs <= n / 4, f"{runs} executions for {n} concurrent one-row requests"
