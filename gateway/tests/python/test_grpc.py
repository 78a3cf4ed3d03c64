"""The gRPC Open Inference Protocol (`inference.GRPCInferenceService`)
against the real gateway, driven by unmodified `tritonclient[grpc]` (its
client, and its generated stub for hand-built requests): metadata, config,
inference on every example model with typed and raw contents compared with
onnxruntime and with the REST answer, draft-then-final on ModelStreamInfer,
auth, deadlines, limits, malformed input with the right codes, statistics,
metrics."""

import queue
import threading
import time

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conftest import Gateway, free_port
from routing_util import Reference, write_config
from sse_util import pause, pool_stats, resume, wait_for

EXAMPLE_MODELS = ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"]
KEY = "grpc-test-key-0123456789"

CONFIG = """
[server]
max_body_bytes = "1MiB"
max_concurrent_requests = 6

[cache]

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true
batching = { max_batch_size = 64, max_queue_delay_us = 200 }
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true
batching = { max_batch_size = 64, max_queue_delay_us = 200 }
pools = [{ device = "cpu", workers = 2, intra_op_threads = 1 }]
[[models]]
name = "synth-heavy"
path = "{models}/synth-heavy.onnx"
[[models]]
name = "synth-wide"
path = "{models}/synth-wide.onnx"

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 500, max = 1000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
draft = { heartbeat_ms = 100 }

[[models]]
name = "private-cheap"
path = "{models}/digits-cheap.onnx"

[[routes]]
name = "private"
models = ["private-cheap"]
auth = { keys = [{ key = "%s", tenant = "team-a" }] }
""" % KEY


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    grpc_port = free_port()
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("grpc"), CONFIG),
                 extra_args=["--grpc-listen", f"127.0.0.1:{grpc_port}"])
    gw.grpc_url = f"127.0.0.1:{grpc_port}"
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def client(gw):
    c = grpcclient.InferenceServerClient(url=gw.grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def stub(gw):
    channel = grpc.insecure_channel(gw.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def rows(n, seed):
    return np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)


def x_input(x):
    i = grpcclient.InferInput("X", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def code_of(err: InferenceServerException) -> str:
    return str(err.status()).replace("StatusCode.", "")


def params(response) -> dict:
    """A response's parameters as plain Python values."""
    out = {}
    for key, p in response.parameters.items():
        out[key] = getattr(p, p.WhichOneof("parameter_choice"))
    return out


def test_health_and_server_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta.name == "switchyard"
    assert "binary_tensor_data" in meta.extensions


@pytest.mark.parametrize("name", EXAMPLE_MODELS + ["digits"])
def test_metadata_and_config_equal_the_rest_documents(gw, client, name):
    rest = httpclient.InferenceServerClient(url=gw.url)
    assert client.is_model_ready(name)
    meta = client.get_model_metadata(name)
    rest_meta = rest.get_model_metadata(name)
    assert meta.name == rest_meta["name"] and list(meta.versions) == rest_meta["versions"]
    assert [(t.name, t.datatype, list(t.shape)) for t in meta.inputs] == \
        [(t["name"], t["datatype"], t["shape"]) for t in rest_meta["inputs"]]
    assert [(t.name, t.datatype, list(t.shape)) for t in meta.outputs] == \
        [(t["name"], t["datatype"], t["shape"]) for t in rest_meta["outputs"]]
    config = client.get_model_config(name, as_json=True)["config"]
    rest_config = rest.get_model_config(name)
    for key in ["name", "platform", "backend", "max_batch_size"]:
        assert str(config.get(key, 0)) == str(rest_config[key]), key
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]] == \
        [(i["name"], i["data_type"], i["dims"]) for i in rest_config["input"]]
    rest.close()


def test_instance_groups_and_dynamic_batching_show_the_pools(client):
    config = client.get_model_config("digits-heavy").config
    assert [(g.kind, g.count) for g in config.instance_group] == [(2, 2)], "KIND_CPU, 2 workers"
    assert config.max_batch_size == 64
    assert config.dynamic_batching.max_queue_delay_microseconds == 200
    assert list(config.dynamic_batching.preferred_batch_size) == [64]


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_raw_contents_infer_matches_onnxruntime_and_rest(gw, client, name):
    x = rows(3, seed=len(name))
    result = client.infer(name, [x_input(x)])
    expected_label, expected_probs = Reference(name).run(name, x)
    np.testing.assert_array_equal(result.as_numpy("label"), expected_label)
    np.testing.assert_allclose(result.as_numpy("probabilities"), expected_probs, rtol=1e-5, atol=1e-6)
    rest = httpclient.InferenceServerClient(url=gw.url)
    hi = httpclient.InferInput("X", list(x.shape), "FP32")
    hi.set_data_from_numpy(x, binary_data=True)
    rest_result = rest.infer(name, [hi])
    np.testing.assert_array_equal(result.as_numpy("probabilities"), rest_result.as_numpy("probabilities"))
    rest.close()
    response = result.get_response()
    assert response.model_name == name and response.model_version == "1"
    p = params(response)
    assert p["switchyard_model"] == name and p["switchyard_device"] == "cpu"


def typed_request(model, x, request_id="typed"):
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    tensor = request.inputs.add(name="X", datatype="FP32", shape=list(x.shape))
    tensor.contents.fp32_contents.extend(x.ravel().tolist())
    request.outputs.add(name="probabilities")
    return request


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_typed_contents_infer_equals_raw(client, stub, name):
    x = rows(2, seed=7)
    response = stub.ModelInfer(typed_request(name, x))
    assert response.id == "typed"
    assert [o.name for o in response.outputs] == ["probabilities"]
    probs = np.frombuffer(response.raw_output_contents[0], dtype=np.float32).reshape(list(response.outputs[0].shape))
    raw = client.infer(name, [x_input(x)]).as_numpy("probabilities")
    np.testing.assert_array_equal(probs, raw)


def test_route_explains_and_caches_like_rest(client):
    x = rows(1, seed=99)
    first = params(client.infer("digits", [x_input(x)]).get_response())
    second = params(client.infer("digits", [x_input(x)]).get_response())
    assert first["x-cache"] == "miss" and second["x-cache"] == "hit-l1"
    assert first["switchyard_reason"].startswith("cascade")
    assert second["switchyard_model"] == first["switchyard_model"]
    fresh = params(client.infer("digits", [x_input(x)], headers={"cache-control": "no-cache"}).get_response())
    assert fresh["x-cache"] != "hit-l1"


def test_classification_parameter(client):
    x = rows(2, seed=3)
    out = grpcclient.InferRequestedOutput("probabilities", class_count=3)
    result = client.infer("digits-cheap", [x_input(x)], outputs=[out])
    classes = result.as_numpy("probabilities")
    assert classes.shape == (2, 3)
    _, probs = Reference("digits-cheap").run("digits-cheap", x)
    top = [int(c.decode().split(":")[1]) for c in classes[:, 0]]
    assert top == probs.argmax(axis=1).tolist()


class StreamResults:
    """Collects ModelStreamInfer callbacks."""

    def __init__(self):
        self.items = queue.Queue()

    def __call__(self, result, error):
        self.items.put((result, error))

    def next(self, timeout=20):
        return self.items.get(timeout=timeout)


def unsure_and_sure_rows():
    import json
    from conftest import MODELS
    data = json.loads((MODELS / "digits-test.json").read_text())
    x = np.asarray(data["X"], np.float32)
    _, probs = Reference("digits-cheap").run("digits-cheap", x)
    top = probs.max(axis=1)
    return x[np.flatnonzero(top <= 0.6)[0]][None, :], x[np.flatnonzero(top >= 0.95)[0]][None, :]


def test_stream_answers_a_cascade_route_with_draft_then_final(gw):
    """The heavy pool is held until the draft is out (as the SSE tests do):
    both models are fast enough here for the final to win the race, and a
    draft is never sent after its final."""
    unsure, _ = unsure_and_sure_rows()
    ref = Reference("digits-cheap", "digits-heavy")
    client = grpcclient.InferenceServerClient(url=gw.grpc_url)
    results = StreamResults()
    client.start_stream(callback=results, headers={"cache-control": "no-store"})
    pause(gw, "digits-heavy")
    try:
        client.async_stream_infer("digits", [x_input(unsure)], request_id="r1")
        draft, err = results.next()
        assert err is None, err
    finally:
        resume(gw, "digits-heavy")
    final, err = results.next()
    assert err is None, err
    client.stop_stream()
    client.close()
    d, f = params(draft.get_response()), params(final.get_response())
    assert (d["stage"], d["model"], d["triton_final_response"]) == ("draft", "digits-cheap", False)
    assert (f["stage"], f["model"], f["triton_final_response"]) == ("final", "digits-heavy", True)
    assert f["x-cache"] in ("miss", "bypass") and f["from_draft"] is False
    assert draft.get_response().id == final.get_response().id == "r1"
    np.testing.assert_array_equal(draft.as_numpy("label"), ref.run("digits-cheap", unsure)[0])
    np.testing.assert_array_equal(final.as_numpy("label"), ref.run("digits-heavy", unsure)[0])


def test_stream_serves_many_requests_and_keeps_going_after_an_error(gw):
    client = grpcclient.InferenceServerClient(url=gw.grpc_url)
    results = StreamResults()
    client.start_stream(callback=results)
    client.async_stream_infer("digits-cheap", [x_input(rows(1, 1))], request_id="a")
    client.async_stream_infer("no-such-model", [x_input(rows(1, 2))], request_id="b")
    client.async_stream_infer("digits-cheap", [x_input(rows(1, 3))], request_id="c", enable_empty_final_response=True)
    got = [results.next() for _ in range(3)]
    client.stop_stream()
    client.close()
    answered = {r.get_response().id: params(r.get_response()) for r, e in got if e is None}
    errors = [e for _, e in got if e is not None]
    assert set(answered) == {"a", "c"}, got
    assert all(p["stage"] == "final" and p["triton_final_response"] is True for p in answered.values())
    assert len(errors) == 1 and "no-such-model" in str(errors[0])


def test_stream_cancel_drops_the_queued_heavy_run(gw):
    """Closing the stream while the heavy model is held drops its queued run."""
    unsure, _ = unsure_and_sure_rows()
    pause(gw, "digits-heavy")
    try:
        before = pool_stats(gw, "digits-heavy")["cancelled"]
        client = grpcclient.InferenceServerClient(url=gw.grpc_url)
        results = StreamResults()
        client.start_stream(callback=results, headers={"cache-control": "no-store"})
        client.async_stream_infer("digits", [x_input(unsure + 0.25)], request_id="held")
        draft, err = results.next()
        assert err is None and params(draft.get_response())["stage"] == "draft"
        client.stop_stream(cancel_requests=True)
        client.close()
        time.sleep(0.2)  # the cancellation reaches the server
    finally:
        resume(gw, "digits-heavy")
    # The queued run is skipped, and counted, when the resumed pool reaches it.
    wait_for(lambda: pool_stats(gw, "digits-heavy")["cancelled"] > before, "the held heavy run to be cancelled")


def test_api_keys_in_metadata(client):
    x = rows(1, seed=5)
    with pytest.raises(InferenceServerException) as e:
        client.infer("private", [x_input(x)])
    assert code_of(e.value) == "UNAUTHENTICATED"
    with pytest.raises(InferenceServerException) as e:
        client.infer("private", [x_input(x)], headers={"x-api-key": "wrong"})
    assert code_of(e.value) == "UNAUTHENTICATED"
    ok = client.infer("private", [x_input(x)], headers={"x-api-key": KEY})
    assert ok.as_numpy("label").shape == (1,)
    ok = client.infer("private", [x_input(x)], headers={"authorization": f"Bearer {KEY}"})
    assert ok.as_numpy("label").shape == (1,)
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("private")
    assert code_of(e.value) == "UNAUTHENTICATED"


def test_deadline_and_budget_header_the_tighter_wins(client):
    x = rows(1, seed=11)
    nocache = {"cache-control": "no-store"}
    default = params(client.infer("digits", [x_input(x)], headers=nocache).get_response())
    assert default["switchyard_budget_ms"] == 500
    timed = params(client.infer("digits", [x_input(x)], headers=nocache, client_timeout=0.2).get_response())
    # gRPC clients send the time left (rounded by their stack), about 200 ms.
    assert 150 <= timed["switchyard_budget_ms"] <= 210
    tighter = params(client.infer("digits", [x_input(x)], client_timeout=0.2,
                                  headers={**nocache, "x-latency-budget-ms": "30"}).get_response())
    assert tighter["switchyard_budget_ms"] == 30
    with pytest.raises(InferenceServerException) as e:
        client.infer("digits", [x_input(x)], headers={"x-latency-budget-ms": "soon"})
    assert code_of(e.value) == "INVALID_ARGUMENT"


def raw_request(model, shape, datatype, raw):
    request = service_pb2.ModelInferRequest(model_name=model)
    request.inputs.add(name="X", datatype=datatype, shape=shape)
    request.raw_input_contents.append(raw)
    return request


MALFORMED = {
    "raw shorter than the shape": (raw_request("digits-cheap", [1, 64], "FP32", b"\0" * 255), "INVALID_ARGUMENT"),
    "raw longer than the shape": (raw_request("digits-cheap", [1, 64], "FP32", b"\0" * 260), "INVALID_ARGUMENT"),
    "wrong datatype": (raw_request("digits-cheap", [1, 64], "INT32", b"\0" * 256), "INVALID_ARGUMENT"),
    "unknown datatype": (raw_request("digits-cheap", [1, 64], "FLOAT", b"\0" * 256), "INVALID_ARGUMENT"),
    "negative dimension": (raw_request("digits-cheap", [-1, 64], "FP32", b""), "INVALID_ARGUMENT"),
    "huge shape": (raw_request("digits-cheap", [1 << 40, 64], "FP32", b""), "RESOURCE_EXHAUSTED"),
    "overflowing shape": (raw_request("digits-cheap", [1 << 62, 1 << 62], "FP32", b""), "INVALID_ARGUMENT"),
    "wrong feature count": (raw_request("digits-cheap", [1, 63], "FP32", b"\0" * 252), "INVALID_ARGUMENT"),
    "unknown model": (raw_request("nope", [1, 64], "FP32", b"\0" * 256), "NOT_FOUND"),
    "no data": (service_pb2.ModelInferRequest(model_name="digits-cheap", inputs=[
        service_pb2.ModelInferRequest.InferInputTensor(name="X", datatype="FP32", shape=[1, 64])]), "INVALID_ARGUMENT"),
    "typed data in the wrong field": (service_pb2.ModelInferRequest(model_name="digits-cheap", inputs=[
        service_pb2.ModelInferRequest.InferInputTensor(
            name="X", datatype="FP32", shape=[1, 2],
            contents=service_pb2.InferTensorContents(int_contents=[1, 2]))]), "INVALID_ARGUMENT"),
    "raw for some inputs only": (service_pb2.ModelInferRequest(
        model_name="digits-cheap", raw_input_contents=[b"", b""],
        inputs=[service_pb2.ModelInferRequest.InferInputTensor(name="X", datatype="FP32", shape=[1, 64])]),
        "INVALID_ARGUMENT"),
    "unknown output": (service_pb2.ModelInferRequest(
        model_name="digits-cheap", raw_input_contents=[b"\0" * 256],
        inputs=[service_pb2.ModelInferRequest.InferInputTensor(name="X", datatype="FP32", shape=[1, 64])],
        outputs=[service_pb2.ModelInferRequest.InferRequestedOutputTensor(name="nope")]), "INVALID_ARGUMENT"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_requests_get_their_code_and_the_server_keeps_serving(client, stub, case):
    request, code = MALFORMED[case]
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(request)
    assert e.value.code().name == code, (case, e.value.code(), e.value.details())
    assert e.value.details(), "the error says why"
    assert client.infer("digits-cheap", [x_input(rows(1, 0))]).as_numpy("label").shape == (1,)


def test_message_over_the_limit_is_resource_exhausted(client, stub):
    big = np.zeros((5000, 64), np.float32)  # 1.28 MB > max_body_bytes = 1 MiB
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(raw_request("digits-cheap", [5000, 64], "FP32", big.tobytes()))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert client.is_server_live()


def own_connection(gw):
    """A stub on a TCP connection of its own (gRPC Python otherwise shares
    one connection between channels to the same address)."""
    channel = grpc.insecure_channel(gw.grpc_url, options=[("grpc.use_local_subchannel_pool", 1)])
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def test_concurrency_limit_is_resource_exhausted_with_retry_after(gw, stub):
    """Six calls held over two connections (each may hold at most five of
    the six permits) fill server.max_concurrent_requests; a seventh call
    is RESOURCE_EXHAUSTED with retry-after."""
    pause(gw, "synth-heavy")
    x = rows(1, seed=1)
    channels = [own_connection(gw) for _ in range(2)]
    held = [channels[i % 2][1].ModelInfer.future(typed_request("synth-heavy", x + i, f"h{i}")) for i in range(6)]
    try:
        wait_for(lambda: pool_stats(gw, "synth-heavy")["queue_depth"] >= 6, "six calls held in the queue")
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(typed_request("digits-cheap", x))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert dict(e.value.trailing_metadata()).get("retry-after") == "1"
        assert "too many concurrent requests" in e.value.details()
    finally:
        resume(gw, "synth-heavy")
    assert all(f.result(timeout=30).model_name == "synth-heavy" for f in held)
    for channel, _ in channels:
        channel.close()


def test_one_connection_cannot_take_every_permit(gw):
    """server.grpc_max_requests_per_connection (by default 3/4 of the six
    permits: five): a sixth call on the same connection is refused with
    retry-after, while a call on another connection is still admitted."""
    pause(gw, "synth-heavy")
    x = rows(1, seed=3)
    (greedy_channel, greedy), (other_channel, other) = own_connection(gw), own_connection(gw)
    held = [greedy.ModelInfer.future(typed_request("synth-heavy", x + i, f"g{i}")) for i in range(5)]
    try:
        wait_for(lambda: pool_stats(gw, "synth-heavy")["queue_depth"] >= 5, "five calls held in the queue")
        with pytest.raises(grpc.RpcError) as e:
            greedy.ModelInfer(typed_request("digits-cheap", x))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "server.grpc_max_requests_per_connection" in e.value.details()
        assert dict(e.value.trailing_metadata()).get("retry-after") == "1"
        assert other.ModelInfer(typed_request("digits-cheap", x)).model_name == "digits-cheap"
    finally:
        resume(gw, "synth-heavy")
    assert all(f.result(timeout=30).model_name == "synth-heavy" for f in held)
    greedy_channel.close()
    other_channel.close()


def test_statistics_count_the_executions(client):
    client.infer("synth-wide", [x_input(rows(4, seed=2))])
    stats = client.get_inference_statistics("synth-wide").model_stats
    assert [s.name for s in stats] == ["synth-wide"]
    assert stats[0].inference_count >= 4 and stats[0].execution_count >= 1
    assert stats[0].inference_stats.compute_infer.count >= 1
    everything = client.get_inference_statistics().model_stats
    assert {"digits-cheap", "digits-heavy"} <= {s.name for s in everything}


def test_calls_are_counted_and_logged(gw, client):
    client.infer("digits-cheap", [x_input(rows(1, seed=21))])
    with pytest.raises(InferenceServerException):
        client.infer("nope", [x_input(rows(1, seed=21))])

    def counted():
        text = requests.get(f"{gw.admin}/metrics", timeout=5).text
        ok = 'switchyard_requests_total{endpoint="grpc_infer",route="digits-cheap",status="200"}' in text
        missing = 'switchyard_requests_total{endpoint="grpc_infer",route="_other",status="404"}' in text
        return ok and missing

    wait_for(counted, "gRPC calls in /metrics")

    # Logged after the metrics are counted, far into the module's log.
    def logged():
        log = gw.whole_log()
        return all(
            f"path=/inference.GRPCInferenceService/ModelInfer status={status}" in log for status in (200, 404)
        )

    wait_for(logged, "both gRPC calls in the access log")


def test_grpc_is_off_unless_configured(gateway):
    doc = requests.get(f"{gateway.admin}/admin/config", timeout=5).json()
    assert doc["config"]["server"]["grpc_listen"] is None


def test_a_port_in_use_fails_start_up(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError) as e:
            Gateway(extra_args=["--grpc-listen", f"127.0.0.1:{port}"])
    assert "grpc_listen" in str(e.value)
