"""A raw HTTP/2 client for gRPC calls that no well-behaved gRPC client
makes: a receive window of zero, streams opened with headers only, a
message one byte short of its declared length, thousands of messages
sent without reading a response. Built on the `h2` package (frames and
flow control by hand); the gRPC messages are tritonclient's protobufs."""

import socket
import ssl
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

SERVICE = "/inference.GRPCInferenceService/"


def frame(message) -> bytes:
    """One gRPC message on the wire: uncompressed flag, length, bytes."""
    payload = message if isinstance(message, bytes) else message.SerializeToString()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


class RawH2:
    """One HTTP/2 connection. `window` is the receive window the client
    advertises for each stream (0: the server may send no response body)."""

    def __init__(self, port, window=65535, timeout=10.0, tls=None):
        """`tls`: an `ssl.SSLContext` to speak HTTP/2 over TLS (ALPN `h2`)
        instead of prior knowledge on cleartext."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls is not None:
            tls.set_alpn_protocols(["h2"])
            self.sock = tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
            assert self.sock.selected_alpn_protocol() == "h2", self.sock.selected_alpn_protocol()
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.flush()
        self.events = []
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def open(self, method, end_stream=False):
        """Opens a stream for `method` (e.g. "ModelInfer"); returns its id."""
        sid = self.conn.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
                   (":authority", "127.0.0.1"), ("content-type", "application/grpc"), ("te", "trailers")]
        self.conn.send_headers(sid, headers, end_stream=end_stream)
        self.flush()
        return sid

    def send(self, sid, data: bytes, end_stream=False, wait=10.0):
        """Sends `data` on stream `sid`, as flow control allows; returns
        the bytes sent (fewer when the server's window stays shut for
        `wait` seconds, or when the server ends the stream first)."""
        sent = 0
        deadline = time.monotonic() + wait
        try:
            while sent < len(data):
                room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
                if room <= 0:
                    if time.monotonic() > deadline or self.closed:
                        return sent
                    self.pump(0.05)
                    continue
                chunk = data[sent:sent + room]
                self.conn.send_data(sid, chunk)
                self.flush()
                sent += len(chunk)
            if end_stream:
                self.conn.end_stream(sid)
                self.flush()
        except h2.exceptions.StreamClosedError:
            pass  # the server answered (or reset) the stream before all of it was sent
        return sent

    def pump(self, seconds):
        """Reads frames for up to `seconds`; returns the events read."""
        read = []
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(65536)
            if not data:
                self.closed = True
            else:
                read = self.conn.receive_data(data)
                self.flush()
        except (socket.timeout, BlockingIOError, ssl.SSLWantReadError):
            pass
        except OSError:
            self.closed = True
        self.events += read
        return read

    def wait_for(self, predicate, seconds):
        """Pumps until `predicate(event)` holds for a read event (returned)
        or the connection closes (None) or `seconds` pass (None)."""
        deadline = time.monotonic() + seconds
        for event in self.events:
            if predicate(event):
                return event
        while time.monotonic() < deadline and not self.closed:
            for event in self.pump(0.2):
                if predicate(event):
                    return event
        return None

    def status_of(self, sid, seconds):
        """The grpc-status (and message) the server ends stream `sid`
        with, from its headers or trailers; None if none came."""
        def ended(event):
            return (isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived))
                    and event.stream_id == sid and grpc_status(event.headers) is not None)
        event = self.wait_for(ended, seconds)
        return grpc_status(event.headers) if event else None

    def reset_of(self, sid, seconds):
        """The error code of a RST_STREAM on `sid`, if one comes."""
        event = self.wait_for(lambda e: isinstance(e, h2.events.StreamReset) and e.stream_id == sid, seconds)
        return event.error_code if event else None

    @property
    def server_max_streams(self):
        return self.conn.remote_settings.max_concurrent_streams

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def grpc_status(headers):
    """(code, message) from a header list, or None."""
    values = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
              for k, v in headers}
    if "grpc-status" not in values:
        return None
    return int(values["grpc-status"]), values.get("grpc-message", "")
