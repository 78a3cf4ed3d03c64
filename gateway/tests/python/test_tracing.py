"""OpenTelemetry traces, received and decoded by a real OTLP/HTTP receiver
(`otlp_receiver.py`): the span tree of a request, the caller's
`traceparent` honoured (parent and sampling flag), spans flushed when the
server stops, and request ids in JSON logs.

Propagation of `traceparent` to an upstream server is unit-tested
(`telemetry::propagation`); its end-to-end test needs proxied routes."""

import json
import secrets
import time

import pytest
import requests

from conftest import MODELS, Gateway
from otlp_receiver import INTERNAL, SERVER, OtlpReceiver


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
