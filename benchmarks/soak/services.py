"""The processes a soak runs against, each started for real on loopback and
stopped by PID: `redis-server` (the L2 cache), the plain HTTP app behind the
prefix route (the proxy tests' `upstream_apps.py`), and the gateway itself
with a config that uses all of them.

Ports: the gateway binds port 0 and reports what it got (`--ports-file`);
Redis and the app, which are killed and restarted on the same port, get a
port reserved by this process (bound, never listening, until it exits), so
no other process can take it before they bind it or while they are down;
both set SO_REUSEADDR and bind it beside the reservation."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
UPSTREAM_APPS = REPO / "gateway" / "tests" / "python" / "upstream_apps.py"


# Reserved ports (see the module docstring): port -> the socket holding it.
_RESERVED: dict[int, socket.socket] = {}


def reserve_port(port: int = 0) -> int:
    """Reserves loopback `port` (0: a free one) until this process exits."""
    if port in _RESERVED:
        return port
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    port = holder.getsockname()[1]
    _RESERVED[port] = holder
    return port


def free_port() -> int:
    """A free loopback port, reserved until this process exits."""
    return reserve_port()


def stop(proc: subprocess.Popen, sig=signal.SIGTERM, timeout=20.0) -> None:
    """Stops a child by PID: `sig`, then SIGKILL after `timeout`."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def text_models_present() -> bool:
    return (MODELS / "minilm-l3.onnx").is_file() and (MODELS / "minilm-tokenizer.json").is_file()


class Redis:
    """A throw-away `redis-server` without persistence. `kill()` and
    `start()` make an outage on the same port."""

    def __init__(self, workdir: Path, port: int | None = None):
        self.port = port or free_port()
        self.workdir = workdir
        self.proc = None
        self.start()

    def start(self) -> None:
        self.log = open(self.workdir / "redis.log", "ab")
        self.proc = subprocess.Popen(
            [os.environ.get("REDIS_SERVER_BIN", "redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-conversation."""
        stop(self.proc, signal.SIGKILL)
        self.log.close()

    def close(self) -> None:
        stop(self.proc)
        self.log.close()


class UpstreamApp:
    """The HTTP app behind the prefix route (echo, byte counter, SSE).
    `kill()` and `start()` flap it on the same port."""

    def __init__(self, workdir: Path, port: int | None = None):
        self.port = port or free_port()
        self.workdir = workdir
        self.start()

    def start(self) -> None:
        self.log = open(self.workdir / f"upstream-{self.port}.log", "ab")
        deadline = time.monotonic() + 10
        while True:
            self.proc = subprocess.Popen([sys.executable, str(UPSTREAM_APPS), "app", str(self.port)],
                                         stdout=subprocess.PIPE, stderr=self.log)
            line = self.proc.stdout.readline() if self.proc.stdout else b""
            if line.startswith(b"ready"):
                return
            # The port may still be held by the previous process's sockets.
            self.proc.wait()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the upstream app did not start on port {self.port}")
            time.sleep(0.2)

    def kill(self) -> None:
        stop(self.proc, signal.SIGKILL)
        self.log.close()

    def close(self) -> None:
        stop(self.proc)
        self.log.close()


def gateway_config(redis_url: str, upstream_port: int, generation: int, text: bool) -> str:
    """The soak's config. `generation` changes a value that does not change
    any answer (the draft heartbeat), so every rewrite is a real reload
    whose answers stay comparable with the ones before it."""
    heartbeat = 200 + generation % 2
    config = f"""
[server]
max_body_bytes = "8MiB"

[reload]
watch = true
interval_ms = 500

[cache]
l1_max_bytes = "32MiB"
redis = {{ url = "{redis_url}" }}

[[models]]
name = "digits-cheap"
path = "{MODELS}/digits-cheap.onnx"
warmup = true
batching = {{ max_batch_size = 32, max_queue_delay_us = 200 }}
[[models]]
name = "digits-heavy"
path = "{MODELS}/digits-heavy.onnx"
warmup = true
batching = {{ max_batch_size = 32, max_queue_delay_us = 300 }}
[[models]]
name = "synth-heavy"
path = "{MODELS}/synth-heavy.onnx"
warmup = true
batching = {{ max_batch_size = 16, max_queue_delay_us = 500 }}

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
draft = {{ heartbeat_ms = {heartbeat} }}
cache = {{ ttl_s = 30 }}

[[routes]]
name = "synth"
models = ["synth-heavy"]
cache = {{ ttl_s = 30 }}

[[upstreams]]
name = "app"
addrs = ["127.0.0.1:{upstream_port}"]
health = {{ path = "/health", interval_ms = 1000 }}

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
cache = {{ ttl_s = 5 }}
"""
    if text:
        config += f"""
[[models]]
name = "minilm"
path = "{MODELS}/minilm-l3.onnx"
tokenizer = {{ path = "{MODELS}/minilm-tokenizer.json", max_length = 128 }}
warmup = true
batching = {{ max_batch_size = 16, max_queue_delay_us = 1000 }}

[[routes]]
name = "text"
models = ["minilm"]
cache = {{ ttl_s = 30 }}
"""
    return config


class Gateway:
    """A gateway serving `config_path` on ports it picks (port 0), or on
    the given ones (to restart a replica where its peers expect it)."""

    def __init__(self, binary: str, config_path: Path, workdir: Path, name: str = "switchyard",
                 port: int | None = None, admin_port: int | None = None):
        self.binary, self.config_path, self.workdir, self.name = binary, config_path, workdir, name
        self.port, self.admin_port = port or 0, admin_port or 0
        self.log_path = workdir / f"{name}.log"
        self.start()

    def start(self) -> None:
        self.log = open(self.log_path, "ab")
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        env.setdefault("ORT_DYLIB_PATH", str(REPO / ".cache/onnxruntime/libonnxruntime.so.1.31.1"))
        ports_file = self.workdir / f"{self.name}.ports.json"
        ports_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", str(self.config_path), "--listen", f"127.0.0.1:{self.port}",
             "--admin-listen", f"127.0.0.1:{self.admin_port}", "--ports-file", str(ports_file)],
            cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while not ports_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} bound no port within 120 s")
            time.sleep(0.05)
        bound = json.loads(ports_file.read_text())
        self.port = int(bound["listen"].rsplit(":", 1)[1])
        self.admin_port = int(bound["admin_listen"].rsplit(":", 1)[1])
        self.addr = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.addr}"
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: see {self.log_path}")
            try:
                if requests.get(f"{self.base}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} was not ready within 120 s")

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait for the graceful exit; returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.log.close()
        # `start()` again binds the same ports: hold them until then.
        for port in (self.port, self.admin_port):
            try:
                reserve_port(port)
            except OSError:
                pass
        return code

    def generation(self) -> int:
        return int(requests.get(f"{self.admin}/admin/config", timeout=10).json().get("generation", 0))

    def close(self) -> None:
        stop(self.proc, signal.SIGTERM, timeout=30)
        self.log.close()
