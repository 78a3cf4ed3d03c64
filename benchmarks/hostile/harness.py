"""What the hostile-client scripts share (`rest_attacks.py`,
`grpc_attacks.py`): a fresh gateway per attack on free loopback ports,
its RSS sampled every 100 ms from /proc, and a client sending one-row
infer calls back to back while the attack runs, so each attack reports
the memory it took and what the other clients saw (the issue's bar:
growth under 100 MB, one-row p99 under 100 ms, on a release build)."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"

ROW = json.dumps({"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Server:
    """A gateway serving `config` (a template: `{models}` and `{dir}` are
    filled in) on free loopback ports, with its gRPC listener when `grpc`;
    stopped by PID."""

    def __init__(self, binary, config, grpc=False):
        self.dir = Path(tempfile.mkdtemp(prefix="hostile-"))
        path = self.dir / "switchyard.toml"
        path.write_text(config.format(models=MODELS, dir=self.dir))
        self.log = open(self.dir / "switchyard.log", "wb")
        for _ in range(5):  # a port taken between the probe and the bind: retry
            self.port, admin, self.grpc_port = free_port(), free_port(), free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            args = [binary, "serve", "--config", str(path), "--listen", f"127.0.0.1:{self.port}",
                    "--admin-listen", f"127.0.0.1:{admin}"]
            if grpc:
                args += ["--grpc-listen", f"127.0.0.1:{self.grpc_port}"]
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "RUST_LOG": "warn"})
            if self.wait_ready():
                return
        raise SystemExit(f"switchyard did not start; see {self.dir / 'switchyard.log'}")

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if requests.get(f"{self.base}/v2/health/ready", timeout=1).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.999999) - 1))]


def measure(server, attackers, duration, max_growth_mb, route="digits"):
    """Runs `attackers` (functions of a stop event, each run on its own
    thread until the event is set) for `duration` seconds beside the
    sampler and the one-row client; returns the figures. The attack is
    stopped early when RSS grows past `max_growth_mb`."""
    probe = requests.Session()
    url = f"{server.base}/v2/models/{route}/infer"
    for _ in range(20):
        probe.post(url, data=ROW, timeout=30)
    time.sleep(1.0)
    idle = rss_mb(server.proc.pid)
    stop, tripped = threading.Event(), threading.Event()
    samples, latencies, probe_errors = [], [], []

    def sample():
        while not stop.is_set():
            now = rss_mb(server.proc.pid)
            samples.append(now)
            if now - idle > max_growth_mb:
                tripped.set()
                stop.set()
            time.sleep(0.1)

    def one_rows():
        while not stop.is_set():
            started = time.perf_counter()
            try:
                r = probe.post(url, data=ROW, timeout=30, headers={"Content-Type": "application/json"})
                if r.status_code != 200:
                    probe_errors.append(r.status_code)
            except requests.RequestException as e:
                probe_errors.append(type(e).__name__)
            latencies.append((time.perf_counter() - started) * 1e3)

    threads = [threading.Thread(target=sample), threading.Thread(target=one_rows)]
    threads += [threading.Thread(target=attack, args=(stop,)) for attack in attackers]
    for t in threads:
        t.start()
    stop.wait(duration)
    stop.set()
    for t in threads:
        t.join()
    peak = max(samples, default=idle)
    return {
        "idle_rss_mb": round(idle, 1),
        "peak_rss_mb": round(peak, 1),
        "growth_mb": round(peak - idle, 1),
        "stopped_early": tripped.is_set(),
        "one_row_calls": len(latencies),
        "one_row_errors": len(probe_errors),
        "one_row_p50_ms": round(percentile(latencies, 0.50) or 0, 2),
        "one_row_p99_ms": round(percentile(latencies, 0.99) or 0, 2),
        "alive": server.proc.poll() is None,
    }


COLUMNS = ["attack", "requests", "statuses", "idle_rss_mb", "peak_rss_mb", "growth_mb", "stopped_early",
           "one_row_calls", "one_row_errors", "one_row_p50_ms", "one_row_p99_ms"]


def print_table(title, results):
    """The results as a Markdown table under `title`."""
    print(title)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in results:
        print("| " + " | ".join(json.dumps(r.get(c)) if c == "statuses" else str(r.get(c)) for c in COLUMNS) + " |")
