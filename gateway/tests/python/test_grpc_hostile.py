"""The gRPC listener against hostile and careless clients (issue: defects
found by hostile testing, round two), on the real binary: a stream that
never reads its responses, streams opened with headers only, messages
that never complete, messages of empty entries, connections that never
send the HTTP/2 preface, undecodable messages, huge echoed names, and
statistics of key-protected models. Memory is read from the server's
/proc status (VmHWM: its peak RSS, so a short spike is not missed)."""

import resource
import socket
import time

import grpc
import numpy as np
import pytest
import requests
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import Gateway
from h2_raw import RawH2, frame
from routing_util import write_config
from test_metrics import parse, scrape, value

KEY = "hostile-test-key-0123456789"

CONFIG = """
[server]
max_body_bytes = "16MiB"
max_concurrent_requests = 64
max_response_bytes = "4KiB"
body_read_timeout_ms = 1000
header_timeout_ms = 1000
keepalive_timeout_s = 2
grpc_max_streams = 8
grpc_max_in_flight_per_stream = 4

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
batching = { max_batch_size = 64, max_queue_delay_us = 200 }

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

MiB = 1 << 20


def start(tmp_path, config=CONFIG, preexec_fn=None):
    """A gateway with its gRPC listener on a port it picks (`gw.grpc_port`)."""
    return Gateway(config=write_config(tmp_path, config), preexec_fn=preexec_fn,
                   extra_args=["--grpc-listen", "127.0.0.1:0"])


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = start(tmp_path_factory.mktemp("hostile"))
    yield gw
    gw.stop()


@pytest.fixture
def fresh(tmp_path):
    """A gateway of its own, for a test that reads the peak RSS (VmHWM)."""
    gw = start(tmp_path)
    yield gw
    gw.stop()


def status_kib(gw, field):
    """A VmRSS/VmHWM-style field of the server's /proc status, in KiB."""
    with open(f"/proc/{gw.proc.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc status")


def rows(n, seed=0):
    return np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)


def infer_request(model="digits-cheap", n=1, seed=0):
    x = rows(n, seed)
    tensor = service_pb2.ModelInferRequest().InferInputTensor(
        name="X", datatype="FP32", shape=list(x.shape),
        contents=service_pb2.InferTensorContents(fp32_contents=x.ravel().tolist()))
    return service_pb2.ModelInferRequest(model_name=model, inputs=[tensor])


def rest_infer(gw, seed=0):
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32",
                        "data": rows(1, seed).ravel().tolist()}]}
    return requests.post(f"{gw.base}/v2/models/digits-cheap/infer", json=body, timeout=10)


def in_flight(gw):
    return value(parse(scrape(gw)), "switchyard_requests_in_flight")


def raw_call(gw, method, payload, metadata=()):
    """A unary call whose request is `payload` bytes as they are."""
    with grpc.insecure_channel(f"127.0.0.1:{gw.grpc_port}",
                               options=[("grpc.max_send_message_length", 64 * MiB)]) as channel:
        call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        return call(payload, metadata=metadata, timeout=60)


def test_a_stream_that_never_reads_holds_a_bounded_share(gw):
    """Item 1: thousands of requests on streams whose client never opens
    its receive window. The server reads at most
    grpc_max_in_flight_per_stream (4) of each stream's requests, the
    permits go back once the answers are computed, REST clients are
    served throughout, and memory stays flat."""
    assert rest_infer(gw).status_code == 200
    rss_before = status_kib(gw, "VmRSS")
    attacker = RawH2(gw.grpc_port, window=0)
    try:
        attacker.pump(0.2)
        message = frame(infer_request())
        streams = [attacker.open("ModelStreamInfer") for _ in range(4)]
        for sid in streams:
            attacker.send(sid, message * 3000, wait=2)
        attacker.pump(0.5)
        seen = []
        for i in range(30):
            seen.append(in_flight(gw))
            r = rest_infer(gw, seed=i)
            assert r.status_code == 200, (r.status_code, r.text, seen)
        assert max(seen) <= 4 * 4 + 1, seen
        grown_mib = (status_kib(gw, "VmRSS") - rss_before) / 1024
        assert grown_mib < 100, f"RSS grew {grown_mib:.0f} MiB while the streams were held"
    finally:
        attacker.close()
    assert gw.alive()


def test_streams_per_connection_are_limited_and_advertised(gw):
    """Item 2: the listener advertises SETTINGS_MAX_CONCURRENT_STREAMS
    (grpc_max_streams)."""
    client = RawH2(gw.grpc_port)
    try:
        client.wait_for(lambda e: type(e).__name__ == "RemoteSettingsChanged", 10)
        assert client.server_max_streams == 8
    finally:
        client.close()


def test_headers_only_and_incomplete_messages_time_out(gw):
    """Item 2: a unary call whose message never comes, or never
    completes, ends with DEADLINE_EXCEEDED after body_read_timeout_ms
    (1 s here) and frees its stream; so does a ModelStreamInfer stream
    that stays idle past keepalive_timeout_s (2 s)."""
    client = RawH2(gw.grpc_port)
    try:
        headers_only = client.open("ModelInfer")
        short = client.open("ModelInfer")
        payload = infer_request().SerializeToString()
        client.send(short, (b"\x00" + len(payload).to_bytes(4, "big") + payload)[:-1])
        idle_stream = client.open("ModelStreamInfer")
        for sid in (headers_only, short):
            code, message = client.status_of(sid, 30) or (None, None)
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0], (sid, code, message)
            assert "body_read_timeout_ms" in message
        code, message = client.status_of(idle_stream, 30) or (None, None)
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0], (code, message)
        assert "keepalive_timeout_s" in message
    finally:
        client.close()


def test_an_idle_connection_is_closed(gw):
    """Item 2/6: a connection with no call in progress is closed after
    keepalive_timeout_s (2 s)."""
    client = RawH2(gw.grpc_port)
    try:
        client.wait_for(lambda e: False, 30)
        assert client.closed, "the server kept an idle connection open"
    finally:
        client.close()


def test_connections_without_a_preface_are_closed(gw):
    """Item 6: TCP connections that never send the HTTP/2 preface are
    closed after header_timeout_ms (1 s here) and counted."""
    socks = [socket.create_connection(("127.0.0.1", gw.grpc_port), timeout=30) for _ in range(20)]
    try:
        for s in socks:
            # The server's own preface (its SETTINGS) comes first, then EOF.
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
    finally:
        for s in socks:
            s.close()
    metrics = parse(scrape(gw))
    assert value(metrics, "switchyard_connections_closed_total", listener="grpc", reason="header_timeout") >= 20


def test_silent_connections_cannot_take_the_descriptors(tmp_path):
    """Item 6: under an open-file limit of 512, 600 silent gRPC
    connections used to take every descriptor, so REST calls went
    unanswered. The gRPC listener now shares the descriptor budget with
    REST: at its share it closes the longest-waiting connections."""
    def low_fd_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))

    gw = start(tmp_path, preexec_fn=low_fd_limit)
    socks = []
    try:
        for _ in range(600):
            try:
                socks.append(socket.create_connection(("127.0.0.1", gw.grpc_port), timeout=5))
            except OSError:
                break
        for i in range(5):
            assert rest_infer(gw, seed=i).status_code == 200
        metrics = parse(scrape(gw))
        assert value(metrics, "switchyard_connections_open", listener="grpc") <= 128
    finally:
        for s in socks:
            s.close()
        gw.stop()


@pytest.mark.parametrize("field,entry", [
    ("inputs", b"\x2a\x00"),
    ("requested outputs", b"\x32\x00"),
    ("raw_input_contents entries", b"\x3a\x00"),
])
def test_empty_entries_are_refused_before_they_are_decoded(fresh, field, entry):
    """Item 3 (gRPC): an 8 MiB message of 4 M empty entries is refused
    with RESOURCE_EXHAUSTED from a count on the wire; the server's peak
    memory does not move (it grew by 0.2-1.8 GB when prost decoded them)."""
    peak_before = status_kib(fresh, "VmHWM")
    name = b"digits-cheap"
    payload = b"\x0a" + bytes([len(name)]) + name + entry * (4 * MiB)
    with pytest.raises(grpc.RpcError) as e:
        raw_call(fresh, "ModelInfer", payload)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert f"{4 * MiB} {field}, the limit is 64" in e.value.details()
    grown_mib = (status_kib(fresh, "VmHWM") - peak_before) / 1024
    assert grown_mib < 150, f"peak RSS grew {grown_mib:.0f} MiB"


def test_strings_beyond_the_shape_are_refused_before_they_are_decoded(fresh):
    """Item 3 (gRPC): 2 M empty bytes_contents for a shape of one element."""
    peak_before = status_kib(fresh, "VmHWM")
    contents = b"\x42\x00" * (2 * MiB)
    tensor = b"\x0a\x01T\x12\x05BYTES\x1a\x01\x01" + b"\x2a" + varint(len(contents)) + contents
    payload = b"\x0a\x0cdigits-cheap" + b"\x2a" + varint(len(tensor)) + tensor
    with pytest.raises(grpc.RpcError) as e:
        raw_call(fresh, "ModelInfer", payload)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert "holds 2097152 elements" in e.value.details()
    assert (status_kib(fresh, "VmHWM") - peak_before) / 1024 < 150


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_an_undecodable_message_is_invalid_argument_counted_and_logged(gw):
    """Item 12: bytes that are not protobuf get INVALID_ARGUMENT (not
    INTERNAL), and the call is counted and logged like any other."""
    def bad_requests():
        return value(parse(scrape(gw)), "switchyard_requests_total", endpoint="grpc_infer", status="400")

    before = bad_requests()
    with pytest.raises(grpc.RpcError) as e:
        raw_call(gw, "ModelInfer", b"\xff\xff\xff\xff")
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert "not a valid ModelInferRequest" in e.value.details()
    assert bad_requests() == before + 1
    deadline = time.monotonic() + 10
    while "/inference.GRPCInferenceService/ModelInfer" not in gw.log_text() or "status=400" not in gw.log_text():
        assert time.monotonic() < deadline, "no access-log line for the refused call"
        time.sleep(0.1)


def test_a_huge_unknown_name_is_not_found_with_a_short_message(gw):
    """Item 13: a 64 KB model name gets NOT_FOUND with a message short
    enough for any client (it was echoed whole into grpc-message), and
    REST's error body is cut the same way."""
    name = "m" * 65536
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{gw.grpc_port}"))
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(infer_request(model=name), timeout=30)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND, e.value.details()
    assert len(e.value.details()) < 2048
    # (a 64 KB path is over Pingora's request-head limit: 8 KB then)
    r = requests.post(f"{gw.base}/v2/models/{name[:8000]}/infer", json={"inputs": []}, timeout=10)
    assert r.status_code == 404
    assert len(r.json()["error"]) < 2048 and "more bytes" in r.json()["error"]


def test_statistics_of_every_model_leave_out_key_protected_ones(gw):
    """Item 11: ModelStatistics with an empty name lists only the models a
    caller may address: a model of a key-protected route needs its key."""
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{gw.grpc_port}"))
    anonymous = {s.name for s in stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name="")).model_stats}
    assert "digits-cheap" in anonymous and "private-cheap" not in anonymous
    keyed = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=""), metadata=[("x-api-key", KEY)])
    assert "private-cheap" in {s.name for s in keyed.model_stats}
    # An open route that shares the protected model does not show its counters.
    shared = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name="shared"))
    assert [s.name for s in shared.model_stats] == []
    shared = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name="shared"), metadata=[("x-api-key", KEY)])
    assert [s.name for s in shared.model_stats] == ["private-cheap"]


def test_a_stream_sizes_its_responses_as_raw_tensors(gw):
    """Item 17: 50 rows of digits-cheap are 2,400 raw bytes, under
    max_response_bytes (4 KiB) as the unary call answers them; the
    stream sized them as JSON and refused them."""
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{gw.grpc_port}"))
    request = infer_request(n=50, seed=5)
    unary = stub.ModelInfer(request, timeout=30)
    streamed = list(stub.ModelStreamInfer(iter([request]), timeout=30))
    assert len(streamed) == 1, streamed
    assert streamed[0].error_message == ""
    assert streamed[0].infer_response.raw_output_contents == unary.raw_output_contents


BUDGET_CONFIG = """
[server]
max_body_bytes = "8MiB"
grpc_max_receiving_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
"""


def test_large_messages_never_finished_hold_at_most_the_budget(tmp_path):
    """Item 2: 100 messages declaring nearly 8 MiB each, none finished.
    Two fit the receive budget (grpc_max_receiving_bytes, 16 MiB) and are
    held until their deadline; the others are refused at once with
    RESOURCE_EXHAUSTED, so the server holds 16 MiB, not 800. A large
    valid message (64 KiB) does not fit meanwhile; once the client leaves,
    it does."""
    gw = start(tmp_path, config=BUDGET_CONFIG)
    try:
        peak_before = status_kib(gw, "VmHWM")
        attacker = RawH2(gw.grpc_port)
        declared = 8 * MiB - (16 << 10)
        streams = [attacker.open("ModelInfer") for _ in range(100)]
        for sid in streams:
            attacker.send(sid, b"\x00" + declared.to_bytes(4, "big") + b"\x00" * (64 << 10), wait=1)
        refused = [sid for sid in streams if (attacker.status_of(sid, 0.5) or (0,))[0] == 8]
        assert len(refused) == 98, f"{len(refused)} refused"
        stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{gw.grpc_port}"))
        assert stub.ModelInfer(infer_request(), timeout=30).model_name == "digits-cheap", "small calls still pass"
        large = infer_request(n=256, seed=7)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(large, timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "grpc_max_receiving_bytes" in e.value.details()
        assert (status_kib(gw, "VmHWM") - peak_before) / 1024 < 100
        attacker.close()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert len(stub.ModelInfer(large, timeout=30).outputs) == 2
                break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        gw.stop()
