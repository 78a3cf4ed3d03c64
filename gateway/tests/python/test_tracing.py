"""OpenTelemetry traces, received and decoded by a real OTLP/HTTP receiver
(`otlp_receiver.py`): the span tree of a request, the caller's
`traceparent` honoured (parent and sampling flag), spans flushed when the
server stops, and request ids in JSON logs.

Upstreams: a prefix route to a real HTTP app (which echoes the headers it
received) and a route member on a real V2 upstream (a second, traced
Switchyard): each attempt is an `upstream_call` span whose id is the
parent in the `traceparent` the upstream received, in the client's trace."""

import json
import secrets
import time

import pytest
import requests

from conftest import MODELS, Gateway
from otlp_receiver import CLIENT, INTERNAL, SERVER, OtlpReceiver
from proxy_util import upstream_app


def config_text(endpoint, batch_delay_ms=50):
    """Two routes; traces exported to `endpoint` (None: tracing off)."""
    telemetry = (f'[telemetry]\notlp_endpoint = "{endpoint}"\nservice_name = "switchyard-test"\n'
                 f'batch_delay_ms = {batch_delay_ms}\n') if endpoint else ""
    return f"""
[repository]
path = "{MODELS}"

[cache]
l1_max_bytes = "16MiB"

{telemetry}
[[models]]
name = "digits-cheap"
path = "digits-cheap.onnx"

[[models]]
name = "digits-heavy"
path = "digits-heavy.onnx"

[[routes]]
name = "fixed"
models = ["digits-heavy"]

[[routes]]
name = "cascade"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
cache = {{ enabled = false }}
"""


@pytest.fixture(scope="module")
def receiver():
    r = OtlpReceiver()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def traced(tmp_path_factory, receiver):
    path = tmp_path_factory.mktemp("tracing") / "traced.toml"
    path.write_text(config_text(receiver.endpoint))
    gw = Gateway(config=path)
    yield gw
    gw.stop()


def row(seed):
    return [float((seed * 131 + i * 17) % 16) for i in range(64)]


def infer(gw, route, seed, request_id=None, headers=None):
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row(seed)}]}
    if request_id:
        body["id"] = request_id
    r = requests.post(f"{gw.base}/v2/models/{route}/infer", json=body, headers=headers or {}, timeout=30)
    assert r.status_code == 200, r.text
    return r


def traceparent(trace_id, parent_id, sampled=True):
    return {"traceparent": f"00-{trace_id}-{parent_id}-{'01' if sampled else '00'}"}


def whole_trace(receiver, trace_id, timeout=20.0):
    """The trace's spans once its root (`request`, which ends last) arrived."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        spans = receiver.spans_of(trace_id, timeout=0)
        if any(s.name == "request" for s in spans):
            return spans
        time.sleep(0.05)
    return receiver.spans_of(trace_id, timeout=0)


def test_span_tree_under_the_callers_traceparent(traced, receiver):
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    r = infer(traced, "fixed", seed=1, request_id="tree-1", headers=traceparent(trace_id, caller))
    assert r.headers["x-cache"] == "miss"
    spans = whole_trace(receiver, trace_id)
    names = sorted(s.name for s in spans)
    assert names == sorted(["request", "parse", "cache_lookup", "decide", "queue_wait", "inference",
                            "cache_fill"]), names
    root = next(s for s in spans if s.name == "request")
    assert root.parent_span_id == caller, "the request span is the caller's child"
    assert root.kind == SERVER
    assert root.attributes["request_id"] == "tree-1"
    assert root.attributes["http.response.status_code"] == 200
    assert root.attributes["url.path"] == "/v2/models/fixed/infer"
    assert root.resource["service.name"] == "switchyard-test"
    by_name = {s.name: s for s in spans}
    for s in spans:
        if s is not root:
            assert s.parent_span_id == root.span_id, f"{s.name} is a child of the request span"
            assert s.kind == INTERNAL
            assert root.start_ns <= s.start_ns and s.end_ns <= root.end_ns, s.name
    lookup = by_name["cache_lookup"]
    assert (lookup.attributes["cache.tier"], lookup.attributes["cache.hit"]) == ("l1", False)
    run = by_name["inference"]
    assert run.attributes["switchyard.model"] == "digits-heavy"
    assert run.attributes["switchyard.device"] == "cpu"
    assert run.attributes["switchyard.batch_size"] >= 1
    wait = by_name["queue_wait"]
    assert wait.end_ns == run.start_ns, "the batch starts when the wait ends"
    order = [by_name[n].start_ns for n in ("parse", "cache_lookup", "decide", "queue_wait", "cache_fill")]
    assert order == sorted(order), "phases run in order"

    # The same request again: an L1 hit, no model spans.
    trace_id2 = secrets.token_hex(16)
    r = infer(traced, "fixed", seed=1, headers=traceparent(trace_id2, caller))
    assert r.headers["x-cache"] == "hit-l1"
    spans = whole_trace(receiver, trace_id2)
    assert sorted(s.name for s in spans) == ["cache_lookup", "parse", "request"]
    assert next(s for s in spans if s.name == "cache_lookup").attributes["cache.hit"] is True


def test_a_cascade_decides_twice_and_may_run_two_models(traced, receiver):
    trace_id = secrets.token_hex(16)
    r = infer(traced, "cascade", seed=7, headers=traceparent(trace_id, secrets.token_hex(8)))
    spans = whole_trace(receiver, trace_id)
    names = [s.name for s in spans]
    assert names.count("decide") == 2, names
    runs = names.count("inference")
    escalated = r.headers["x-switchyard-reason"] == "cascade_escalate"
    assert runs == (2 if escalated else 1), (names, r.headers["x-switchyard-reason"])
    assert names.count("queue_wait") == runs
    assert "cache_lookup" not in names, "caching is off on this route"


def test_unsampled_callers_are_not_traced(traced, receiver):
    unsampled = secrets.token_hex(16)
    infer(traced, "fixed", seed=20, headers=traceparent(unsampled, secrets.token_hex(8), sampled=False))
    # A sampled request afterwards: once its spans are in, the earlier
    # request's would have been too.
    sampled = secrets.token_hex(16)
    infer(traced, "fixed", seed=21, headers=traceparent(sampled, secrets.token_hex(8)))
    assert whole_trace(receiver, sampled)
    assert receiver.spans_of(unsampled, timeout=0) == []


def test_new_trace_without_traceparent_and_a_malformed_one(traced, receiver):
    for i, headers in enumerate([{}, {"traceparent": "00-not-a-trace-01"}]):
        request_id = f"fresh-{i}-{secrets.token_hex(4)}"
        infer(traced, "fixed", seed=30 + i, request_id=request_id, headers=headers)
        deadline = time.monotonic() + 20
        roots = []
        while not roots and time.monotonic() < deadline:
            roots = [s for s in receiver.spans if s.name == "request" and s.attributes.get("request_id") == request_id]
            time.sleep(0.05)
        assert len(roots) == 1
        assert roots[0].parent_span_id == "", "a new trace starts here"
        assert f"trace_id={roots[0].trace_id} request_id={request_id}\n" in traced.log_text()
    assert receiver.bad_requests == []


def test_spans_are_exported_when_the_server_stops(tmp_path):
    receiver = OtlpReceiver()
    path = tmp_path / "slow-export.toml"
    path.write_text(config_text(receiver.endpoint, batch_delay_ms=600_000))
    gw = Gateway(config=path)
    try:
        trace_id = secrets.token_hex(16)
        infer(gw, "fixed", seed=40, headers=traceparent(trace_id, secrets.token_hex(8)))
        time.sleep(0.3)
        assert receiver.spans_of(trace_id, timeout=0) == [], "batched for ten minutes"
    finally:
        gw.stop()
    try:
        assert gw.proc.returncode == 0
        assert "request" in {s.name for s in receiver.spans_of(trace_id, at_least=7, timeout=10)}
    finally:
        receiver.stop()


@pytest.mark.parametrize("traced", [True, False], ids=["tracing-on", "tracing-off"])
def test_json_logs_carry_the_request_id(tmp_path, receiver, monkeypatch, traced):
    monkeypatch.setenv("RUST_LOG", "info,pingora=warn,ort=warn,switchyard::routing=debug")
    path = tmp_path / "json.toml"
    path.write_text(config_text(receiver.endpoint if traced else None))
    gw = Gateway(config=path, extra_args=["--log-json"])
    try:
        trace_id = secrets.token_hex(16)
        infer(gw, "cascade", seed=50, request_id="json-1", headers=traceparent(trace_id, secrets.token_hex(8)))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and '"json-1"' not in gw.log_text():
            time.sleep(0.05)
    finally:
        gw.stop()
    lines = [json.loads(l) for l in gw.log_path.read_text().splitlines() if l.startswith("{")]
    access = [l for l in lines if l["target"] == "switchyard::access" and l.get("request_id") == "json-1"]
    assert len(access) == 1, lines[-5:]
    assert access[0]["fields"].get("trace_id") == (trace_id if traced else None)
    assert access[0]["fields"]["status"] == 200
    inside = [l for l in lines if l["target"].startswith("switchyard::routing")]
    assert inside, "debug lines from routing inside the request"
    assert all(l.get("request_id") == "json-1" for l in inside), inside
    outside = [l for l in lines if l["target"] == "switchyard::serve"]
    assert outside and all("request_id" not in l for l in outside), "lines outside requests have no id"


def telemetry_section(receiver, service):
    return (f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nservice_name = "{service}"\n'
            'batch_delay_ms = 50\n')


@pytest.fixture(scope="module")
def echo_app():
    app = upstream_app("app")
    yield app
    app.stop()


@pytest.fixture(scope="module")
def inner(tmp_path_factory, receiver):
    """A second Switchyard, traced to the same receiver: the V2 upstream."""
    path = tmp_path_factory.mktemp("tracing-inner") / "inner.toml"
    path.write_text(f"""
{telemetry_section(receiver, "switchyard-inner")}
[[models]]
name = "digits-heavy"
path = "{MODELS}/digits-heavy.onnx"
""")
    gw = Gateway(config=path)
    yield gw
    gw.stop()


def front_config(app, inner, telemetry=""):
    return f"""
{telemetry}
[[upstreams]]
name = "app"
addrs = ["{app.addr}"]
health = {{ path = "/health" }}

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"

[[upstreams]]
name = "inner"
kind = "v2"
addrs = ["{inner.url}"]
models = [{{ name = "heavy-remote", model = "digits-heavy" }}]

[[routes]]
name = "remote"
models = ["heavy-remote"]
"""


@pytest.fixture(scope="module")
def front(tmp_path_factory, receiver, echo_app, inner):
    path = tmp_path_factory.mktemp("tracing-front") / "front.toml"
    path.write_text(front_config(echo_app, inner, telemetry_section(receiver, "switchyard-front")))
    gw = Gateway(config=path)
    yield gw
    gw.stop()


def spans_until(receiver, trace_id, done, timeout=20.0):
    """The trace's spans once `done(spans)` holds (or the timeout passed)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = receiver.spans_of(trace_id, timeout=0)
        if done(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.05)


def parse_traceparent(value):
    version, trace_id, parent_id, flags = value.split("-")
    assert (version, len(trace_id), len(parent_id)) == ("00", 32, 16), value
    return trace_id, parent_id, flags


def test_a_proxied_request_carries_its_upstream_call_span(front, receiver, echo_app):
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    headers = {**traceparent(trace_id, caller), "tracestate": "vendor=client"}
    r = requests.get(f"{front.base}/apps/app/echo?x=1", headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    received = r.json()["headers"]
    got_trace, parent_id, flags = parse_traceparent(received["traceparent"])
    assert (got_trace, flags) == (trace_id, "01"), "the client's trace, sampled"
    assert parent_id != caller, "the gateway's own span is the upstream's parent"
    assert received["tracestate"] == "vendor=client", "the caller's tracestate travels with its trace"

    spans = spans_until(receiver, trace_id, lambda s: {"request", "upstream_call"} <= {x.name for x in s})
    assert sorted(s.name for s in spans) == ["request", "upstream_call"], [s.name for s in spans]
    root = next(s for s in spans if s.name == "request")
    call = next(s for s in spans if s.name == "upstream_call")
    assert root.parent_span_id == caller
    assert root.attributes["url.path"] == "/apps/app/echo"
    assert call.span_id == parent_id, "the upstream's traceparent names the exported upstream_call span"
    assert call.parent_span_id == root.span_id and call.kind == CLIENT
    assert call.attributes["switchyard.via"] == "proxy"
    assert call.attributes["switchyard.route"] == "app"
    assert call.attributes["switchyard.upstream"] == "app"
    assert call.attributes["server.address"] == "127.0.0.1"
    assert call.attributes["server.port"] == echo_app.port
    assert call.attributes["http.response.status_code"] == 200
    assert call.attributes["switchyard.outcome"] == "ok"
    assert root.start_ns <= call.start_ns and call.end_ns <= root.end_ns

    # An error answer (500: the app's, not counted against the address):
    # the attempt's span says so.
    trace_id = secrets.token_hex(16)
    r = requests.get(f"{front.base}/apps/app/status?code=500", headers=traceparent(trace_id, caller), timeout=10)
    assert r.status_code == 500
    spans = spans_until(receiver, trace_id, lambda s: {"request", "upstream_call"} <= {x.name for x in s})
    call = next(s for s in spans if s.name == "upstream_call")
    assert call.attributes["http.response.status_code"] == 500
    assert call.attributes["switchyard.outcome"] == "server_error"
    assert call.status_code == 2, "status error"


def test_an_unsampled_proxied_request_passes_the_callers_traceparent(front, receiver):
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    sent = traceparent(trace_id, caller, sampled=False)
    r = requests.get(f"{front.base}/apps/app/echo", headers=sent, timeout=10)
    assert r.status_code == 200
    assert r.json()["headers"]["traceparent"] == sent["traceparent"], "not traced: passed through as sent"
    marker = secrets.token_hex(16)
    requests.get(f"{front.base}/apps/app/echo", headers=traceparent(marker, caller), timeout=10)
    assert spans_until(receiver, marker, lambda s: len(s) >= 2)
    assert receiver.spans_of(trace_id, timeout=0) == []


def test_a_v2_upstream_joins_the_trace_under_the_upstream_call(front, inner, receiver):
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    r = infer(front, "remote", seed=60, headers=traceparent(trace_id, caller))
    assert r.headers["x-switchyard-device"] == "upstream"

    def complete(spans):
        return sum(s.name == "request" for s in spans) == 2 and any(s.name == "inference" for s in spans)

    spans = spans_until(receiver, trace_id, complete)
    front_spans = [s for s in spans if s.resource["service.name"] == "switchyard-front"]
    inner_spans = [s for s in spans if s.resource["service.name"] == "switchyard-inner"]
    front_root = next(s for s in front_spans if s.name == "request")
    calls = [s for s in front_spans if s.name == "upstream_call"]
    assert len(calls) == 1, [s.name for s in front_spans]
    call = calls[0]
    assert front_root.parent_span_id == caller
    assert call.parent_span_id == front_root.span_id and call.kind == CLIENT
    assert call.attributes["switchyard.via"] == "v2"
    assert call.attributes["switchyard.model"] == "heavy-remote"
    assert call.attributes["switchyard.upstream"] == "inner"
    assert call.attributes["server.port"] == inner.port
    assert call.attributes["http.response.status_code"] == 200
    assert call.attributes["switchyard.outcome"] == "ok"
    assert "inference" not in {s.name for s in front_spans}, "the model ran upstream"
    assert front_root.start_ns <= call.start_ns and call.end_ns <= front_root.end_ns

    # The upstream decoded the traceparent it received: its request span is
    # the upstream_call's child, in the client's trace.
    inner_root = next(s for s in inner_spans if s.name == "request")
    assert inner_root.parent_span_id == call.span_id
    assert inner_root.attributes["url.path"] == "/v2/models/digits-heavy/infer"
    assert {s.name for s in inner_spans} >= {"request", "parse", "decide", "queue_wait", "inference"}
    assert all(s.parent_span_id == inner_root.span_id for s in inner_spans if s is not inner_root)


def test_with_tracing_off_the_callers_traceparent_reaches_the_upstream(tmp_path, echo_app, inner):
    path = tmp_path / "untraced.toml"
    path.write_text(front_config(echo_app, inner))
    gw = Gateway(config=path)
    try:
        sent = {**traceparent(secrets.token_hex(16), secrets.token_hex(8)), "tracestate": "vendor=client"}
        r = requests.get(f"{gw.base}/apps/app/echo", headers=sent, timeout=10)
        assert r.status_code == 200
        received = r.json()["headers"]
        assert (received["traceparent"], received["tracestate"]) == (sent["traceparent"], "vendor=client")
    finally:
        gw.stop()


def test_grpc_calls_are_traced_under_the_callers_traceparent(tmp_path, receiver):
    """The gRPC front end reads `traceparent` from the call's metadata and
    builds the same span tree as REST under the caller's span."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    from conftest import free_port

    path = tmp_path / "grpc-traced.toml"
    path.write_text(config_text(receiver.endpoint))
    port = free_port()
    gw = Gateway(config=path, extra_args=["--grpc-listen", f"127.0.0.1:{port}"])
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
    try:
        trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
        x = grpcclient.InferInput("X", [1, 64], "FP32")
        x.set_data_from_numpy(np.asarray([row(50)], np.float32))
        client.infer("fixed", [x], request_id="grpc-tree-1", headers=traceparent(trace_id, caller))
        spans = whole_trace(receiver, trace_id)
        names = sorted(s.name for s in spans)
        assert names == sorted(["request", "parse", "cache_lookup", "decide", "queue_wait", "inference",
                                "cache_fill"]), names
        root = next(s for s in spans if s.name == "request")
        assert root.parent_span_id == caller
        assert root.attributes["url.path"] == "/inference.GRPCInferenceService/ModelInfer"
        assert root.attributes["http.response.status_code"] == 200
        assert root.attributes["request_id"] == "grpc-tree-1"
    finally:
        client.close()
        gw.stop()
