#!/usr/bin/env python3
"""Overhead of metrics and tracing on the hot path (L1 cache hits of
digits-cheap), side by side in one run:

  base             the gateway built from --base-ref (before metrics/tracing)
  metrics          this build: /metrics always on, tracing off (the default)
  traced-unsampled this build, [telemetry] on with sampling_ratio = 0.0
  traced           this build, [telemetry] on, every request traced and
                   exported to a local OTLP sink that answers 200
  base+log, metrics+log   the same two with the default access log on

Every server runs on CPU 1 with `server.threads = 1`; the load generator on
CPU 0 (closed loop, 32 clients, one identical body). Variants alternate and
rounds run in reverse order, so drift hits them alike. Server CPU per
request = the process's user + system time over the run / the requests the
server counted (/admin/stats L1 hits + misses). Writes
benchmarks/out/obs-*.json and benchmarks/RESULTS-observability.md.

    benchmarks/obs_overhead.py --base-ref f93c788 [--rounds 2] [--duration 8]

Needs target/release/{switchyard,loadgen} (cargo build --release -p
switchyard -p switchyard-benchmarks); --base-ref is built with `git
archive` + cargo from benchmarks/out/base-src (sharing target/'s deps)."""

import argparse
import datetime
import http.server
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
RESULTS = ROOT / "benchmarks" / "RESULTS-observability.md"
SY = ROOT / "target" / "release" / "switchyard"
LG = ROOT / "target" / "release" / "loadgen"
TICK = os.sysconf("SC_CLK_TCK")
NO_ACCESS_LOG = "info,pingora=warn,ort=warn,switchyard::access=off"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout.strip()


def build_base(ref):
    src = OUT / "base-src"
    binary = OUT / f"switchyard-{ref}"
    if binary.exists():
        return binary
    subprocess.run(["rm", "-rf", str(src)], check=True)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    # Same target folder: the dependencies are shared; the workspace crates
    # of the other source tree get their own artifacts. The binary's usual
    # path is then rebuilt for this tree.
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target"))
    print(f"[obs-bench] building {ref} (release)", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "-p", "switchyard"], cwd=src, env=env, check=True)
    subprocess.run(["cp", str(SY), str(binary)], check=True)
    subprocess.run(["cargo", "build", "--release", "-p", "switchyard"], cwd=ROOT, env=env, check=True)
    if subprocess.run(["cmp", "-s", str(SY), str(binary)]).returncode == 0:
        sys.exit(f"{SY} is still the {ref} build; rebuild it (touch gateway/src/main.rs)")
    return binary


class Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts and drops every export."""
    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Sink.received += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def config(port, admin, telemetry):
    return f"""
[server]
listen = "127.0.0.1:{port}"
admin_listen = "127.0.0.1:{admin}"
threads = 1
shutdown_grace_s = 1

[repository]
path = "{ROOT / 'models'}"

[cache]
l1_max_bytes = "256MiB"

[[models]]
name = "digits-cheap"
path = "digits-cheap.onnx"
warmup = true
pools = [{{ device = "cpu", workers = 1, intra_op_threads = 1 }}]

[[routes]]
name = "cheap"
models = ["digits-cheap"]
{telemetry}
"""


class Server:
    def __init__(self, name, binary, telemetry, log_on, workdir):
        self.name, self.port, self.admin = name, free_port(), free_port()
        path = workdir / f"{name}.toml"
        path.write_text(config(self.port, self.admin, telemetry))
        env = dict(os.environ)
        if log_on:
            env.pop("RUST_LOG", None)
        else:
            env["RUST_LOG"] = NO_ACCESS_LOG
        self.log = open(workdir / f"{name}.log", "wb")
        self.proc = subprocess.Popen(["taskset", "-c", "1", str(binary), "serve", "--config", str(path)],
                                     cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}/v2/models/cheap/infer"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/health/ready", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{name} did not start")

    def ticks(self):
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def served(self):
        stats = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/admin/stats", timeout=5))
        return stats["cache"]["l1_hits"] + stats["cache"]["l1_misses"]

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def run(server, rnd, args, commands):
    label = f"{server.name}-r{rnd}"
    out = OUT / f"obs-{label}.json"
    cmd = ["taskset", "-c", "0", str(LG), "--url", server.url, "--mode", "closed", "--concurrency", "32",
           "--duration", f"{args.duration}s", "--warmup", f"{args.warmup}s", "--input-shape", "X:1,64",
           "--datatype", "FP32", "--distinct", "1", "--seed", "42", "--label", label,
           "--json-out", str(out), "--quiet"]
    commands.append(" ".join(cmd))
    ticks, served = server.ticks(), server.served()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=args.duration + args.warmup + 60)
    ticks, served = server.ticks() - ticks, server.served() - served
    report = json.loads(out.read_text())
    return {
        "variant": server.name, "round": rnd, "rps": report["rps"], "ok": report["ok"],
        "failed": report["requests"] - report["ok"], "p50_ms": report["latency_us"]["p50"] / 1000,
        "p99_ms": report["latency_us"]["p99"] / 1000, "cpu_us": ticks / TICK * 1e6 / max(served, 1),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-ref", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated variants to run (default: all)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    base = build_base(args.base_ref)
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"
    traced = f'[telemetry]\notlp_endpoint = "{endpoint}"\nbatch_delay_ms = 200\n'
    variants = [
        ("base", base, "", False),
        ("metrics", SY, "", False),
        ("traced-unsampled", SY, traced + "sampling_ratio = 0.0\n", False),
        ("traced", SY, traced, False),
        ("base+log", base, "", True),
        ("metrics+log", SY, "", True),
    ]
    if args.only:
        wanted = set(args.only.split(","))
        variants = [v for v in variants if v[0] in wanted]
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    rows, commands = [], []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as work:
        servers = []
        try:
            for name, binary, telemetry, log_on in variants:
                servers.append(Server(name, binary, telemetry, log_on, Path(work)))
            for s in servers:  # warm the L1 entry
                for _ in range(2):
                    subprocess.run(["taskset", "-c", "0", str(LG), "--url", s.url, "--requests", "1",
                                    "--duration", "10s", "--input-shape", "X:1,64", "--datatype", "FP32",
                                    "--distinct", "1", "--seed", "42", "--quiet"],
                                   check=True, stdout=subprocess.DEVNULL, timeout=60)
            for rnd in range(1, args.rounds + 1):
                order = servers if rnd % 2 else list(reversed(servers))
                for s in order:
                    print(f"[obs-bench] round {rnd}: {s.name}", file=sys.stderr)
                    rows.append(run(s, rnd, args, commands))
        finally:
            for s in servers:
                s.stop()
    sink.shutdown()
    write_results(args, rows, commands, load_before, Sink.received)


def median(rows, variant, key):
    return statistics.median(r[key] for r in rows if r["variant"] == variant)


def write_results(args, rows, commands, load_before, exports):
    commit = sh("git", "rev-parse", "--short", "HEAD", cwd=ROOT)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Observability overhead on the cache-hit path",
        "",
        f"Generated by `benchmarks/obs_overhead.py --base-ref {args.base_ref} --rounds {args.rounds} "
        f"--duration {args.duration}{' --only ' + args.only if args.only else ''}`.",
        "",
        f"- Machine: {os.cpu_count()} vCPU {cpu}, {platform.system()} {platform.release()}, no GPU",
        f"- Date: {now}; commit {commit} vs base {args.base_ref}; load average before: {' '.join(load_before)}",
        "- Servers on CPU 1 (`server.threads = 1`), load generator on CPU 0; closed loop, 32 clients, "
        f"{args.duration} s measured after {args.warmup} s warm-up; one identical body (every request an L1 hit)",
        "- Access log off (`switchyard::access=off`) except in the `+log` rows (default logging, to tmpfs)",
        f"- `traced`: every request sampled and exported to a local sink that drops the spans "
        f"({exports} export requests received)",
        "",
        "| variant | round | answered/s | p50 ms | p99 ms | server CPU µs/request | ok | failed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["variant"], r["round"])):
        lines.append(f"| {r['variant']} | {r['round']} | {r['rps']:,.0f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} "
                     f"| {r['cpu_us']:.1f} | {r['ok']:,} | {r['failed']} |")
    lines += ["", "Medians over the rounds, relative to `base` (CPU per request: lower is better):", ""]
    lines += ["| variant | answered/s | vs base | CPU µs/request | vs base |", "|---|---|---|---|---|"]
    ran = {r["variant"] for r in rows}
    for variant, ref in [("base", "base"), ("metrics", "base"), ("traced-unsampled", "base"),
                         ("traced", "base"), ("base+log", "base+log"), ("metrics+log", "base+log")]:
        if variant not in ran or ref not in ran:
            continue
        rps, cpu_us = median(rows, variant, "rps"), median(rows, variant, "cpu_us")
        lines.append(f"| {variant} | {rps:,.0f} | {rps / median(rows, ref, 'rps'):.3f}x | {cpu_us:.1f} "
                     f"| {cpu_us / median(rows, ref, 'cpu_us'):.3f}x |")
    lines += ["", "## Commands", "", "```", *commands, "```", ""]
    text = "\n".join(lines)
    notes = ""
    if RESULTS.exists() and "<!-- notes:begin -->" in RESULTS.read_text():
        old = RESULTS.read_text()
        notes = old[old.index("<!-- notes:begin -->"):old.index("<!-- notes:end -->") + len("<!-- notes:end -->")]
    RESULTS.write_text(text.replace("## Commands", (notes + "\n\n## Commands") if notes else "## Commands"))
    print(text)


if __name__ == "__main__":
    main()
