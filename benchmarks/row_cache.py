#!/usr/bin/env python3
"""The cache per row (issue 46, item 2) in rows/s: MiniLM-L6 embeddings in
batches of 32 texts, on one gateway with two routes over the same ONNX
file, side by side in one run:

  rows    the model with `rows_independent` (the default for a text model):
          each text has its own cache entry
  whole   the same file as a model with `rows_independent = false`: one
          entry per request (what every model had before)

Two loads, each on both routes:

  half-seen  each batch holds the previous batch's 16 new texts (seen
             before) interleaved with 16 new ones (issue 46's corpus)
  full-miss  every text is new: the cost of the per-row keys and stores

Closed loop, `--clients` threads, `--batches` batches each, the variants
alternating over `--rounds` rounds (drift hits them alike); the figure is
the best round's rows/s, and beside it the server's CPU time per row (its
utime + stime from /proc over the timed part, the lowest of the rounds):
on a shared machine, throughput moves with the neighbours' load, CPU per
row much less. The vectors of one half-seen batch are compared
between the routes (max abs difference; padding changes only float sums).

    .venv/bin/python benchmarks/row_cache.py [--bin target/release/switchyard]
        [--clients 4] [--batches 20] [--rounds 3] [--cpus 1]

Needs models/minilm-l6.onnx and models/minilm-tokenizer.json
(scripts/setup.sh runs models/text_models.py) and a release build
(cargo build --release -p switchyard); `--cpus` pins the server with taskset.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
BATCH = 32


def config() -> str:
    tokenizer = f'{{ path = "{MODELS / "minilm-tokenizer.json"}", max_length = 128 }}'
    batching = "{ max_batch_size = 64, max_queue_delay_us = 500 }"
    text = '[cache]\nl1_max_bytes = "512MiB"\n'
    for name, rows in [("minilm-rows", "true"), ("minilm-whole", "false")]:
        text += f"""
[[models]]
name = "{name}"
path = "{MODELS / 'minilm-l6.onnx'}"
tokenizer = {tokenizer}
batching = {batching}
rows_independent = {rows}
limits = {{ max_rows = 64 }}
"""
    return text + '\n[[routes]]\nname = "rows"\nmodels = ["minilm-rows"]\n' \
        '\n[[routes]]\nname = "whole"\nmodels = ["minilm-whole"]\n'


def start(binary: str, cpus: str | None, folder: Path):
    (folder / "rows.toml").write_text(config())
    ports = folder / "ports.json"
    cmd = [binary, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
           "--config", str(folder / "rows.toml"), "--ports-file", str(ports)]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    log = open(folder / "gateway.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "RUST_LOG": "warn"}, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not ports.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"the gateway did not start: {(folder / 'gateway.log').read_text()[-2000:]}")
        time.sleep(0.05)
    return proc, "http://" + json.loads(ports.read_text())["listen"]


class Corpus:
    """Texts never sent before: sentences.txt's lines, numbered."""

    def __init__(self):
        self.lines = [l for l in (ROOT / "benchmarks/data/sentences.txt").read_text().splitlines() if l.strip()]
        self.next = 0
        self.lock = threading.Lock()

    def take(self, n):
        with self.lock:
            start, self.next = self.next, self.next + n
        return [f"{self.lines[i % len(self.lines)]} ({i})" for i in range(start, start + n)]


def embed(session, base, route, texts):
    r = session.post(f"{base}/v2/models/{route}/infer", timeout=120, json={
        "inputs": [{"name": "text", "shape": [len(texts), 1], "datatype": "BYTES", "data": texts}]})
    r.raise_for_status()
    out = r.json()["outputs"][0]
    return np.array(out["data"], dtype=np.float32).reshape(out["shape"])


def batches(corpus, load, count):
    """The batches one client sends (and the warm-up batch before them)."""
    if load == "full-miss":
        return [], [corpus.take(BATCH) for _ in range(count)]
    first = corpus.take(BATCH // 2)
    seen, out = first, []
    for _ in range(count):
        new = corpus.take(BATCH // 2)
        out.append([t for pair in zip(seen, new) for t in pair])
        seen = new
    return [first], out


def cpu_seconds(pid):
    """The process's user + system CPU time so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(pid, base, route, load, corpus, clients, count):
    plans = [batches(corpus, load, count) for _ in range(clients)]
    with requests.Session() as s:
        for warm, _ in plans:
            for batch in warm:
                embed(s, base, route, batch)
    def client(plan):
        with requests.Session() as s:
            for batch in plan:
                embed(s, base, route, batch)
    threads = [threading.Thread(target=client, args=(p,)) for _, p in plans]
    cpu, began = cpu_seconds(pid), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = clients * count * BATCH
    return rows / (time.perf_counter() - began), (cpu_seconds(pid) - cpu) / rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "target/release/switchyard"))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpus", default=None, help="taskset CPU list for the server, e.g. 1")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start(args.bin, args.cpus, Path(tmp))
        try:
            corpus = Corpus()
            with requests.Session() as s:  # load both models before timing
                embed(s, base, "rows", corpus.take(2))
                embed(s, base, "whole", corpus.take(2))
                same = corpus.take(BATCH // 2)
                embed(s, base, "rows", same)
                mixed = [t for pair in zip(same, corpus.take(BATCH // 2)) for t in pair]
                diff = float(np.abs(embed(s, base, "rows", mixed) - embed(s, base, "whole", mixed)).max())
            best, cpu = {}, {}
            for r in range(args.rounds):
                order = [(l, v) for l in ("half-seen", "full-miss") for v in ("rows", "whole")]
                for load, route in order if r % 2 == 0 else order[::-1]:
                    rate, per_row = run(proc.pid, base, route, load, corpus, args.clients, args.batches)
                    best[load, route] = max(best.get((load, route), 0.0), rate)
                    cpu[load, route] = min(cpu.get((load, route), float("inf")), per_row)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"binary {args.bin}, {args.clients} clients x {args.batches} batches of {BATCH}, "
          f"best of {args.rounds} rounds, server cpus {args.cpus or 'any'}")
    print("| load | per-row on (rows/s) | per-row off (rows/s) | on / off | server CPU ms/row on | off | off / on |")
    print("|---|---|---|---|---|---|---|")
    for load in ("half-seen", "full-miss"):
        on, off = best[load, "rows"], best[load, "whole"]
        c_on, c_off = cpu[load, "rows"] * 1e3, cpu[load, "whole"] * 1e3
        print(f"| {load} | {on:.0f} | {off:.0f} | {on / off:.2f}x | {c_on:.2f} | {c_off:.2f} | {c_off / c_on:.2f}x |")
    print(f"max |rows - whole| over one half-seen batch's vectors: {diff:.2e}")


if __name__ == "__main__":
    main()
