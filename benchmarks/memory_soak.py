#!/usr/bin/env python3
"""Memory soak: does the gateway give memory back after load?

Starts `switchyard serve` on free loopback ports with the example models
(digits, synth-heavy and, when fetched, MiniLM-L3, each behind a route),
the response cache off unless `--cache`, and drives a mixed load from `--concurrency` client
threads: small and batch-sized dense and text requests, large accepted
ones (up to each model's row limit), long texts, and requests over the
limits (413). Phases: warm-up (`--warmup-s` of load, then 5 s idle: the
baseline RSS), load (`--load-s`, peak RSS), idle (`--idle-s`, final RSS).

Prints one JSON document (RSS in MiB, request counts by status, latency of
the small requests, the L1 cache's own bytes with `--cache`) and exits 1
when the final RSS is more than `--tolerance` (default 0.2) above the
baseline. Example (the issue-24 must-show):

    benchmarks/memory_soak.py --bin target/release/switchyard --load-s 60 --idle-s 60
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "models"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(cache: bool, text: bool) -> str:
    parts = ["[cache]\nl1_max_bytes = \"256MiB\"\n" if cache else ""]
    parts.append(f"""
[[models]]
name = "digits-cheap"
path = "{MODELS}/digits-cheap.onnx"
batching = {{ max_batch_size = 64, max_queue_delay_us = 200 }}
warmup = true
[[models]]
name = "synth-heavy"
path = "{MODELS}/synth-heavy.onnx"
batching = {{ max_batch_size = 16, max_queue_delay_us = 500 }}
warmup = true
[[routes]]
name = "digits"
models = ["digits-cheap"]
[[routes]]
name = "synth"
models = ["synth-heavy"]
""")
    if text:
        parts.append(f"""
[[models]]
name = "minilm"
path = "{MODELS}/minilm-l3.onnx"
tokenizer = {{ path = "{MODELS}/minilm-tokenizer.json", max_length = 128 }}
batching = {{ max_batch_size = 16, max_queue_delay_us = 1000 }}
warmup = true
[[routes]]
name = "text"
models = ["minilm"]
""")
    return "".join(parts)


WORDS = "the a quick brown fox jumps over lazy dog model request memory batch token text server".split()


def sentence(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def dense(rng, n):
    return {"inputs": [{"name": "X", "shape": [n, 64], "datatype": "FP32",
                        "data": [round(rng.random(), 4) for _ in range(64 * n)]}]}


def texts(items):
    return {"inputs": [{"name": "text", "shape": [len(items)], "datatype": "BYTES", "data": items}]}


def pick(rng, text):
    """One request of the mix: (kind, model, body)."""
    roll = rng.random()
    if roll < 0.30:
        return "small", "digits", dense(rng, 1)
    if roll < 0.45:
        return "small", "synth", dense(rng, rng.randint(1, 16))
    if roll < 0.50:
        return "large", "synth", dense(rng, rng.choice([64, 128]))
    if roll < 0.55:
        return "over", "synth", {"inputs": [{"name": "X", "shape": [4096, 64], "datatype": "FP32",
                                                   "data": [0.0] * (64 * 4096)}]}
    if not text:
        return "small", "digits", dense(rng, rng.randint(1, 32))
    if roll < 0.80:
        return "small", "text", texts([sentence(rng, rng.randint(3, 30)) for _ in range(rng.randint(1, 16))])
    if roll < 0.88:
        return "large", "text", texts([sentence(rng, rng.randint(20, 120)) for _ in range(128)])
    if roll < 0.94:
        return "large", "text", texts([sentence(rng, 20_000)])
    return "over", "text", texts([""] * 20_000)


class Soak:
    def __init__(self, args):
        self.args = args
        self.text = (MODELS / "minilm-l3.onnx").is_file() and (MODELS / "minilm-tokenizer.json").is_file()
        self.dir = tempfile.mkdtemp(prefix="soak-")
        path = Path(self.dir) / "soak.toml"
        path.write_text(config(args.cache, self.text))
        self.port, self.admin = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "RUST_LOG": "warn"}
        self.log = open(Path(self.dir) / "switchyard.log", "wb")
        self.proc = subprocess.Popen(
            [args.bin, "serve", "--config", str(path), "--listen", f"127.0.0.1:{self.port}",
             "--admin-listen", f"127.0.0.1:{self.admin}"],
            cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.samples = []
        self.stop_sampling = threading.Event()
        self.counts = {}
        self.small_ms = []
        self.lock = threading.Lock()

    def wait_ready(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"switchyard exited: see {self.dir}/switchyard.log")
            try:
                if requests.get(f"{self.base}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise SystemExit("switchyard not ready")

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def sample(self):
        while not self.stop_sampling.is_set():
            self.samples.append((time.monotonic(), self.rss()))
            time.sleep(0.5)

    def prepare(self, count=400, seed=7):
        """Encodes `count` requests of the mix once, so the clients spend
        their time sending rather than building JSON."""
        rng = random.Random(seed)
        self.bodies = []
        for _ in range(count):
            kind, model, body = pick(rng, self.text)
            self.bodies.append((kind, model, json.dumps(body).encode()))

    def client(self, seed, until):
        rng = random.Random(seed)
        session = requests.Session()
        headers = {"x-latency-budget-ms": "10000", "content-type": "application/json"}
        while time.monotonic() < until:
            kind, model, body = rng.choice(self.bodies)
            started = time.monotonic()
            try:
                r = session.post(f"{self.base}/v2/models/{model}/infer", data=body, headers=headers, timeout=120)
                status = r.status_code
            except requests.RequestException:
                status = "error"
            took = (time.monotonic() - started) * 1e3
            with self.lock:
                key = f"{kind}:{status}"
                self.counts[key] = self.counts.get(key, 0) + 1
                if kind == "small" and status == 200:
                    self.small_ms.append(took)

    def load(self, seconds, seed):
        until = time.monotonic() + seconds
        threads = [threading.Thread(target=self.client, args=(seed + i, until)) for i in range(self.args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def stats(self):
        return requests.get(f"http://127.0.0.1:{self.admin}/admin/stats", timeout=10).json()

    def run(self):
        self.prepare()
        self.wait_ready()
        sampler = threading.Thread(target=self.sample, daemon=True)
        sampler.start()
        self.load(self.args.warmup_s, 1000)
        time.sleep(5)
        baseline = self.rss()
        self.counts, self.small_ms = {}, []
        load_start = time.monotonic()
        self.load(self.args.load_s, 2000)
        load_end = time.monotonic()
        peak = max(r for t, r in self.samples if load_start <= t <= load_end)
        at_load_end = self.rss()
        time.sleep(self.args.idle_s)
        final = self.rss()
        self.stop_sampling.set()
        cache = self.stats().get("cache") if self.args.cache else None
        small = sorted(self.small_ms)
        pct = lambda q: round(small[min(len(small) - 1, int(q * len(small)))], 1) if small else None
        return {
            "binary": self.args.bin,
            "cache": self.args.cache,
            "text_model": self.text,
            "concurrency": self.args.concurrency,
            "phases_s": {"warmup": self.args.warmup_s, "load": self.args.load_s, "idle": self.args.idle_s},
            "rss_mib": {"baseline_after_warmup": round(baseline, 1), "peak_during_load": round(peak, 1),
                        "at_end_of_load": round(at_load_end, 1), "after_idle": round(final, 1)},
            "after_idle_vs_baseline": round(final / baseline, 3),
            "requests": dict(sorted(self.counts.items())),
            "small_request_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": round(small[-1], 1) if small else None},
            "cache_stats": cache,
            "rss_series": [(round(t - load_start, 1), round(r, 1)) for t, r in self.samples],
        }

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(REPO / "target/release/switchyard"))
    parser.add_argument("--warmup-s", type=float, default=15)
    parser.add_argument("--load-s", type=float, default=60)
    parser.add_argument("--idle-s", type=float, default=60)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--cache", action="store_true", help="with [cache] (L1 on): report its bytes")
    parser.add_argument("--tolerance", type=float, default=0.2)
    parser.add_argument("--series", action="store_true", help="include the RSS time series")
    args = parser.parse_args()
    soak = Soak(args)
    try:
        result = soak.run()
    finally:
        soak.close()
    if not args.series:
        result.pop("rss_series")
    print(json.dumps(result, indent=2))
    return 0 if result["after_idle_vs_baseline"] <= 1 + args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
