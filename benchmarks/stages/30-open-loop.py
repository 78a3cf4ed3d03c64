#!/usr/bin/env python3
"""Stage `open-loop`: latency percentiles vs offered load, open loop (a fixed
request rate; latency from each request's intended send time, so queueing
counts). Shows where each server's latency turns up (the knee).

Switchyard, the FastAPI baseline and MLServer (the configuration that served
digits-cheap best at 40 clients in the `peers` stage, when that ran; else
without adaptive batching), one at a time on the same pinned CPU. For each
server the rates go up until it falls behind (answers < 90% of the offered
rate, p99 over 1 s, or more than 1% errors): one point past its knee, then
the next server.

    benchmarks/stages/30-open-loop.py quick|full   ->  benchmarks/out/open-loop.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env, servers  # noqa: E402
from benchlib.load import LoadRunner, summary  # noqa: E402
from benchlib.stage import Stage  # noqa: E402

CONNECTIONS = 64


def best_mlserver() -> tuple[str, str]:
    """The MLServer variant with the higher digits-cheap rate at 40 clients
    in peers.json, and why it was picked."""
    try:
        peers = json.loads((env.OUT / "peers.json").read_text())
        rps = {r["server"]: r.get("rps", 0) for r in peers["runs"]
               if r["model"] == "digits-cheap" and r["concurrency"] == 40 and r["server"].startswith("mlserver")}
        if rps:
            best = max(rps, key=rps.get)
            return best, f"higher digits-cheap req/s at 40 clients in the peers stage ({rps[best]:,.0f})"
    except (OSError, ValueError, KeyError):
        pass
    return "mlserver", "peers stage results not found: MLServer without adaptive batching"


def saturated(s: dict) -> bool:
    return (s.get("sent_rps", 0) < 0.9 * s["offered_rps"] or s["rps"] < 0.9 * s["offered_rps"]
            or s["p99_ms"] > 1000 or s["errors"] > 0.01 * max(s["requests"], 1))


def drain(server: servers.Server, model: str, limit_s: float = 60.0) -> None:
    """After a run past the knee the server may still be working off its
    backlog: wait until one request is answered within a second, so the
    next run does not start behind."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        if servers.http_ok(server.infer_url(model), servers.one_row_body(), timeout=5.0) and \
                time.monotonic() - t0 < 1.0:
            return
        time.sleep(0.5)


def body(st: Stage) -> None:
    env.pin_self_to_client()
    st.data.update(points=[], servers={})
    makers = [("switchyard", lambda: servers.switchyard(st.dir)), ("fastapi", lambda: servers.fastapi(st.dir))]
    if env.MLSERVER_PY.exists():
        ml, why = best_mlserver()
        st.data["mlserver_choice"] = {"server": ml, "why": why}
        makers.append((ml, lambda: servers.mlserver(st.dir, ml, batching=ml == "mlserver-batch")))
    runner = LoadRunner(st.settings, st.dir / "loadgen")
    for name, make in makers:
        with servers.Servers() as group:
            s = group.add(make())
            st.say(f"starting {name}")
            s.wait_ready()
            s.warm(list(st.settings["open_rates"]))
            st.data["servers"][name] = {"command": " ".join(s.cmd)}
            for model, rates in st.settings["open_rates"].items():
                for rate in rates:
                    st.say(f"{name} {model}: {rate} req/s offered")
                    rep = runner.open(s.infer_url(model), f"{name}/{model}/r{rate}", rate, CONNECTIONS)
                    point = {"server": name, "model": model, **summary(rep)}
                    point["saturated"] = saturated(point)
                    st.data["points"].append(point)
                    st.commands[:] = runner.commands
                    st.say(f"  answered {point['rps']:,.0f}/s, p50 {point['p50_ms']:.2f} ms, "
                           f"p99 {point['p99_ms']:.2f} ms{'  (past its knee)' if point['saturated'] else ''}")
                    if point["saturated"]:
                        drain(s, model)
                        break
    st.data["connections"] = CONNECTIONS


if __name__ == "__main__":
    Stage("open-loop", "Latency vs offered load, open loop").run(body)
