#!/usr/bin/env python3
"""`make schemathesis`: the long form of test_openapi_schemathesis.py, with
Schemathesis' command line.

Starts the real gateway (the embedded example config) on free loopback
ports, then runs `schemathesis run` twice against it:

1. `spec`: open-inference-protocol.yaml as committed, with valid and
   invalid data, the checks of schemathesis.toml, --max-examples cases per
   operation in the fuzzing phase (plus the examples and coverage phases);
2. `models`: the same document narrowed to the served models
   (openapi_util.model_aware), valid data only, every case of which must
   be answered 2xx.

Seeds are drawn per run (printed, and --seed replays them). Prints the
exact commands and, per run and operation, the cases generated and the
statuses answered; exits 1 if Schemathesis reported a failure, any answer
was a 5xx, or the gateway is no longer alive and answering.
"""

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import requests  # noqa: E402

from conftest import Gateway  # noqa: E402
from openapi_util import (  # noqa: E402
    REPO, SETTINGS_PATH, SPEC_PATH, load_spec, model_aware, model_aware_settings, report_counts, to_toml,
)


def schemathesis_cli() -> list:
    exe = Path(sys.executable).with_name("schemathesis")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "schemathesis.cli"]


def run(name, spec, config, base, max_examples, seed, out: Path, extra) -> tuple:
    ndjson = out / f"{name}.ndjson"
    cmd = [*schemathesis_cli(), "--no-color", "--config-file", str(config), "run", str(spec),
           "--url", base, "--max-examples", str(max_examples), "--seed", str(seed), "--workers", "1",
           "--report", "ndjson,junit", "--report-ndjson-path", str(ndjson),
           "--report-junit-path", str(out / f"{name}.junit.xml"), *extra]
    print(f"\n$ {shlex.join(cmd)}", flush=True)
    log = out / f"{name}.log"
    with open(log, "w") as fh:
        code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
    text = log.read_text()
    tail = text[text.find("= SUMMARY ="):] if "= SUMMARY =" in text else text[-3000:]
    print(tail.strip())
    if code != 0:
        print(f"(full output: {log})")
    return code, report_counts(ndjson)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="switchyard binary (default: $SWITCHYARD_BIN or target/debug/switchyard)")
    ap.add_argument("--max-examples", type=int, default=2000, help="fuzzing cases per operation (spec run)")
    ap.add_argument("--model-examples", type=int, default=500, help="fuzzing cases per operation (models run)")
    ap.add_argument("--seed", type=int, help="seed of both runs (default: drawn)")
    ap.add_argument("--out", type=Path, default=REPO / "target" / "schemathesis", help="reports and logs")
    ap.add_argument("extra", nargs="*", help="more `schemathesis run` arguments (after --)")
    args = ap.parse_args()
    if args.bin:
        os.environ["SWITCHYARD_BIN"] = args.bin
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    args.out.mkdir(parents=True, exist_ok=True)

    gw = Gateway()
    failed = False
    try:
        with tempfile.TemporaryDirectory() as tmp:
            narrowed = Path(tmp) / "open-inference-protocol.models.json"
            narrowed.write_text(json.dumps(model_aware(load_spec())))
            narrowed_config = Path(tmp) / "schemathesis.models.toml"
            narrowed_config.write_text(to_toml(model_aware_settings(args.model_examples)))
            results = {}
            for name, spec, config, n, extra in (
                ("spec", SPEC_PATH, SETTINGS_PATH, args.max_examples, args.extra),
                ("models", narrowed, narrowed_config, args.model_examples,
                 # (the CLI's own --mode default would override the file's)
                 ["--mode", "positive", "--include-path-regex", "^/v2/models/", *args.extra]),
            ):
                code, counts = run(name, spec, config, gw.base, n, seed, args.out, extra)
                failed |= code != 0
                results[name] = counts
        print(f"\nseed {seed}; per operation: cases by phase, statuses answered")
        print(f"{'run':7} {'operation':62} {'examples':>8} {'coverage':>8} {'fuzzing':>8}  statuses")
        server_errors = 0
        for name, counts in results.items():
            for label, c in sorted(counts.items()):
                p = c["phases"]
                statuses = ", ".join(f"{k}: {v}" for k, v in sorted(c["statuses"].items(), key=str))
                server_errors += sum(v for k, v in c["statuses"].items() if not isinstance(k, int) or k >= 500)
                print(f"{name:7} {label:62} {p.get('examples', 0):8} {p.get('coverage', 0):8} "
                      f"{p.get('fuzzing', 0):8}  {statuses}")
        total = sum(sum(c["statuses"].values()) for counts in results.values() for c in counts.values())
        print(f"{total} cases, {server_errors} answered 5xx or not at all")
        failed |= server_errors > 0
        alive = gw.alive() and requests.get(f"{gw.base}/v2/health/live", timeout=10).status_code == 200
        print(f"gateway alive afterwards: {alive}")
        failed |= not alive
    finally:
        gw.stop()
    print("FAILED" if failed else "passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
