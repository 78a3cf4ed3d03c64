#!/usr/bin/env python3
"""Stage `tenants`: tenants under overload (benchmarks/tenants_bench.py).

One gateway, one run: noisy neighbour (tenant A at 5x the route's
capacity, tenant B at 0.2x) with the fair share and without it, priority
classes at 2x overload against the high class alone (pool settings:
neither, `preempt`, `reserve_top_class`; the goal judged on the best), and mixed budgets
(25 ms / 500 ms) in deadline order vs `queue_order = "fifo"`.

    benchmarks/stages/97-tenants.py quick|full   ->  benchmarks/out/tenants.json

Goals (issue 41): B >= 99% answered with its p99 inside its budget, and
collapsing without the fair share; the high class's p99 at 2x overload
within 1.5x of its unloaded p99, the low class absorbing the sheds;
deadline order raising the share answered inside the budget vs FIFO.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402


def median(rounds, pick):
    return statistics.median(pick(r) for r in rounds)


def body(st: Stage) -> None:
    for binary in (env.SWITCHYARD, env.LOADGEN):
        if not binary.is_file():
            st.not_run(f"{env.rel(binary)} is missing (cargo build --release)")
    if not (env.MODELS / "synth-heavy.onnx").is_file():
        st.not_run("models/synth-heavy.onnx is missing (scripts/setup.sh)")
    seconds, rounds = (4, 2) if st.mode == "quick" else (6, 5)
    pins = env.pinning()
    out = st.dir / "tenants.json"
    cmd = [str(env.PY), "benchmarks/tenants_bench.py", "--bin", env.rel(env.SWITCHYARD), "--loadgen", env.rel(env.LOADGEN),
           "--seconds", str(seconds), "--rounds", str(rounds), "--server-cpus", pins["server_cpus"],
           "--client-cpus", pins["client_cpus"], "--json-out", str(out)]
    st.commands.append(" ".join(cmd[1:]))
    rc = run_child(cmd, 1200, cwd=env.REPO, env=env.child_env())
    if rc != 0:
        raise RuntimeError(f"tenants_bench.py exited with {rc}")
    result = json.loads(out.read_text())
    st.data["result"] = result
    rs, budget = result["rounds"], result["args"]["b_budget_ms"]
    b = {k: (median(rs, lambda r: r[k]["b"]["answered_share"]), median(rs, lambda r: r[k]["b"]["p99_ms"]))
         for k in ("fair", "unfair")}
    # One row per variant of the priority scenario present: neither
    # setting, `preempt`, `reserve_top_class` (tenants_bench.py VARIANTS).
    variants = [(key, name) for key, name in (("priority", "neither"), ("priority-preempt", "preempt"),
                                              ("priority-reserve", "reserve_top_class")) if key in rs[0]]
    prio = {key: {k: median(rs, lambda r: r[key][k]["p99_ms"]) for k in ("high_alone", "high", "low")}
            for key, _ in variants}
    ratio = {key: median(rs, lambda r: r[key]["high_p99_ratio"]) for key, _ in variants}
    shed = {key: {k: median(rs, lambda r: r[key][f"{k}_shed_share"]) for k in ("high", "low")} for key, _ in variants}
    # The goal is judged on the best setting an operator can choose.
    goal_key, goal_name = min(variants, key=lambda v: ratio[v[0]])
    inside = {k: median(rs, lambda r: r[k]["inside_budget_share"]) for k in ("edf", "fifo")}
    st.data["tables"] = [
        {"title": f"Noisy neighbour: A at 5x capacity ({result['capacity_rps']:.0f} req/s), B at 0.2x, B's budget "
                  f"{budget} ms (medians of {rounds} rounds):",
         "columns": ["fair share", "B answered", "B p99 ms"],
         "rows": [["on", f"{b['fair'][0]:.1%}", round(b["fair"][1], 1)],
                  ["off", f"{b['unfair'][0]:.1%}", round(b["unfair"][1], 1)]]},
        {"title": "Priority: the high class at 0.5x capacity alone, then with the low class at 1.5x beside it "
                  "(p99 ms; shed shares), per pool setting:",
         "columns": ["setting", "high alone", "high, 2x overload", "ratio", "low, 2x overload", "shed high / low"],
         "rows": [[name, round(prio[key]["high_alone"], 1), round(prio[key]["high"], 1), f"{ratio[key]:.2f}x",
                   round(prio[key]["low"], 1), f"{shed[key]['high']:.1%} / {shed[key]['low']:.1%}"]
                  for key, name in variants]},
        {"title": "Mixed budgets (25 ms / 500 ms) at 1.5x capacity: share answered inside the budget:",
         "columns": ["queue order", "inside budget"],
         "rows": [["deadline", f"{inside['edf']:.1%}"], ["fifo", f"{inside['fifo']:.1%}"]]},
    ]
    st.data["findings"] = [
        {"what": "noisy neighbour: B answered and its p99 with the fair share (goal >= 99%, inside its budget)",
         "result": f"{b['fair'][0]:.1%}, {b['fair'][1]:.1f} ms of {budget} ms",
         "ok": b["fair"][0] >= 0.99 and b["fair"][1] <= budget, "reason_key": "tenants.fair"},
        {"what": f"priority: high p99 at 2x overload / alone, with {goal_name} (goal <= 1.5x)",
         "result": f"{ratio[goal_key]:.2f}x", "ok": ratio[goal_key] <= 1.5, "reason_key": "tenants.priority"},
        {"what": f"priority: the low class absorbs the sheds, with {goal_name}",
         "result": f"high {shed[goal_key]['high']:.1%}, low {shed[goal_key]['low']:.1%}",
         "ok": shed[goal_key]["high"] <= 0.01 < shed[goal_key]["low"], "reason_key": "tenants.priority"},
        {"what": "mixed budgets: inside the budget, deadline order vs fifo",
         "result": f"{inside['edf']:.1%} vs {inside['fifo']:.1%}", "ok": inside["edf"] > inside["fifo"],
         "reason_key": "tenants.deadline"},
    ]


if __name__ == "__main__":
    Stage("tenants", "Tenants under overload: fair share, priority classes, deadline order").run(body)
