"""What every report section shares: the stage results, markdown helpers,
and the list of comparisons (each a win or a loss, a loss with its reason).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .. import env
from . import reasons


@dataclass
class Finding:
    """One comparison the report makes: Switchyard vs a peer or vs a goal."""

    section: str
    what: str
    result: str
    ok: bool
    reason: str = ""


@dataclass
class Ctx:
    """The stage results and what the sections found."""

    out: Path
    plots: Path
    suite: dict
    stages: dict[str, dict]
    findings: list[Finding] = field(default_factory=list)
    plot_files: list[str] = field(default_factory=list)

    def stage(self, name: str) -> dict | None:
        """The stage's data when it ran (ok, or failed with data), else None."""
        doc = self.stages.get(name)
        if not doc or doc.get("status") == "not-run":
            return None
        return doc

    def finding(self, section: str, what: str, result: str, ok: bool, reason_key: str = "") -> str:
        """Records a comparison; returns its verdict for the table or text:
        "win"/"met", or "**loss**" with the known reason (or a plain
        statement that no reason is known yet)."""
        reason = "" if ok else reasons.explain(reason_key)
        self.findings.append(Finding(section, what, result, ok, reason))
        return "yes" if ok else "**no**"


def load(out: Path) -> tuple[dict, dict[str, dict]]:
    """suite.json and every stage result file in `out`."""
    suite, stages = {}, {}
    for path in sorted(out.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        if path.name == "suite.json":
            suite = doc
        elif isinstance(doc, dict) and "stage" in doc and "status" in doc:
            stages[doc["stage"]] = doc
    return suite, stages


def status_line(ctx: Ctx, name: str) -> str:
    """A one-line italic note for a stage that has no data to show, or that
    failed after measuring part of it; empty when it ran fine."""
    doc = ctx.stages.get(name)
    if doc is None:
        return f"_Not run: no result from stage `{name}` in benchmarks/out/ (run `benchmarks/run.sh quick {name}`)._"
    status, reason = doc.get("status"), doc.get("reason", "")
    if status == "not-run":
        return f"_Not run: {reason}_"
    if status == "failed":
        return f"_Stage `{name}` failed: {reason} (log: benchmarks/out/logs/{name}.log); partial figures below._"
    return ""


def table(columns: list[str], rows: list[list]) -> str:
    """A markdown table."""
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return head + "".join("| " + " | ".join(str(c) for c in row) + " |\n" for row in rows)


def num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:,.0f}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b:
        return None
    return a / b


def x(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def pct(r: float | None, digits: int = 1) -> str:
    return "-" if r is None else f"{r * 100:.{digits}f}%"


def share(r: float | None) -> str:
    """A fraction that should not exceed 100%, marked when it does (the two
    figures were measured at different moments of a busy machine)."""
    if r is None:
        return "-"
    return pct(r) + (" (over 100%: measured at different moments of a busy machine, not comparable)"
                     if r > 1.05 else "")


def plot_ref(ctx: Ctx, name: str, alt: str) -> str:
    """Markdown image line for a plot written in this run, else empty."""
    if name in ctx.plot_files:
        return f"![{alt}](plots/{name})\n"
    return ""


def settings_line(doc: dict) -> str:
    s = doc.get("settings", {})
    return (f"{s.get('duration_s', '?')} s measured per load run after {s.get('warmup_s', '?')} s warm-up; "
            f"stage run {doc.get('finished_at', '?')}, commit {doc.get('commit', '?')}")


def commands_block(doc: dict, limit: int = 40) -> str:
    cmds = doc.get("commands", [])
    if not cmds:
        return ""
    shown = cmds[:limit]
    more = f"\n... and {len(cmds) - limit} more (benchmarks/out/{doc['stage']}.json)" if len(cmds) > limit else ""
    return ("<details><summary>Commands</summary>\n\n```\n" + "\n".join(shown) + more + "\n```\n\n</details>\n")
