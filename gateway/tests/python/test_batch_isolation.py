"""One client's bad element fails only that client's request, never the
batch it shared (issue 37, item 5), through the real binary.

Two BYTES-input models are built at test time with the `onnx` package: one
casts its strings to integers (ONNX Runtime fails the whole run on a
string that is not a number), one echoes them. Eight clients send valid
requests while two send bad ones (text that is no number; strings with
NUL bytes, valid UTF-8 and valid for the protocol), with batching that
waits for company so that their requests share batches. Every valid
request is answered; a string that is no number gets a 400 that says the
model cannot run that request's data; strings with NUL bytes are echoed
whole."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import Gateway
from sse_util import pause, pool_stats, resume, wait_for

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

VALID_CLIENTS, BAD_CLIENTS, PER_CLIENT = 8, 2, 300


def save(path, name, node, out_type):
    graph = helper.make_graph(
        [node],
        name,
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["N", 1])],
        [helper.make_tensor_value_info("out", out_type, ["N", 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("isolation")
    save(tmp / "cast.onnx", "cast", helper.make_node("Cast", ["text"], ["out"], to=TensorProto.INT64),
         TensorProto.INT64)
    save(tmp / "echo.onnx", "echo", helper.make_node("Identity", ["text"], ["out"]), TensorProto.STRING)
    # idle_dispatch off: every batch waits the delay for company, so the
    # clients' requests share batches.
    batching = "{ max_batch_size = 16, max_queue_delay_us = 2000, queue_capacity = 1024, idle_dispatch = false }"
    config = tmp / "isolation.toml"
    config.write_text("".join(
        f'[[models]]\nname = "{name}"\npath = "{tmp / (name + ".onnx")}"\nwarmup = true\nbatching = {batching}\n'
        for name in ["cast", "echo"]
    ))
    gateway = Gateway(config=config)
    yield gateway
    gateway.stop()


def infer(session, gw, model, text):
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1, 1], "data": [text]}]}
    return session.post(f"{gw.base}/v2/models/{model}/infer", json=body, timeout=60)


def hammer(gw, model, valid, bad):
    """VALID_CLIENTS threads send `valid(client, i)` and BAD_CLIENTS threads
    `bad(client, i)`, PER_CLIENT requests each, all at once. Returns
    (valid outcomes, bad outcomes) as (text sent, status, body)."""
    start = threading.Barrier(VALID_CLIENTS + BAD_CLIENTS)

    def client(make, c):
        outcomes = []
        with requests.Session() as s:
            start.wait()
            for i in range(PER_CLIENT):
                text = make(c, i)
                r = infer(s, gw, model, text)
                outcomes.append((text, r.status_code, r.json()))
        return outcomes

    with ThreadPoolExecutor(VALID_CLIENTS + BAD_CLIENTS) as pool:
        valid_runs = [pool.submit(client, valid, c) for c in range(VALID_CLIENTS)]
        bad_runs = [pool.submit(client, bad, c) for c in range(BAD_CLIENTS)]
        return [o for f in valid_runs for o in f.result()], [o for f in bad_runs for o in f.result()]


def output(body):
    return body["outputs"][0]["data"][0]


def test_a_string_the_model_cannot_cast_fails_only_its_own_request(gw):
    valid, bad = hammer(
        gw, "cast",
        valid=lambda c, i: str(c * 100_000 + i),      # distinct: no cache hits
        bad=lambda c, i: f"x{c}-{i}",
    )
    failed = [(t, s, b) for t, s, b in valid if s != 200 or output(b) != int(t)]
    assert not failed, f"{len(failed)} of {len(valid)} valid requests failed, e.g. {failed[:3]}"
    # Each bad request gets an error: 400 when the model was seen running
    # (a batch-mate ran alone, or the run before a lone one succeeded),
    # 500 when it was not (both bad clients' requests alone in a batch).
    assert all(s in (400, 500) for _, s, _ in bad), sorted({s for _, s, _ in bad})
    rejected = [b for _, s, b in bad if s == 400]
    assert len(rejected) > len(bad) // 2, f"only {len(rejected)} of {len(bad)} bad requests got 400"
    message = rejected[0]["error"]
    assert "cannot run this request's data" in message and "Cast" in message, message
    stats = pool_stats(gw, "cast")
    assert stats["errors"] == len(bad), stats


def test_strings_with_nul_bytes_are_echoed_whole_beside_other_clients(gw):
    valid, nul = hammer(
        gw, "echo",
        valid=lambda c, i: f"valid {c} {i}",
        bad=lambda c, i: f"nul\x00{c}\x00{i}",
    )
    for outcomes in (valid, nul):
        wrong = [(t, s, b) for t, s, b in outcomes if s != 200 or output(b) != t]
        assert not wrong, f"{len(wrong)} of {len(outcomes)} failed or changed, e.g. {wrong[:3]}"
    assert pool_stats(gw, "echo")["errors"] == 0


def test_a_failed_batch_is_rerun_request_by_request_and_counted(gw):
    """A deterministic mixed batch: three requests queued on the paused
    pool run as one batch when it resumes."""
    before = pool_stats(gw, "cast")
    pause(gw, "cast")
    try:
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(infer, requests, gw, "cast", t) for t in ["5", "five", "6"]]
            wait_for(lambda: pool_stats(gw, "cast")["queue_depth"] == 3, "three requests queued")
            resume(gw, "cast")
            answers = [f.result() for f in futures]
    finally:
        resume(gw, "cast")
    assert [r.status_code for r in answers] == [200, 400, 200], [r.text for r in answers]
    assert (output(answers[0].json()), output(answers[2].json())) == (5, 6)
    after = pool_stats(gw, "cast")
    assert after["isolated_batches"] == before.get("isolated_batches", 0) + 1, after
    assert after["errors"] == before["errors"] + 1, after
    metrics = requests.get(f"{gw.admin}/metrics", timeout=10).text
    assert 'switchyard_pool_isolated_batches_total{model="cast"' in metrics
