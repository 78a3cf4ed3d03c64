#!/usr/bin/env python3
"""Soak: `make soak` (SOAK_MINUTES=30 by default).

Runs the release gateway with Redis as L2 and a real upstream app behind a
prefix route, and drives mixed traffic from closed-loop clients for the
whole run: cascade-route JSON requests (repeated inputs for cache hits and
fresh ones for misses), binary-tensor requests, draft-then-final SSE streams
(some abandoned after the draft), a text model, proxied GETs, uploads and
SSE, admin reads, malformed and over-limit requests (which must get 400 and
413), requests on new connections; and rewrites the config every
`--reload-every-s` (a real reload, checked to take effect).

Phases: warm-up under load (`--warmup-s`), a quiet pause (the baseline of
descriptors and threads), the loaded run, then the clients stop and the
gateway idles until descriptors and threads are back (at most
`--settle-s`). Every `--interval-s` a sample is taken (RSS, descriptors,
threads, queue depths, in-flight requests, pool errors, client outcomes).

Writes `benchmarks/out/soak/<stamp>/`: samples.jsonl, soak.json (verdict,
figures, ledger) and soak.png; exits 1 when a pass rule fails
(see verdict.py).

    benchmarks/soak/run.py --minutes 30
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot  # noqa: E402
import probe  # noqa: E402
import services  # noqa: E402
import traffic  # noqa: E402
import verdict  # noqa: E402


class Soak:
    def __init__(self, args):
        self.args = args
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        self.out = Path(args.out) / stamp
        self.out.mkdir(parents=True, exist_ok=True)
        self.text = services.text_models_present()
        self.config_path = self.out / "soak.toml"
        self.samples: list = []
        self.reload_times: list = []
        self.reloads = {"asked": 0, "applied": 0, "failed": []}
        self.phase = "warmup"
        self.started = time.monotonic()
        self.stopping = threading.Event()

    def write_config(self, generation: int) -> None:
        text = services.gateway_config(self.redis.url, self.upstream.port, generation, self.text)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.config_path)

    def start(self) -> None:
        self.redis = services.Redis(self.out)
        self.upstream = services.UpstreamApp(self.out)
        self.write_config(0)
        self.gateway = services.Gateway(self.args.bin, self.config_path, self.out)
        self.ledger = traffic.Ledger()
        self.mix = traffic.Mix(self.gateway.base, self.gateway.admin, self.text)
        self.clients = traffic.Clients(self.mix, self.ledger, self.args.clients, seed=1, pause_ms=self.args.pause_ms)

    def sampler(self) -> None:
        while not self.stopping.wait(self.args.interval_s):
            self.take_sample()

    def take_sample(self) -> dict:
        row = probe.sample(self.gateway.proc.pid, self.gateway.admin, self.started, self.phase, self.ledger.totals())
        self.samples.append(row)
        with open(self.out / "samples.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        return row

    def reloader(self) -> None:
        """Rewrites the config every `reload_every_s` while clients run and
        checks that the gateway's generation moves on within 15 s."""
        generation = 0
        while not self.stopping.wait(self.args.reload_every_s):
            if self.phase not in ("warmup", "load"):
                continue
            before = self.gateway.generation()
            generation += 1
            self.write_config(generation)
            self.reloads["asked"] += 1
            self.reload_times.append(time.monotonic() - self.started)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.gateway.generation() <= before:
                time.sleep(0.2)
            if self.gateway.generation() > before:
                self.reloads["applied"] += 1
            else:
                self.reloads["failed"].append(round(time.monotonic() - self.started, 1))

    def settle(self) -> dict:
        """Idles until descriptors and threads are at or under the baseline
        (or `settle_s` passed); returns the last figures."""
        deadline = time.monotonic() + self.args.settle_s
        while True:
            figures = probe.process_figures(self.gateway.proc.pid)
            done = figures["fds"] <= self.baseline["fds"] and figures["threads"] <= self.baseline["threads"]
            if done or time.monotonic() > deadline:
                figures["settled_after_s"] = round(self.args.settle_s - (deadline - time.monotonic()), 1)
                return figures
            time.sleep(1)

    def run(self) -> dict:
        self.start()
        threading.Thread(target=self.sampler, daemon=True).start()
        threading.Thread(target=self.reloader, daemon=True).start()
        self.take_sample()
        self.clients.start()
        time.sleep(self.args.warmup_s)
        self.clients.stop()
        self.phase = "quiet"
        time.sleep(self.args.quiet_s)
        self.baseline = probe.process_figures(self.gateway.proc.pid)
        self.take_sample()
        self.phase = "load"
        self.clients.start()
        time.sleep(self.args.minutes * 60 - self.args.warmup_s - self.args.quiet_s)
        self.take_sample()
        self.clients.stop()
        self.phase = "settle"
        after = self.settle()
        self.take_sample()
        self.stopping.set()
        ledger = self.ledger.totals()
        result = verdict.judge(self.samples, self.baseline, after, ledger,
                               {k: v for k, v in self.reloads.items() if k != "failed"},
                               fd_slack=self.args.fd_slack, thread_slack=self.args.thread_slack)
        result.update({
            "machine": f"{platform.node()} {platform.machine()}, {cpu_count()} CPUs",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "binary": self.args.bin,
            "text_model": self.text,
            "minutes": self.args.minutes,
            "clients": self.args.clients,
            "baseline": self.baseline,
            "after_settle": after,
            "reloads_failed_at_s": self.reloads["failed"],
            "ledger_by_kind": self.ledger.counts,
            "unexpected_examples": self.ledger.examples,
            "requests_per_s": round(sum(ledger.values()) / max(1, self.args.minutes * 60 - self.args.quiet_s), 1),
            "out": str(self.out),
        })
        (self.out / "soak.json").write_text(json.dumps(result, indent=2))
        if not self.args.no_plot:
            plot.draw(self.samples, self.reload_times, self.out / "soak.png",
                      f"soak {self.args.minutes:g} min, {self.args.clients} clients: "
                      f"{'PASS' if result['pass'] else 'FAIL'}")
        return result

    def close(self) -> None:
        self.stopping.set()
        for part in ("clients", "gateway", "upstream", "redis"):
            thing = getattr(self, part, None)
            if thing is not None:
                (thing.stop if part == "clients" else thing.close)()


def cpu_count() -> int:
    try:
        return int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip())
    except (OSError, ValueError):
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(services.REPO / "target/release/switchyard"))
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup-s", type=float, default=120)
    parser.add_argument("--quiet-s", type=float, default=15)
    parser.add_argument("--settle-s", type=float, default=90)
    parser.add_argument("--interval-s", type=float, default=10)
    parser.add_argument("--reload-every-s", type=float, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pause-ms", type=float, default=20, help="longest random pause between a client's requests")
    parser.add_argument("--fd-slack", type=int, default=0)
    parser.add_argument("--thread-slack", type=int, default=0)
    parser.add_argument("--no-plot", action="store_true", help="skip soak.png (no matplotlib needed)")
    parser.add_argument("--out", default=str(services.REPO / "benchmarks/out/soak"))
    args = parser.parse_args()
    soak = Soak(args)
    try:
        result = soak.run()
    finally:
        soak.close()
    summary = {k: result[k] for k in ("pass", "checks", "requests_per_s", "out")}
    print(json.dumps(summary, indent=2))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
