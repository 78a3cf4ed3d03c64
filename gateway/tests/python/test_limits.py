"""Per-request limits on the real binary (issue 24, item 1): a request
whose rows, tokens or response exceed a limit gets 413 at once, naming the
setting to raise, without the memory it would have cost; a large request
that is accepted runs in batch-sized chunks, so a small request sent
meanwhile does not wait for all of it."""

import json
import threading
import time

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import write_config
from sse_util import pool_stats, wait_for

TEXT = ["minilm-l3.onnx", "minilm-tokenizer.json"]
needs_text = pytest.mark.skipif(
    not all((MODELS / f).is_file() for f in TEXT),
    reason="text models not fetched (scripts/setup.sh test runs models/text_models.py)",
)

# Default limits only: this config is valid before the limits existed.
CONFIG = """
[[models]]
name = "minilm"
path = "{models}/minilm-l3.onnx"
tokenizer = { path = "{models}/minilm-tokenizer.json", max_length = 128 }
batching = { max_batch_size = 16, max_queue_delay_us = 1000 }
warmup = true
[[models]]
name = "synth-heavy"
path = "{models}/synth-heavy.onnx"
batching = { max_batch_size = 64, max_queue_delay_us = 500 }
warmup = true
"""

TIGHT = """
[server]
max_response_bytes = "64KiB"

[[models]]
name = "minilm"
path = "{models}/minilm-l3.onnx"
tokenizer = { path = "{models}/minilm-tokenizer.json", max_length = 128 }
batching = { max_batch_size = 16, max_queue_delay_us = 1000 }
limits = { max_rows = 64, max_tokens = 200 }
warmup = true
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
limits = { max_rows = 4 }
[[routes]]
name = "digits"
models = ["digits-cheap"]
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("limits"), CONFIG))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("tight"), TIGHT))
    yield gw
    gw.stop()


def rss_mb(gw):
    for line in open(f"/proc/{gw.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def infer(gw, model, body, headers=None, timeout=30):
    started = time.monotonic()
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = requests.post(f"{gw.base}/v2/models/{model}/infer", data=data, headers=headers or {}, timeout=timeout)
    return r, time.monotonic() - started


def texts(items, binary_output=False):
    body = {"inputs": [{"name": "text", "shape": [len(items)], "datatype": "BYTES", "data": items}]}
    if binary_output:
        body["outputs"] = [{"name": "embedding", "parameters": {"binary_data": True}}]
    return body


def rows(n, value=0.5):
    return {"inputs": [{"name": "X", "shape": [n, 64], "datatype": "FP32", "data": [value] * (64 * n)}]}


def empty_strings_binary(n):
    header = json.dumps({"inputs": [{"name": "text", "shape": [n], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": 4 * n}}]}).encode()
    return header + b"\0\0\0\0" * n, {"Inference-Header-Content-Length": str(len(header)),
                                     "Content-Type": "application/octet-stream"}


def assert_413(r, *words):
    assert r.status_code == 413, (r.status_code, r.text[:300])
    message = r.json()["error"]
    for word in words:
        assert word in message, message


@needs_text
def test_too_many_rows_get_413_at_once_and_cost_no_memory(gw):
    assert infer(gw, "minilm", texts(["warm up"]))[0].status_code == 200
    assert infer(gw, "synth-heavy", rows(1))[0].status_code == 200
    before = rss_mb(gw)
    r, took = infer(gw, "minilm", texts([""] * 20_000))  # 80 KB of JSON
    assert_413(r, "20000 rows", "minilm", "models[].limits.max_rows", "128")
    assert took < 2.0, took
    body, headers = empty_strings_binary(2_000_000)  # 8 MB
    r, took = infer(gw, "minilm", body, headers)
    assert_413(r, "2000000 rows", "models[].limits.max_rows")
    assert took < 2.0, took
    r, took = infer(gw, "synth-heavy", rows(4096))
    assert_413(r, "4096 rows", "synth-heavy", "models[].limits.max_rows", "512")
    assert took < 2.0, took
    grown = rss_mb(gw) - before
    assert grown < 40, f"RSS grew by {grown:.0f} MB answering 413s"
    assert gw.alive()


@needs_text
def test_a_long_text_is_cut_before_it_is_tokenised(gw):
    """A 4 MB text costs what its first tokens cost: the same embedding as
    a text of a few hundred words (both are truncated to 128 tokens), and
    no memory for millions of tokens."""
    infer(gw, "minilm", texts(["warm up"]))
    before = rss_mb(gw)
    long_text, short_text = "word " * 800_000, "word " * 300
    r, _ = infer(gw, "minilm", texts([long_text, short_text]))
    assert r.status_code == 200, r.text[:300]
    long_emb, short_emb = np.asarray(r.json()["outputs"][0]["data"], np.float32).reshape(2, -1)
    np.testing.assert_allclose(long_emb, short_emb, atol=1e-6)
    grown = rss_mb(gw) - before
    assert grown < 60, f"RSS grew by {grown:.0f} MB for one long text"


def test_a_large_request_runs_in_chunks_that_let_a_small_one_through(gw):
    before = pool_stats(gw, "synth-heavy")
    result = {}

    def large():
        result["large"], _ = infer(gw, "synth-heavy", rows(512, 0.25), timeout=120)
        result["large_done"] = time.monotonic()

    worker = threading.Thread(target=large)
    worker.start()
    wait_for(lambda: pool_stats(gw, "synth-heavy")["executions"] > before["executions"],
             "the large request to start executing")
    small, took = infer(gw, "synth-heavy", rows(1, 0.75), timeout=120)
    small_done = time.monotonic()
    worker.join()
    assert small.status_code == 200 and result["large"].status_code == 200, result["large"].text[:300]
    assert small_done < result["large_done"], f"the small request waited {took:.2f} s for the large one"
    large = result["large"].json()
    assert large["outputs"][0]["shape"][0] == 512
    assert large["parameters"]["switchyard_batch_size"] <= 64, "no execution ran more than one batch"
    after = pool_stats(gw, "synth-heavy")
    assert after["executed_rows"] - before["executed_rows"] == 513
    # The chunks give the same answer as the rows one by one would.
    one, _ = infer(gw, "synth-heavy", rows(1, 0.25))
    assert large["outputs"][0]["data"][:1] == one.json()["outputs"][0]["data"]


@needs_text
def test_configured_limits_name_their_setting(tight):
    r, _ = infer(tight, "minilm", texts(["a few words here"] * 65, binary_output=True))
    assert_413(r, "65 rows", "64")
    r, _ = infer(tight, "minilm", texts(["one two three four five six seven eight nine ten"] * 30, True))
    assert_413(r, "tokens", "200", "max_tokens")
    assert infer(tight, "minilm", texts(["one two three"] * 10))[0].status_code == 200
    r, _ = infer(tight, "digits", rows(5))
    assert_413(r, "route 'digits'", "digits-cheap", "max_rows")
    assert infer(tight, "digits", rows(4))[0].status_code == 200


@needs_text
def test_a_response_over_max_response_bytes_is_refused_before_it_is_computed(tight):
    """16 embeddings of 384 floats could take ~98 KB of JSON: over 64 KiB,
    refused before the model runs; as binary (24 KB) they fit."""
    before = pool_stats(tight, "minilm")
    r, _ = infer(tight, "minilm", texts(["some text"] * 16))
    assert_413(r, "server.max_response_bytes", str(64 * 1024))
    assert pool_stats(tight, "minilm")["executions"] == before["executions"], "the model did not run"
    r, _ = infer(tight, "minilm", texts(["some text"] * 16, binary_output=True))
    assert r.status_code == 200, r.text[:300]
