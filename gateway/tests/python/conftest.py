"""Harness: starts the real `switchyard` binary on a free loopback port,
waits until it is ready, and stops it by PID after the tests."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A running gateway process."""

    def __init__(self, config=None, extra_args=()):
        binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
        self.port = free_port()
        self.admin_port = free_port()
        self.url = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.url}"
        args = [binary, "serve", "--listen", self.url, "--admin-listen", f"127.0.0.1:{self.admin_port}"]
        if config:
            args += ["--config", str(config)]
        args += list(extra_args)
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchyard-{self.port}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"switchyard exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if requests.get(f"{self.base}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"switchyard not ready after {timeout}s:\n{self.log_text()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def gateway():
    gw = Gateway()
    yield gw
    gw.stop()
