#!/usr/bin/env python3
"""Stage `proxy`: Proxy overhead vs nginx plain proxy. A slot, not run yet: the proxy-overhead benchmark (vs nginx as a plain reverse proxy) arrives with the proxy branch.

Replace this file with the real stage. It writes benchmarks/out/proxy.json
through benchlib.stage.Stage; the report renders its "tables" and "plots"
(see benchmarks/README.md, "Adding a stage") until a dedicated section exists.

    benchmarks/stages/85-proxy.py quick|full   ->  benchmarks/out/proxy.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib.stage import Stage  # noqa: E402

if __name__ == "__main__":
    Stage("proxy", "Proxy overhead vs nginx plain proxy").not_run("not run yet: the proxy-overhead benchmark (vs nginx as a plain reverse proxy) arrives with the proxy branch")
