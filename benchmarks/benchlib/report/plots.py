"""The report's PNG plots (matplotlib, no display needed). Each function
draws one plot from one or two stages' results and returns its file name,
or None when the data is not there (no plot, no stale file)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402

from .common import Ctx  # noqa: E402
from .peers import NAMES, runs_by_key  # noqa: E402

COLORS = {"switchyard": "#d62728", "fastapi": "#1f77b4", "fastapi-inline": "#aec7e8", "mlserver": "#2ca02c", "mlserver-batch": "#98df8a",
          "nginx": "#9467bd", "generator": "#7f7f7f"}
KNOWN = ["throughput-vs-concurrency.png", "latency-vs-load.png", "cache-hit-latency.png", "overload-budget.png",
         "cascade-accuracy.png"]


def _log_ticks(ax, xs: list[float]) -> None:
    """Log x axis labelled with the measured values as plain numbers."""
    ax.set_xscale("log")
    ax.set_xticks(sorted(set(xs)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _save(fig, ctx: Ctx, name: str) -> str:
    fig.tight_layout()
    fig.savefig(ctx.plots / name, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return name


def throughput_vs_concurrency(ctx: Ctx) -> str | None:
    doc = ctx.stage("peers")
    if not doc or not doc.get("runs"):
        return None
    runs = runs_by_key(doc)
    models = list(doc["settings"]["concurrency"])
    raw = {b["model"]: b for b in (ctx.stage("runtime") or {}).get("raw_limit", {}).get("best", [])}
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        for server in ("switchyard", "fastapi", "fastapi-inline", "mlserver", "mlserver-batch"):
            pts = sorted((k[2], r["rps"]) for k, r in runs.items() if k[0] == server and k[1] == model)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=NAMES[server], color=COLORS[server])
        if model in raw:
            ax.axhline(raw[model]["rows_per_s"], ls="--", color="k", lw=1,
                       label=f"raw runtime limit (Session::run, batch {raw[model]['batch']})")
        _log_ticks(ax, doc["settings"]["concurrency"][model])
        ax.set_yscale("log")
        ax.set_title(f"{model}: throughput vs concurrency (closed loop, 1 CPU)")
        ax.set_xlabel("clients")
        ax.set_ylabel("requests/s (1 row each)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, ctx, "throughput-vs-concurrency.png")


def latency_vs_load(ctx: Ctx) -> str | None:
    doc = ctx.stage("open-loop")
    if not doc or not doc.get("points"):
        return None
    points = doc["points"]
    models = list(dict.fromkeys(p["model"] for p in points))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        for server in dict.fromkeys(p["server"] for p in points if p["model"] == model):
            pts = sorted((p["offered_rps"], p["p50_ms"], p["p99_ms"]) for p in points
                         if p["model"] == model and p["server"] == server)
            xs = [p[0] for p in pts]
            color = COLORS.get(server)
            ax.plot(xs, [p[2] for p in pts], marker="o", color=color, label=f"{NAMES.get(server, server)} p99")
            ax.plot(xs, [p[1] for p in pts], marker=".", ls=":", color=color, label=f"{NAMES.get(server, server)} p50")
        _log_ticks(ax, [p["offered_rps"] for p in points if p["model"] == model])
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_yscale("log")
        ax.set_title(f"{model}: latency vs offered load (open loop)")
        ax.set_xlabel("offered requests/s")
        ax.set_ylabel("latency ms (from intended send time)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, ctx, "latency-vs-load.png")


def _percentile_bars(ax, runs: dict, bars: list[tuple[str, str, str]], title: str) -> None:
    pcts = [("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")]
    width = 0.8 / len(bars)
    for i, (key, label, color) in enumerate(bars):
        xs = [j + i * width for j in range(len(pcts))]
        ax.bar(xs, [runs[key][p] for p, _ in pcts], width, label=label, color=color)
    ax.set_xticks([j + width * (len(bars) - 1) / 2 for j in range(len(pcts))], [n for _, n in pcts])
    ax.axhline(1.0, ls="--", color="k", lw=1, label="1 ms")
    ax.set_yscale("log")
    ax.set_ylabel("latency ms")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)


def cache_hit_latency(ctx: Ctx) -> str | None:
    doc = ctx.stage("cache")
    runs = (doc or {}).get("runs", {})
    rate = (doc or {}).get("rate", 10000)
    groups = [
        (f"hits, open loop at {rate:,} req/s", [
            ("hit-open-switchyard", "Switchyard L1 hit", COLORS["switchyard"]),
            ("hit-open-nginx", "nginx HIT", COLORS["nginx"]),
            ("calibrate-open", "generator alone", COLORS["generator"])]),
        ("hits, closed loop, 32 clients", [
            ("hit-closed-c32-switchyard", "Switchyard L1 hit", COLORS["switchyard"]),
            ("hit-closed-c32-nginx", "nginx HIT", COLORS["nginx"]),
            ("calibrate-closed-c32", "generator ceiling", COLORS["generator"])]),
        ("Switchyard, 1 client: L1 / L2 (Redis) / miss", [
            ("l1-hit-closed-c1", "L1 hit", COLORS["switchyard"]),
            ("l2-hit-closed-c1", "L2 hit", COLORS["mlserver"]),
            ("miss-closed-c1", "miss (model run)", COLORS["fastapi"])]),
    ]
    valid = []
    for title, bars in groups:
        kept = [b for b in bars if b[0] in runs and runs[b[0]].get("ok", 0) > 0 and not runs[b[0]].get("behind")]
        if kept:
            valid.append((title, kept))
    if not valid:
        return None
    fig, axes = plt.subplots(1, len(valid), figsize=(5 * len(valid), 4), squeeze=False)
    for ax, (title, bars) in zip(axes[0], valid):
        _percentile_bars(ax, runs, bars, title)
    fig.suptitle("Cache-hit latency")
    return _save(fig, ctx, "cache-hit-latency.png")


def overload_budget(ctx: Ctx) -> str | None:
    doc = ctx.stage("overload")
    if not doc or "spill_over" not in doc:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
    labels = ["with spill-over", "pinned"]
    phases = [doc["spill_over"], doc["pinned"]]
    colors = [COLORS["switchyard"], COLORS["generator"]]
    a1.bar(labels, [p["inside_share"] * 100 for p in phases], color=colors)
    a1.axhline(99, ls="--", color="k", lw=1, label="goal 99%")
    a1.set_ylabel(f"% inside the {doc['budget_ms']} ms budget")
    a1.set_ylim(0, 105)
    a1.legend(fontsize=8)
    a2.bar(labels, [p["p99_ms"] for p in phases], color=colors)
    a2.axhline(doc["budget_ms"], ls="--", color="k", lw=1, label="budget")
    a2.set_yscale("log")
    a2.set_ylim(bottom=1)
    a2.set_ylabel("p99 ms (log scale)")
    a2.legend(fontsize=8)
    fig.suptitle(f"Overload at {doc['load_factor']:.1f}x the preferred pool's capacity ({doc['model']})")
    return _save(fig, ctx, "overload-budget.png")


def cascade_accuracy(ctx: Ctx) -> str | None:
    doc = ctx.stage("cascade")
    if not doc or "routes" not in doc:
        return None
    routes = doc["routes"]
    cheap, heavy = routes["cheap-only"], routes["heavy-only"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sweep = doc.get("sweep", [])
    ax.plot([p["escalated"] * 100 for p in sweep], [p["accuracy"] * 100 for p in sweep], marker="o",
            color=COLORS["switchyard"], label="cascade (threshold sweep)")
    for p in sweep:
        ax.annotate(f"{p['threshold']:g}", (p["escalated"] * 100, p["accuracy"] * 100), fontsize=7,
                    textcoords="offset points", xytext=(4, -10))
    ax.plot([0, 100], [cheap["accuracy"] * 100, heavy["accuracy"] * 100], ls=":", color=COLORS["generator"],
            label="random split (expected)")
    ax.scatter([0], [cheap["accuracy"] * 100], marker="s", s=60, color=COLORS["fastapi"], label="cheap-only", zorder=3)
    ax.scatter([100], [heavy["accuracy"] * 100], marker="D", s=60, color=COLORS["mlserver"], label="heavy-only",
               zorder=3)
    ax.set_xlabel("% of requests escalated to the heavy model")
    ax.set_ylabel("accuracy % (digits test split)")
    ax.set_title("Cascade accuracy vs share escalated")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, ctx, "cascade-accuracy.png")


def generic(ctx: Ctx, spec: dict) -> str | None:
    """A plot a stage describes in its JSON ("plots": [...])."""
    name = Path(spec.get("file", "")).name
    if not name.endswith(".png") or not spec.get("series"):
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    bars = spec.get("kind") == "bar"
    width = 0.8 / len(spec["series"])
    for i, s in enumerate(spec["series"]):
        if bars:
            ax.bar([j + i * width for j in range(len(s["y"]))], s["y"], width, label=s.get("label"))
        else:
            ax.plot(s["x"], s["y"], marker="o", label=s.get("label"))
    ax.set_yscale("log" if spec.get("logy") else "linear")
    if bars:
        # One group of bars per x value, labelled with it (set after the
        # scales: setting a scale resets the ticks).
        xs = spec["series"][0]["x"]
        ax.set_xticks([j + width * (len(spec["series"]) - 1) / 2 for j in range(len(xs))], [str(v) for v in xs])
    else:
        ax.set_xscale("log" if spec.get("logx") else "linear")
    ax.set_title(spec.get("title", ""))
    ax.set_xlabel(spec.get("xlabel", ""))
    ax.set_ylabel(spec.get("ylabel", ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, ctx, name)


def draw_all(ctx: Ctx) -> list[str]:
    """Draws every plot the results allow; removes known plots that this
    run cannot draw, so the folder never shows stale figures."""
    ctx.plots.mkdir(parents=True, exist_ok=True)
    drawn = []
    for fn in (throughput_vs_concurrency, latency_vs_load, cache_hit_latency, overload_budget, cascade_accuracy):
        name = fn(ctx)
        if name:
            drawn.append(name)
    for doc in ctx.stages.values():
        if doc.get("status") != "not-run":
            for spec in doc.get("plots", []):
                name = generic(ctx, spec)
                if name:
                    drawn.append(name)
    for stale in KNOWN:
        if stale not in drawn:
            (ctx.plots / stale).unlink(missing_ok=True)
    return drawn
