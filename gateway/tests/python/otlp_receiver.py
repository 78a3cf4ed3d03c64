"""A real OTLP/HTTP trace receiver for the tests: an HTTP server on a free
loopback port that accepts `POST /v1/traces` with a protobuf
`ExportTraceServiceRequest` (what the gateway's exporter sends), decodes
it with the reference protobuf definitions (`opentelemetry-proto`) and
keeps every span."""

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict = field(default_factory=dict)
    resource: dict = field(default_factory=dict)
    status_code: int = 0


class OtlpReceiver:
    """Collects spans; `spans_of(trace_id)` waits for them to arrive."""

    def __init__(self, ssl_context=None):
        """`ssl_context`: a server-side `ssl.SSLContext` to serve HTTPS."""
        self.spans = []
        self.requests = 0
        self.bad_requests = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                    receiver.bad_requests.append((self.path, self.headers.get("content-type")))
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver._store(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.port = self.server.server_address[1]
        self.endpoint = f"{scheme}://127.0.0.1:{self.port}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _store(self, request):
        with self._lock:
            self.requests += 1
            for rs in request.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(ReceivedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            resource=resource,
                            status_code=s.status.code,
                        ))

    def spans_of(self, trace_id, at_least=1, timeout=20.0):
        """Spans of `trace_id`, once at least `at_least` arrived (or the
        timeout passed: then whatever arrived)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [s for s in self.spans if s.trace_id == trace_id]
            if len(found) >= at_least or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


SERVER = PbSpan.SPAN_KIND_SERVER
INTERNAL = PbSpan.SPAN_KIND_INTERNAL
CLIENT = PbSpan.SPAN_KIND_CLIENT
