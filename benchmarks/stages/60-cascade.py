#!/usr/bin/env python3
"""Stage `cascade`: cascade accuracy vs share escalated on the digits test
split (450 rows, one row per request) through the release gateway:
cheap-only, heavy-only, the cascade at its default threshold (0.8) and a
sweep of thresholds (benchmarks/cascade_quality.py --sweep).

    benchmarks/stages/60-cascade.py quick|full   ->  benchmarks/out/cascade.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402

SWEEP = {"quick": "0.5,0.6,0.7,0.9,0.95", "full": "0.3,0.4,0.5,0.6,0.65,0.7,0.75,0.85,0.9,0.95,0.98,0.99"}


def body(st: Stage) -> None:
    if not (env.MODELS / "digits-test.json").exists():
        st.not_run("models/digits-test.json is missing (scripts/setup.sh run generates it)")
    figures = st.dir / "cascade-quality.json"
    figures.unlink(missing_ok=True)
    cmd = [str(env.PY), "benchmarks/cascade_quality.py", "--bin", str(env.SWITCHYARD), "--threshold", "0.8",
           "--sweep", SWEEP[st.mode], "--json-out", str(figures)]
    st.commands.append(" ".join(cmd))
    rc = run_child(cmd, 900, cwd=env.REPO, env=env.child_env())
    if figures.exists():
        st.data.update(json.loads(figures.read_text()))
    if rc not in (0, 1) or not figures.exists():  # 1: ran, goal not met (reported, not a failure)
        raise RuntimeError(f"cascade_quality.py exited with {rc}")


if __name__ == "__main__":
    Stage("cascade", "Cascade accuracy vs share escalated").run(body)
