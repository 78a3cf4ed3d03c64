"""Shared helpers of the benchmark suite (`benchmarks/run.sh`).

- `env`: paths, the quick/full settings, core pinning, machine facts.
- `servers`: starting the servers under test pinned to their core,
  readiness, process-tree memory, stopping them.
- `load`: running `target/release/loadgen` and reading its JSON report.
- `stage`: the result file every stage writes (`benchmarks/out/<stage>.json`).
- `report`: the report generator (`benchmarks/report.py`).
"""
