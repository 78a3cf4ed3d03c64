#!/usr/bin/env python3
"""Stage `draft-final`: Draft vs final latency (SSE). A slot, not run yet: the SSE draft/final timing benchmark arrives with the sse branch.

Replace this file with the real stage. It writes benchmarks/out/draft-final.json
through benchlib.stage.Stage; the report renders its "tables" and "plots"
(see benchmarks/README.md, "Adding a stage") until a dedicated section exists.

    benchmarks/stages/80-draft-final.py quick|full   ->  benchmarks/out/draft-final.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib.stage import Stage  # noqa: E402

if __name__ == "__main__":
    Stage("draft-final", "Draft vs final latency (SSE)").not_run("not run yet: the SSE draft/final timing benchmark arrives with the sse branch")
