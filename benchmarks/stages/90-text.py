#!/usr/bin/env python3
"""Stage `text`: Text transformer scenario (MiniLM) vs FastAPI. A slot, not run yet: the MiniLM text scenario and its FastAPI text baseline arrive with the text branch.

Replace this file with the real stage. It writes benchmarks/out/text.json
through benchlib.stage.Stage; the report renders its "tables" and "plots"
(see benchmarks/README.md, "Adding a stage") until a dedicated section exists.

    benchmarks/stages/90-text.py quick|full   ->  benchmarks/out/text.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib.stage import Stage  # noqa: E402

if __name__ == "__main__":
    Stage("text", "Text transformer scenario (MiniLM) vs FastAPI").not_run("not run yet: the MiniLM text scenario and its FastAPI text baseline arrive with the text branch")
