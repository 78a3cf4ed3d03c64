"""Helpers for the upstream and prefix-route tests: real upstream processes
on loopback (the apps of `upstream_apps.py`, which bind port 0 and say the
port they got, unless given one; the FastAPI V2 baseline on a reserved
port, see conftest), each stopped by PID, and memory sampling."""

import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from conftest import REPO, free_port, reserve_port

APPS = Path(__file__).resolve().parent / "upstream_apps.py"
BASELINE = REPO / "benchmarks" / "baseline" / "fastapi_server.py"


_LOG_NUMBERS = itertools.count()


class Process:
    """A child process on `port`, logged to a file, stopped by PID. With
    port 0 the process binds a free port and its first line of output,
    `ready PORT`, says which."""

    def __init__(self, args, port, log_name, ready):
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"{log_name}-{os.getpid()}-{next(_LOG_NUMBERS)}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = port or self._reported_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.addr}"
        self._wait(ready)

    def _reported_port(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(rb"^ready (\d+)$", self.log_path.read_bytes(), re.M)
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.log_path.name} exited with {self.proc.returncode}:\n{self.log_text()}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.log_path.name} reported no port after {timeout}s:\n{self.log_text()}")

    def _wait(self, ready, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.log_path.name} exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if ready(self):
                    return
            except (requests.RequestException, OSError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.log_path.name} not ready after {timeout}s:\n{self.log_text()}")

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-3000:]

    def kill(self):
        """An abrupt crash: SIGKILL, no chance to close connections cleanly."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()


def _tcp_ready(p):
    import socket
    with socket.create_connection(("127.0.0.1", p.port), timeout=0.5):
        return True


def upstream_app(kind, *args, port=None):
    """One of `upstream_apps.py`'s servers (`app`, `v2-slow MS`, ...), on a
    port of its own choice, or on `port` (reserved for the session, e.g. an
    address a gateway's config names before the app starts)."""
    port = reserve_port(port, wait_s=10) if port else 0
    return Process([sys.executable, str(APPS), kind, str(port), *map(str, args)], port, f"upstream-{kind}", _tcp_ready)


def fastapi_baseline(models="digits-heavy"):
    """The FastAPI V2 baseline serving `models` (comma-separated)."""
    port = free_port()
    args = [sys.executable, str(BASELINE), "--models-dir", str(REPO / "models"), "--models", models,
            "--host", "127.0.0.1", "--port", str(port)]
    ready = lambda p: requests.get(f"{p.base}/v2/health/ready", timeout=1).status_code == 200  # noqa: E731
    return Process(args, port, "fastapi", ready)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RssSampler:
    """Samples a process's resident memory every 20 ms in a thread."""

    def __init__(self, pid):
        self.pid = pid
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(rss_kb(self.pid))
            time.sleep(0.02)

    def __enter__(self):
        self.samples.append(rss_kb(self.pid))
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
