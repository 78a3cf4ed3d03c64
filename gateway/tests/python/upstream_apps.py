"""Small real upstream servers for the proxy tests, run as separate
processes on loopback by the harness (`proxy_util.upstream_app`):

    python upstream_apps.py app PORT           an HTTP app (echo, SSE, byte counter, streams, slow, status,
                                               a head trickled byte by byte, a truncated body, the paths seen)
    python upstream_apps.py v2-slow PORT MS    a V2 server with the digits signature that answers after MS ms
    python upstream_apps.py v2-garbage PORT    a V2 server whose metadata is fine but whose answers are garbage
    python upstream_apps.py v2-other PORT      a V2 server whose model has another signature than digits
    python upstream_apps.py v2-shapes PORT     a V2 server with the digits signature whose model `rows` answers
                                               3 rows whatever it is asked, `dims` 9 probabilities, `rank`
                                               a label of rank 2, and `good` one correct row
    python upstream_apps.py raw-garbage PORT   answers every request with bytes that are not HTTP

Each prints "ready PORT" once listening; PORT 0 binds a free port (the
line says which), so no port is chosen before the app binds it. Nothing here buffers a request body
it does not need: the byte counter reads chunked bodies piece by piece.
"""

import hashlib
import json
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

REQUESTS = {"count": 0}
LOCK = threading.Lock()
# Every request target the app received, in order (GET /seen lists them).
SEEN = []
# /sse-gated sends its next event only after a /release.
GATE = threading.Semaphore(0)


def bump() -> int:
    with LOCK:
        REQUESTS["count"] += 1
        return REQUESTS["count"]


class Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, doc, extra=()):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def body_chunks(self):
        """Yields the request body piece by piece (Content-Length or chunked)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                left = size
                while left:
                    piece = self.rfile.read(min(left, 1 << 16))
                    if not piece:
                        return
                    left -= len(piece)
                    yield piece
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                piece = self.rfile.read(min(left, 1 << 16))
                if not piece:
                    return
                left -= len(piece)
                yield piece


class App(Quiet):
    """The plain HTTP app behind prefix routes."""

    def handle_any(self):
        n = bump()
        with LOCK:
            SEEN.append(self.path)
        url = urlparse(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        route = url.path
        if route == "/health":
            return self.send_json(200, {"ok": True})
        if route == "/count":
            total, digest = 0, hashlib.sha256()
            for piece in self.body_chunks():
                total += len(piece)
                digest.update(piece)
            return self.send_json(200, {"bytes": total, "sha256": digest.hexdigest()})
        if route == "/stream":
            return self.stream(int(q.get("mb", "1")))
        if route == "/sse":
            return self.sse(int(q.get("n", "3")), float(q.get("interval", "0.2")))
        if route == "/sse-gated":
            return self.sse_gated(int(q.get("n", "3")))
        if route == "/release":
            GATE.release()
            return self.send_json(200, {"released": True})
        if route == "/seen":
            with LOCK:
                return self.send_json(200, {"paths": list(SEEN)})
        if route == "/trickle-head":
            return self.trickle_head(float(q.get("interval", "1")))
        if route == "/truncated":
            return self.truncated(int(q.get("sent", "10")))
        body = b"".join(self.body_chunks())
        if route == "/slow":
            time.sleep(int(q.get("ms", "500")) / 1000)
        if route == "/status":
            return self.send_json(int(q.get("code", "500")), {"error": "as asked", "n": n})
        extra = [("Cache-Control", q["cc"])] if "cc" in q else []
        if "vary" in q:
            extra.append(("Vary", q["vary"]))
        if "setcookie" in q:
            extra.append(("Set-Cookie", q["setcookie"]))
        extra.append(("Connection", "keep-alive, X-Hop"))
        extra.append(("X-Hop", "must not reach the client"))
        self.send_json(200, {
            "n": n, "port": self.server.server_address[1], "method": self.command, "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body_len": len(body), "body_sha256": hashlib.sha256(body).hexdigest(),
            "pad": "x" * int(q.get("pad", "0")),
        }, extra)

    def trickle_head(self, interval):
        """A complete 200 head (declaring a 10-byte body) written one byte
        per `interval` seconds, then the connection closes with no body: a
        proxy whose timeout restarts at every read waits for all of it."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n"
        self.close_connection = True
        try:
            for byte in head:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(interval)
        except OSError:
            pass  # the proxy gave up: what it should do

    def truncated(self, sent):
        """A 200 that declares 100 bytes, sends `sent` (10 by default) in
        the same write as its head, and closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b"0123456789"[:sent])
        self.wfile.flush()
        self.close_connection = True

    def stream(self, mb):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        piece = b"x" * (1 << 20)
        for _ in range(mb):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def sse(self, n, interval):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n):
            event = f"event: tick\ndata: {{\"i\": {i}, \"t\": {time.time()}}}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            time.sleep(interval)
        self.wfile.write(b"0\r\n\r\n")

    def sse_gated(self, n):
        """Event i+1 is written only after a /release: a client that sees
        event i before releasing proves the proxy did not hold it back."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n):
            if i > 0 and not GATE.acquire(timeout=20):
                break
            event = f"event: step\ndata: {i}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


DIGITS_META = {
    "name": "digits", "versions": ["1"], "platform": "test",
    "inputs": [{"name": "X", "datatype": "FP32", "shape": [-1, 64]}],
    "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1]},
                {"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]}],
}


OTHER_META = dict(DIGITS_META, inputs=[{"name": "Y", "datatype": "INT64", "shape": [-1, 3]}])


def v2_handler(mode, delay_ms):
    class V2(Quiet):
        def do_GET(self):
            if self.path.startswith("/v2/health"):
                return self.send_json(200, {})
            if self.path.startswith("/v2/models/"):
                return self.send_json(200, OTHER_META if mode == "other" else DIGITS_META)
            return self.send_json(404, {"error": "no"})

        def do_POST(self):
            for _ in self.body_chunks():
                pass
            bump()
            if mode == "garbage":
                body = b"\x00\x01 this is not an inference response \xff"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
            time.sleep(delay_ms / 1000)
            if mode == "shapes":
                return self.send_json(200, shaped_answer(self.path.split("/")[3]))
            # One row: label 7, probabilities one-hot on 7.
            probs = [0.0] * 10
            probs[7] = 1.0
            self.send_json(200, {"model_name": "digits", "outputs": [
                {"name": "label", "datatype": "INT64", "shape": [1], "data": [7]},
                {"name": "probabilities", "datatype": "FP32", "shape": [1, 10], "data": probs},
            ]})
    return V2


def shaped_answer(model):
    """A well-formed V2 answer whose shapes are wrong in the way `model`
    names (`rows`, `dims`, `rank`), or right (`good`, one row)."""
    rows, width, label_shape = 1, 10, None
    if model == "rows":
        rows = 3
    elif model == "dims":
        width = 9
    elif model == "rank":
        label_shape = [1, 1, 1]
    probs = ([0.0] * 7 + [1.0] + [0.0] * (width - 8)) * rows
    return {"model_name": model, "outputs": [
        {"name": "label", "datatype": "INT64", "shape": label_shape or [rows], "data": [7] * rows},
        {"name": "probabilities", "datatype": "FP32", "shape": [rows, width], "data": probs},
    ]}


class RawGarbage(socketserver.StreamRequestHandler):
    def handle(self):
        self.rfile.readline()
        self.wfile.write(b"\x16\x03\x01 definitely not HTTP\r\n\r\n")


class Threaded(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    kind, port = sys.argv[1], int(sys.argv[2])
    if kind == "app":
        server = ThreadingHTTPServer(("127.0.0.1", port), App)
    elif kind == "v2-slow":
        server = ThreadingHTTPServer(("127.0.0.1", port), v2_handler("slow", int(sys.argv[3])))
    elif kind == "v2-garbage":
        server = ThreadingHTTPServer(("127.0.0.1", port), v2_handler("garbage", 0))
    elif kind == "v2-other":
        server = ThreadingHTTPServer(("127.0.0.1", port), v2_handler("other", 0))
    elif kind == "v2-shapes":
        server = ThreadingHTTPServer(("127.0.0.1", port), v2_handler("shapes", 0))
    elif kind == "raw-garbage":
        server = Threaded(("127.0.0.1", port), RawGarbage)
    else:
        raise SystemExit(f"unknown kind {kind}")
    server.daemon_threads = True
    # PORT 0 binds a free port: the first line says which.
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
