#!/usr/bin/env python3
"""Chaos under load: `make chaos` (CHAOS_RUNS=3 by default).

A front gateway balances two replicas (sharing Redis as L2) and proxies a
prefix route to an app with two addresses (see fleet.py). Closed-loop
clients send digits inferences and proxied GETs through the front for the
whole run, and in between `--steady-s` of quiet load the scenario kills
and restarts Redis, flaps one app address, swaps the model file of both
replicas and reloads them, sends a burst at 3x the measured capacity and
SIGTERMs one replica (then starts it again). The client ledger must show
every request answered correctly or rejected with a retryable status
(429/503 with Retry-After): `failed` = 0 (see load.py for the rules).

Writes `benchmarks/out/chaos/<stamp>/run-<k>/` (logs) and `chaos.json`
(ledger totals per run, the events with their timings, the first
failures); exits 1 when any run failed a request.

    benchmarks/chaos/run.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import events  # noqa: E402
from fleet import Fleet  # noqa: E402
from load import Ledger, Load, Reference  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def one_run(args, workdir: Path, reference: Reference) -> dict:
    workdir.mkdir(parents=True)
    fleet = Fleet(args.bin, args.loadgen, workdir)
    ledger = Ledger()
    started = time.monotonic()
    load = Load(fleet.front.base, reference, ledger, started)
    timeline = []
    try:
        load.start(args.clients)
        time.sleep(args.steady_s)
        for name, event in events.SCENARIO:
            began = load.now()
            what = event(fleet, load)
            timeline.append({"event": name, "from_s": round(began, 2), "to_s": round(load.now(), 2), **what})
            time.sleep(args.steady_s)
        load.stop()
    finally:
        load.stop()
        fleet.close()
    for failure in ledger.failures:
        during = [e["event"] for e in timeline if e["from_s"] <= failure["t_s"] <= e["to_s"] + args.steady_s]
        failure["during"] = during[-1] if during else "steady load"
    return {"totals": ledger.totals(), "events": timeline, "first_failures": ledger.failures,
            "seconds": round(time.monotonic() - started, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(REPO / "target/release/switchyard"))
    parser.add_argument("--loadgen", default=str(REPO / "target/release/loadgen"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--steady-s", type=float, default=5)
    parser.add_argument("--out", default=str(REPO / "benchmarks/out/chaos"))
    args = parser.parse_args()
    out = Path(args.out) / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    reference = Reference()
    runs = [one_run(args, out / f"run-{k + 1}", reference) for k in range(args.runs)]
    report = {
        "pass": all(run["totals"]["failed"] == 0 for run in runs),
        "machine": f"{platform.node()} {platform.machine()}",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "runs": runs,
    }
    (out / "chaos.json").write_text(json.dumps(report, indent=2))
    for k, run in enumerate(runs, 1):
        t = run["totals"]
        print(f"run {k}: sent {t['sent']}, answered {t['answered']}, rejected (retryable) "
              f"{t['rejected_retryable']}, failed {t['failed']} {t['failed_by_reason'] or ''}")
    print(f"{'PASS' if report['pass'] else 'FAIL'}: {out / 'chaos.json'}")
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
