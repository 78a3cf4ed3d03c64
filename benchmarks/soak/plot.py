"""The soak's figure: RSS, descriptors and threads, queue depths, and the
clients' outcomes per sample interval, with the reloads marked."""

from __future__ import annotations

from pathlib import Path


def draw(samples: list, reload_times: list, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t_s"] / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    panels = [
        (axes[0], [("rss_mib", "RSS (MiB)")], "MiB"),
        (axes[1], [("fds", "open descriptors"), ("threads", "threads")], "count"),
        (axes[2], [("queue_depth_sum", "queued rows, all pools"), ("in_flight", "requests in flight")], "count"),
    ]
    for ax, series, unit in panels:
        for key, label in series:
            ax.plot(t, [s.get(key, 0) for s in samples], label=label)
        ax.set_ylabel(unit)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    ok = [s.get("client_ok", 0) for s in samples]
    bad = [s.get("client_unexpected", 0) + s.get("client_rejected", 0) for s in samples]
    per_interval = lambda xs: [b - a for a, b in zip([0] + xs[:-1], xs)]
    axes[3].plot(t, per_interval(ok), label="answered as expected")
    axes[3].plot(t, per_interval(bad), label="unexpected or rejected", color="red")
    axes[3].set_ylabel("requests / sample")
    axes[3].set_xlabel("minutes")
    axes[3].legend(loc="upper left", fontsize=8)
    axes[3].grid(alpha=0.3)
    spans = phase_spans(samples)
    for ax in axes:
        for r in reload_times:
            ax.axvline(r / 60, color="grey", alpha=0.4, linewidth=0.8, linestyle=":")
        for phase, start, end in spans:
            if phase != "load":
                ax.axvspan(start / 60, end / 60, color="gold" if phase == "warmup" else "lightgrey", alpha=0.2)
    axes[0].text(0.99, 0.02, "gold: warm-up, grey: no clients, dotted: reloads", transform=axes[0].transAxes,
                 ha="right", fontsize=7)
    axes[0].set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def phase_spans(samples: list) -> list:
    """[(phase, start_s, end_s)] for each run of samples in one phase."""
    spans: list = []
    for s in samples:
        if spans and spans[-1][0] == s["phase"]:
            spans[-1][2] = s["t_s"]
        else:
            start = spans[-1][2] if spans else s["t_s"]
            spans.append([s["phase"], start, s["t_s"]])
    return [tuple(span) for span in spans]
