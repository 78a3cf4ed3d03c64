"""Passwords in configured URLs never reach the log (issue 24, item 8): a
password-protected redis-server, a gateway whose Redis URL carries the
password (and one with a wrong password), and an OTLP endpoint with
user-info. The gateways work (L2 hits), and their whole log, debug lines
included, shows `[redacted]` where the password was."""

import socket
import subprocess
import time

import pytest
import requests

from conftest import MODELS, REDIS_SERVER, Gateway, free_port

PASSWORD = "Pa55-w0rd-in-the-url"
WRONG = "not-the-Pa55-w0rd"


@pytest.fixture
def protected_redis(tmp_path):
    port = free_port()
    log = open(tmp_path / "redis.log", "wb")
    proc = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--requirepass", PASSWORD, "--dir", str(tmp_path)],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(f"AUTH {PASSWORD}\r\nPING\r\n".encode())
                time.sleep(0.05)
                if b"+PONG" in s.recv(64):
                    break
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("protected redis-server did not start")
        time.sleep(0.05)
    yield port
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def config(port, password):
    return f"""
[cache]
l1_max_bytes = "4MiB"
redis = {{ url = "redis://:{password}@127.0.0.1:{port}", timeout_ms = 500 }}

[telemetry]
otlp_endpoint = "http://collector:{password}@127.0.0.1:{free_port()}/v1/traces"

[[models]]
name = "digits-heavy"
path = "{MODELS}/digits-heavy.onnx"

[[routes]]
name = "digits"
models = ["digits-heavy"]
"""


def infer(gw, seed):
    data = [float((seed * 7 + i) % 13) for i in range(64)]
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": data}]}
    r = requests.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.headers["x-cache"]


def whole_log(gw):
    """The gateway's whole log (after it stopped)."""
    return gw.log_path.read_text(errors="replace")


def test_redis_and_otlp_passwords_never_reach_the_log(tmp_path, protected_redis):
    env = {"RUST_LOG": "debug,pingora=warn,ort=warn,h2=warn,hyper=warn,reqwest=warn"}
    paths = {}
    for name, password in [("right", PASSWORD), ("wrong", WRONG)]:
        paths[name] = tmp_path / f"{name}.toml"
        paths[name].write_text(config(protected_redis, password))
    writer = Gateway(config=paths["right"], env=env)
    reader = Gateway(config=paths["right"], env=env)
    refused = Gateway(config=paths["wrong"], env=env)
    try:
        assert infer(writer, 1) == "miss"
        deadline = time.monotonic() + 10
        while infer(reader, 1) != "hit-l2":
            assert time.monotonic() < deadline, "the L2 write never arrived: is the password used?"
            time.sleep(0.1)
        assert infer(refused, 1) == "miss", "a wrong password only costs L2"
        config_doc = requests.get(f"{writer.admin}/admin/config", timeout=10).text
        assert PASSWORD not in config_doc
    finally:
        for gw in (writer, reader, refused):
            gw.stop()
    for gw, password in [(writer, PASSWORD), (reader, PASSWORD), (refused, WRONG)]:
        text = whole_log(gw)
        assert password not in text, [line for line in text.splitlines() if password in line][:5]
        assert "exporting traces" in text and "Redis L2" in text, text[-2000:]
        assert "[redacted]" in text, text[-2000:]
    assert "Redis L2 connected" in whole_log(writer)
