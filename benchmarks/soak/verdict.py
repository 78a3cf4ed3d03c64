"""The soak's pass rules, applied to its samples (pure; unit-tested in
benchmarks/tests/test_soak_verdict.py).

- memory: RSS at the end of the loaded run is less than `rss_growth` (10%)
  above RSS just after warm-up (each the median of the first / last
  `window` loaded samples, so one sample taken mid-batch does not decide);
- descriptors and threads: once the clients have stopped and the gateway
  has been idle, both are back at the baseline taken in the quiet pause
  after warm-up (at most `fd_slack` / `thread_slack` above it: idle
  keep-alive connections to the upstream are pooled up to a bound);
- errors: the client ledger has no unexpected outcome and no retryable
  rejection (nothing overloads the gateway in a soak), every reload the
  soak asked for took effect, and the pools report no execution errors.
"""

from __future__ import annotations

from statistics import median


def judge(samples: list, baseline: dict, after: dict, ledger: dict, reloads: dict, *,
          rss_growth: float = 0.10, window: int = 6, fd_slack: int = 0, thread_slack: int = 0) -> dict:
    """Returns {"pass": bool, "checks": [{name, pass, figures...}]}."""
    loaded = [s for s in samples if s.get("phase") == "load"]
    checks = []
    if len(loaded) < 2 * window:
        checks.append({"name": "enough samples", "pass": False, "loaded_samples": len(loaded),
                       "needed": 2 * window})
    else:
        start = median(s["rss_mib"] for s in loaded[:window])
        end = median(s["rss_mib"] for s in loaded[-window:])
        growth = end / start - 1
        checks.append({"name": "rss growth after warm-up", "pass": growth < rss_growth,
                       "rss_after_warmup_mib": round(start, 1), "rss_at_end_mib": round(end, 1),
                       "rss_peak_mib": round(max(s["rss_mib"] for s in loaded), 1),
                       "growth": round(growth, 4), "limit": rss_growth})
    for figure, slack in (("fds", fd_slack), ("threads", thread_slack)):
        checks.append({"name": f"{figure} back to baseline", "pass": after[figure] <= baseline[figure] + slack,
                       "baseline": baseline[figure], "after": after[figure], "slack": slack,
                       "peak_under_load": max((s[figure] for s in loaded), default=None)})
    checks.append({"name": "no unexpected client outcomes",
                   "pass": ledger.get("unexpected", 0) == 0 and ledger.get("rejected", 0) == 0, **ledger})
    checks.append({"name": "every reload took effect", "pass": reloads["applied"] == reloads["asked"]
                   and reloads["asked"] > 0, **reloads})
    pool_errors = max((s.get("pool_errors", 0) for s in samples), default=0)
    checks.append({"name": "no pool execution errors", "pass": pool_errors == 0, "pool_errors": pool_errors})
    admin_errors = sum(1 for s in samples if "admin_error" in s)
    checks.append({"name": "admin API answered every sample", "pass": admin_errors == 0,
                   "failed_samples": admin_errors})
    return {"pass": all(c["pass"] for c in checks), "checks": checks}
