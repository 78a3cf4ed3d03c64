"""HTTP/2 limits of the V2 and admin listeners (`[server.http2]`, issue 40
item 4) against the real binary: the SETTINGS both listeners advertise
follow the config, streams beyond the concurrent-stream limit are refused,
an oversized header list is refused, and a rapid-reset burst (streams
opened and reset at once, CVE-2023-44487) closes the attacking connection
while other clients keep being answered. Raw HTTP/2 frames come from the
`h2` package (`h2_raw.RawH2`), over h2c or TLS."""

import json
import os
import ssl
import subprocess
import threading

import h2.errors
import h2.events
import pytest
import requests

from conftest import MODELS, REPO, Gateway
from h2_raw import RawH2
from routing_util import DIGITS_ROUTE, infer_body
from tls_util import issue, make_ca

CONFIG = """
[server]
h2c = true
{tls}

{http2}
""" + DIGITS_ROUTE

BODY = json.dumps(infer_body([[0.0] * 64])).encode()


def write(tmp_path, http2, tls=""):
    """The config, h2c on; `http2`: the `[server.http2]` table's lines, or
    None for no table."""
    table = "" if http2 is None else f"[server.http2]\n{http2}"
    path = tmp_path / "switchyard.toml"
    path.write_text(CONFIG.format(http2=table, tls=tls, models=MODELS))
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca("switchyard http2 test CA")
    cert, key = issue(ca, "gateway", kind="ecdsa").write(d, "gateway", key_format="pkcs8")
    return {"ca": ca.write_cert(d / "ca.pem"), "cert": cert, "key": key}


def request(raw, path="/v2/health/ready", method="GET", extra=(), end_stream=True):
    """Opens a stream with a request head; returns its id."""
    sid = raw.conn.get_next_available_stream_id()
    headers = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"), *extra]
    raw.conn.send_headers(sid, headers, end_stream=end_stream)
    raw.flush()
    return sid


def status_of(raw, sid, seconds=20):
    """The response status of stream `sid`, or ('reset', code) when the
    server reset it first; None when neither came."""
    def answered(e):
        return ((isinstance(e, h2.events.ResponseReceived) or isinstance(e, h2.events.StreamReset))
                and e.stream_id == sid)
    event = raw.wait_for(answered, seconds)
    if isinstance(event, h2.events.StreamReset):
        return ("reset", event.error_code)
    if event is None:
        return None
    return int(dict(event.headers)[b":status"])


def settings_of(raw):
    raw.wait_for(lambda e: isinstance(e, h2.events.RemoteSettingsChanged), 10)
    raw.wait_for(lambda e: isinstance(e, h2.events.WindowUpdated) and e.stream_id == 0, 2)
    s = raw.conn.remote_settings
    return (s.max_concurrent_streams, s.max_header_list_size, s.initial_window_size,
            raw.conn.outbound_flow_control_window)


def test_both_listeners_advertise_the_configured_settings(tmp_path, pki):
    http2 = ('max_concurrent_streams = 7\nmax_header_list_bytes = "4KiB"\n'
             'stream_window_bytes = "2MiB"\nconnection_window_bytes = "8MiB"')
    tls = f'admin_tls = {{ cert = "{pki["cert"]}", key = "{pki["key"]}" }}'
    gw = Gateway(write(tmp_path, http2, tls=tls), admin_tls=True)
    try:
        expected = (7, 4096, 2 << 20, 8 << 20)
        v2 = RawH2(gw.port)
        admin = RawH2(gw.admin_port, tls=ssl.create_default_context(cafile=str(pki["ca"])))
        try:
            assert settings_of(v2) == expected
            assert settings_of(admin) == expected
        finally:
            v2.close()
            admin.close()
    finally:
        gw.stop()


def test_defaults_hold_without_the_table(tmp_path):
    gw = Gateway(write(tmp_path, None))
    try:
        raw = RawH2(gw.port)
        try:
            assert settings_of(raw) == (100, 64 << 10, 1 << 20, 4 << 20)
        finally:
            raw.close()
    finally:
        gw.stop()


def test_streams_beyond_the_limit_are_refused_and_the_others_answered(tmp_path):
    gw = Gateway(write(tmp_path, "max_concurrent_streams = 4"))
    try:
        raw = RawH2(gw.port)
        try:
            # Seven infer streams opened at once, heads only (their bodies
            # not sent yet), before the client has read the server's
            # SETTINGS: a client that ignores the limit.
            head = [("content-type", "application/json"), ("content-length", str(len(BODY)))]
            sids = [request(raw, "/v2/models/digits/infer", "POST", head, end_stream=False) for _ in range(7)]
            refused = {sid for sid in sids[4:] if status_of(raw, sid, 10) == ("reset", h2.errors.ErrorCodes.REFUSED_STREAM)}
            assert refused == set(sids[4:]), [status_of(raw, s, 1) for s in sids[4:]]
            for sid in sids[:4]:
                raw.send(sid, BODY, end_stream=True)
            assert [status_of(raw, sid) for sid in sids[:4]] == [200] * 4
            # The connection stays usable: a new stream is answered.
            assert status_of(raw, request(raw)) == 200
        finally:
            raw.close()
    finally:
        gw.stop()


def test_an_oversized_header_list_is_refused(tmp_path):
    gw = Gateway(write(tmp_path, 'max_header_list_bytes = "4KiB"'))
    try:
        raw = RawH2(gw.port)
        try:
            settings_of(raw)
            small = status_of(raw, request(raw, extra=[("x-pad", "a" * 2048)]))
            assert small == 200
            big = status_of(raw, request(raw, extra=[("x-pad", "a" * 8192)]))
            assert big == 431, big
            if not raw.closed:
                assert status_of(raw, request(raw)) == 200
        finally:
            raw.close()
    finally:
        gw.stop()


def rapid_reset(port, streams=1000):
    """Opens `streams` streams and resets each at once, all in one write;
    returns the GOAWAY error code the server sent, or None."""
    raw = RawH2(port)
    try:
        head = [("content-type", "application/json"), ("content-length", str(len(BODY)))]
        for _ in range(streams):
            sid = raw.conn.get_next_available_stream_id()
            raw.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/v2/models/digits/infer"),
                                        (":authority", "127.0.0.1"), *head])
            raw.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        try:
            raw.flush()
        except OSError:
            pass  # the server closed the connection while the burst was sent
        event = raw.wait_for(lambda e: isinstance(e, h2.events.ConnectionTerminated), 20)
        return event.error_code if event else None
    finally:
        raw.close()


@pytest.mark.parametrize("limit", [None, 5])
def test_a_rapid_reset_burst_closes_the_attacker_and_others_are_answered(tmp_path, limit):
    http2 = f"max_pending_reset_streams = {limit}" if limit else None
    gw = Gateway(write(tmp_path, http2))
    try:
        failures, answered, stop = [], [0], threading.Event()

        def bystander():
            with requests.Session() as s:
                while not stop.is_set():
                    try:
                        r = s.post(f"{gw.base}/v2/models/digits/infer", data=BODY,
                                   headers={"content-type": "application/json"}, timeout=30)
                        if r.status_code == 200:
                            answered[0] += 1
                        else:
                            failures.append(r.status_code)
                    except requests.RequestException as e:
                        failures.append(repr(e))

        worker = threading.Thread(target=bystander)
        worker.start()
        try:
            codes = [rapid_reset(gw.port) for _ in range(5)]
        finally:
            stop.set()
            worker.join(60)
        assert codes == [h2.errors.ErrorCodes.ENHANCE_YOUR_CALM] * 5, codes
        assert failures == [] and answered[0] > 0, (failures, answered)
        assert gw.proc.poll() is None, gw.log_text()
        # A well-behaved HTTP/2 client is still served.
        raw = RawH2(gw.port)
        try:
            assert status_of(raw, request(raw)) == 200
        finally:
            raw.close()
    finally:
        gw.stop()


@pytest.mark.parametrize("field,value", [
    ("max_concurrent_streams", "0"),
    ("max_header_list_bytes", '"16"'),
    ("stream_window_bytes", '"4GiB"'),
    ("connection_window_bytes", "100"),
    ("max_pending_reset_streams", "0"),
])
def test_check_config_names_a_bad_limit(tmp_path, field, value):
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    path = write(tmp_path, f"{field} = {value}")
    out = subprocess.run([binary, "check-config", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert f"server.http2.{field}" in out.stdout + out.stderr, out.stdout + out.stderr
