#!/usr/bin/env python3
"""Hostile REST attacks against a `switchyard` binary (issue 37, items 3
and 4): how much memory an attack takes and whether other clients are
still served while it runs.

Each attack runs against a fresh gateway (free loopback ports, a config in
a temporary folder): `--attackers` clients send the attack for
`--duration` seconds while one more client sends one-row infer calls
(digits) back to back. The server's RSS is sampled every 100 ms from
/proc. Per attack it prints: the attack requests and their statuses, the
idle RSS (before the attack), the peak and its growth, and the one-row
calls' count, errors, p50 and p99 latency. The issue's bar: growth under
100 MB and p99 under 100 ms on a release build.

Attacks (`--attack`, several allowed; default all but `bytes`):

* `inputs`, `outputs`, `id`, `parameters`, `shape`, `output-parameters`:
  8 MiB JSON bodies that are one long list of tiny entries (item 3; e.g.
  `{"inputs":[{},{},...]}`, 2.8 M entries), sent to the digits route;
* `bytes`: 8 MiB of JSON `BYTES` data of empty strings in one input
  (within the limits; about 32 bytes of memory per 3 bytes of text);
* `record`: the same 7.7 MB binary request (30,000 rows) repeated to a
  route recorded at sample 1.0 with default record settings (cache hits;
  item 4).

A run stops an attack early when the RSS grows past `--max-growth-mb`
(default 3000), to keep the machine alive. Example:

    benchmarks/hostile/rest_attacks.py --bin target/release/switchyard --duration 15
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
BODY = 8 << 20
RECORD_ROWS = 30_000

CONFIG = """
[cache]

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
limits = {{ max_rows = 40000 }}
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]

[[routes]]
name = "recorded"
models = ["digits-cheap"]
record = {{ sample = 1.0, path = "{dir}/traffic/recorded.jsonl" }}
"""

ROW = json.dumps({"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]})


def fill(prefix: bytes, item: bytes, suffix: bytes) -> bytes:
    n = (BODY - len(prefix) - len(suffix)) // (len(item) + 1)
    return prefix + b",".join([item] * n) + suffix


def attack_request(name):
    """(route, body, headers) of one attack request."""
    json_headers = {"Content-Type": "application/json"}
    lists = {
        "inputs": (b'{"inputs":[', b"{}", b"]}"),
        "outputs": (b'{"inputs":[],"outputs":[', b"{}", b"]}"),
        "id": (b'{"id":[', b"[]", b'],"inputs":[]}'),
        "parameters": (b'{"parameters":{"a":[', b"0", b']},"inputs":[]}'),
        "shape": (b'{"inputs":[{"name":"X","datatype":"FP32","shape":[', b"1", b'],"data":[1]}]}'),
        "output-parameters": (b'{"inputs":[],"outputs":[{"name":"p","parameters":{"a":[', b"0", b"]}}]}"),
    }
    if name in lists:
        return "digits", fill(*lists[name]), json_headers
    if name == "bytes":
        n = (BODY - 100) // 3
        body = b'{"inputs":[{"name":"X","datatype":"BYTES","shape":[1,%d],"data":[' % n
        return "digits", body + b",".join([b'""'] * n) + b"]}]}", json_headers
    if name == "record":
        import struct

        header = json.dumps({
            "inputs": [{"name": "X", "shape": [RECORD_ROWS, 64], "datatype": "FP32",
                        "parameters": {"binary_data_size": RECORD_ROWS * 64 * 4}}],
            "outputs": [{"name": "label", "parameters": {"binary_data": True}}],
        }).encode()
        data = struct.pack("<64f", *[i / 8 for i in range(64)]) * RECORD_ROWS
        return "recorded", header + data, {"Inference-Header-Content-Length": str(len(header)),
                                           "Content-Type": "application/octet-stream"}
    raise SystemExit(f"unknown attack {name!r}")


ATTACKS = ["inputs", "outputs", "id", "parameters", "shape", "output-parameters", "bytes", "record"]
DEFAULT = [a for a in ATTACKS if a != "bytes"]


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
    """A gateway on free loopback ports, stopped by PID."""

    def __init__(self, binary):
        self.dir = Path(tempfile.mkdtemp(prefix="hostile-"))
        path = self.dir / "switchyard.toml"
        path.write_text(CONFIG.format(models=MODELS, dir=self.dir))
        self.log = open(self.dir / "switchyard.log", "wb")
        for _ in range(5):  # a port taken between the probe and the bind: retry
            self.port, admin = free_port(), free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            self.proc = subprocess.Popen(
                [binary, "serve", "--config", str(path), "--listen", f"127.0.0.1:{self.port}",
                 "--admin-listen", f"127.0.0.1:{admin}"],
                cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
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


def run_attack(binary, name, args):
    server = Server(binary)
    try:
        route, body, headers = attack_request(name)
        probe = requests.Session()
        for _ in range(20):
            probe.post(f"{server.base}/v2/models/digits/infer", data=ROW, timeout=30)
        time.sleep(1.0)
        idle = rss_mb(server.proc.pid)
        stop, tripped = threading.Event(), threading.Event()
        samples, statuses, latencies, probe_errors = [], {}, [], []
        lock = threading.Lock()

        def sample():
            while not stop.is_set():
                now = rss_mb(server.proc.pid)
                samples.append(now)
                if now - idle > args.max_growth_mb:
                    tripped.set()
                    stop.set()
                time.sleep(0.1)

        def attack():
            session = requests.Session()
            while not stop.is_set():
                try:
                    status = session.post(f"{server.base}/v2/models/{route}/infer", data=body,
                                          headers=headers, timeout=120).status_code
                except requests.RequestException as e:
                    status = type(e).__name__
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1

        def one_rows():
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    r = probe.post(f"{server.base}/v2/models/digits/infer", data=ROW, timeout=30,
                                   headers={"Content-Type": "application/json"})
                    if r.status_code != 200:
                        probe_errors.append(r.status_code)
                except requests.RequestException as e:
                    probe_errors.append(type(e).__name__)
                latencies.append((time.perf_counter() - started) * 1e3)

        threads = [threading.Thread(target=sample), threading.Thread(target=one_rows)]
        threads += [threading.Thread(target=attack) for _ in range(args.attackers)]
        for t in threads:
            t.start()
        stop.wait(args.duration)
        stop.set()
        for t in threads:
            t.join()
        peak = max(samples, default=idle)
        return {
            "attack": name,
            "requests": sum(statuses.values()),
            "statuses": {str(k): v for k, v in sorted(statuses.items(), key=str)},
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
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the switchyard binary")
    parser.add_argument("--attack", action="append", choices=ATTACKS, help="attacks to run (default: all but bytes)")
    parser.add_argument("--attackers", type=int, default=4, help="attacking clients (default 4)")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per attack (default 15)")
    parser.add_argument("--max-growth-mb", type=float, default=3000.0, help="stop an attack past this RSS growth")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = []
    for name in args.attack or DEFAULT:
        results.append(run_attack(args.bin, name, args))
        if not args.json:
            print(f"  {name}: growth {results[-1]['growth_mb']} MB, p99 {results[-1]['one_row_p99_ms']} ms",
                  file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"bin": args.bin, "attackers": args.attackers, "duration_s": args.duration,
                          "results": results}, indent=2))
        return
    columns = ["attack", "requests", "statuses", "idle_rss_mb", "peak_rss_mb", "growth_mb", "stopped_early",
               "one_row_calls", "one_row_errors", "one_row_p50_ms", "one_row_p99_ms"]
    print(f"{args.bin}: {args.attackers} attackers, {args.duration:g} s per attack")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in results:
        print("| " + " | ".join(json.dumps(r[c]) if c == "statuses" else str(r[c]) for c in columns) + " |")


if __name__ == "__main__":
    main()
