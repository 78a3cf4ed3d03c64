#!/usr/bin/env python3
"""Writes benchmarks/RESULTS.md and benchmarks/plots/*.png from the stage
results in benchmarks/out/ (see benchlib/report). Runs at the end of
`benchmarks/run.sh`; run it alone to regenerate the report:

    .venv/bin/python benchmarks/report.py [--out DIR] [--results FILE] [--plots DIR]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import env  # noqa: E402
from benchlib.report import main  # noqa: E402

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=env.OUT)
    ap.add_argument("--results", type=Path, default=env.BENCH / "RESULTS.md")
    ap.add_argument("--plots", type=Path, default=env.BENCH / "plots")
    a = ap.parse_args()
    main(a.out, a.results, a.plots)
