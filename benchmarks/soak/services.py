"""The processes a soak runs against, each started for real on loopback and
stopped by PID: `redis-server` (the L2 cache), the plain HTTP app behind the
prefix route (the proxy tests' `upstream_apps.py`), and the gateway itself
with a config that uses all of them."""

from __future__ import annotations

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    """A throw-away `redis-server` without persistence."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.log = open(workdir / "redis.log", "wb")
        self.proc = subprocess.Popen(
            [os.environ.get("REDIS_SERVER_BIN", "redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(workdir)],
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

    def close(self) -> None:
        stop(self.proc)
        self.log.close()


class UpstreamApp:
    """The HTTP app behind the prefix route (echo, byte counter, SSE)."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.log = open(workdir / "upstream.log", "wb")
        self.proc = subprocess.Popen([sys.executable, str(UPSTREAM_APPS), "app", str(self.port)],
                                     stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline() if self.proc.stdout else b""
        if b"ready" not in line:
            raise RuntimeError("the upstream app did not start")

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
    """The gateway under test, serving `config_path` (watched for reloads)."""

    def __init__(self, binary: str, config_path: Path, workdir: Path):
        self.port, self.admin_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        self.log_path = workdir / "switchyard.log"
        self.log = open(self.log_path, "wb")
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        env.setdefault("ORT_DYLIB_PATH", str(REPO / ".cache/onnxruntime/libonnxruntime.so.1.31.1"))
        self.proc = subprocess.Popen(
            [binary, "serve", "--config", str(config_path), "--listen", f"127.0.0.1:{self.port}",
             "--admin-listen", f"127.0.0.1:{self.admin_port}"],
            cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"switchyard exited with {self.proc.returncode}: see {self.log_path}")
            try:
                if requests.get(f"{self.base}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError("switchyard was not ready within 120 s")

    def generation(self) -> int:
        return int(requests.get(f"{self.admin}/admin/config", timeout=10).json().get("generation", 0))

    def close(self) -> None:
        stop(self.proc, signal.SIGTERM, timeout=30)
        self.log.close()
