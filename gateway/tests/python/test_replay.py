"""`switchyard replay`: the digits test split recorded through the real
gateway (`routes[].record`), then replayed offline through the same config
and through candidates with other thresholds, with the real models:
the replay reproduces the live escalation share, thresholds give a
monotone escalation curve, and bad traffic files or candidate configs are
refused with the line or field path."""

import json
import subprocess
import time

import numpy as np
import pytest
import requests

from conftest import MODELS, REPO, Gateway
from routing_util import DIGITS_MODELS, Reference, write_config
from sse_util import admin, wait_for

BINARY = str(REPO / "target" / "debug" / "switchyard")
# The admin listener has no token here: a body must say what it is (docs/src/reference/admin-api.md).
TOML = {"content-type": "application/toml"}

CONFIG = DIGITS_MODELS + """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 2000, max = 5000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = THRESHOLD }
record = { sample = 1.0, path = "TRAFFIC" }
"""


def config_text(threshold, traffic):
    return CONFIG.replace("THRESHOLD", str(threshold)).replace("TRAFFIC", str(traffic))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The test split, one row per request, recorded at threshold 0.8."""
    folder = tmp_path_factory.mktemp("replay")
    traffic = folder / "traffic.jsonl"
    live_config = write_config(folder, config_text(0.8, traffic))
    data = json.loads((MODELS / "digits-test.json").read_text())
    x = np.asarray(data["X"], np.float32)
    gw = Gateway(config=live_config)
    try:
        session = requests.Session()
        for i, row in enumerate(x):
            body = {"id": f"row-{i}", "inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32",
                                                 "data": row.tolist()}]}
            r = session.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=30)
            assert r.status_code == 200, r.text
        wait_for(lambda: admin(gw, "/admin/stats")["record"]["digits"]["written"] == len(x), "every call recorded")
    finally:
        gw.stop()
    return {"folder": folder, "traffic": traffic, "config": live_config, "x": x}


def replay(*args):
    out = subprocess.run([BINARY, "replay", *map(str, args)], capture_output=True, text=True, timeout=600, cwd=REPO)
    return out


def replay_json(config, traffic, against=None):
    args = ["--config", config, "--traffic", traffic, "--json"] + (["--against", against] if against else [])
    out = replay(*args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def live_escalated_share(traffic):
    lines = [json.loads(line) for line in traffic.read_text().splitlines()]
    return sum(line["answer"]["reason"] == "cascade_escalate" for line in lines) / len(lines), len(lines)


def test_replaying_the_live_config_reproduces_its_escalation_share(recorded):
    live_share, n = live_escalated_share(recorded["traffic"])
    report = replay_json(recorded["config"], recorded["traffic"])
    [result] = report["configs"]
    assert report["calls"] == n and result["replayed"] == n and result["failed"] == 0
    assert abs(result["escalated_share"] - live_share) <= 0.01, (result["escalated_share"], live_share)
    assert result["live_escalated_share"] == pytest.approx(live_share)
    assert result["same_decision_as_live"] >= 0.99
    # Agreement with the heaviest model, checked against onnxruntime: a
    # call agrees when its answering model's top class is the heavy one's.
    ref = Reference("digits-cheap", "digits-heavy")
    _, cheap = ref.run("digits-cheap", recorded["x"])
    _, heavy = ref.run("digits-heavy", recorded["x"])
    confident = cheap.max(axis=1) >= 0.8
    expected = np.where(confident, cheap.argmax(axis=1) == heavy.argmax(axis=1), True).mean()
    assert abs(result["agreement_with_heaviest"] - expected) <= 0.01, (result["agreement_with_heaviest"], expected)
    assert result["cost_per_call"] == pytest.approx(1.0 + 2.0 * result["escalated_share"], abs=1e-9)
    latency = result["latency"]
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] < 2000
    assert latency["over_budget_share"] == 0.0, "2 s budgets, sub-ms models"
    assert 0 < latency["live_p50_ms"] <= latency["live_p99_ms"]


def test_a_replay_at_the_recorded_pace_spaces_the_calls_and_measures_latency(recorded):
    """`--pace recorded`: every call starts at its recorded offset (here
    compressed 2x), so the replay lasts at least the recorded span / 2, the
    decisions are the same as live, and latency is measured, not simulated."""
    lines = [json.loads(line) for line in recorded["traffic"].read_text().splitlines()]
    span_s = (max(line["arrived_ms"] for line in lines) - min(line["arrived_ms"] for line in lines)) / 1e3
    assert span_s > 0.5, "the sample spans some time"
    started = time.monotonic()
    out = replay("--config", recorded["config"], "--traffic", recorded["traffic"], "--json",
                 "--pace", "recorded", "--speed", "2")
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    [result] = json.loads(out.stdout)["configs"]
    assert took >= span_s / 2, (took, span_s)
    live_share, n = live_escalated_share(recorded["traffic"])
    assert result["replayed"] == n and result["failed"] == 0
    assert abs(result["escalated_share"] - live_share) <= 0.01
    latency = result["latency"]
    assert latency["basis"] == "measured"
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] < 2000
    fast = replay_json(recorded["config"], recorded["traffic"])["configs"][0]["latency"]
    assert fast["basis"] == "simulated"
    for bad in (["--speed", "0"], ["--speed=-1"], ["--speed", "fast"], ["--pace", "slow"]):
        out = replay("--config", recorded["config"], "--traffic", recorded["traffic"], *bad)
        assert out.returncode == 2 and "invalid value" in out.stderr, (bad, out.stderr)


def test_the_replay_suggests_the_threshold_the_offline_computation_gives(recorded):
    """The replay's suggestion for a cascade route is computed as the live
    calibration computes it, over every replayed call: it equals the offline
    computation (onnxruntime, numpy) on the same rows, at the default 99.5%."""
    import test_calibration

    report = replay_json(recorded["config"], recorded["traffic"])
    view = report["configs"][0]["calibration"]["digits"]
    assert view["rows"] == len(recorded["x"]) and view["target"] == 0.995
    expected = test_calibration.reference_threshold(recorded["x"], target=0.995)
    assert expected is not None and view["suggested_threshold"] is not None
    assert abs(view["suggested_threshold"] - expected) <= 0.01 + 1e-9, (view["suggested_threshold"], expected)
    table = replay("--config", recorded["config"], "--traffic", recorded["traffic"]).stdout
    assert f"digits: {view['suggested_threshold']:.2f} (99.5%)" in table


def test_thresholds_give_a_monotone_escalation_curve(recorded):
    shares, agreement = [], []
    for threshold in (0.6, 0.7, 0.8, 0.9):
        candidate = recorded["folder"] / f"candidate-{threshold}.toml"
        candidate.write_text(config_text(threshold, recorded["folder"] / "unused.jsonl").replace(
            "{models}", str(MODELS)))
        report = replay_json(candidate, recorded["traffic"], against=recorded["config"])
        current, proposed = report["configs"]
        assert current["config"] == str(recorded["config"]) and proposed["config"] == str(candidate)
        shares.append(proposed["escalated_share"])
        agreement.append(proposed["agreement_with_heaviest"])
    assert shares == sorted(shares) and shares[0] < shares[-1], shares
    assert agreement == sorted(agreement), agreement


def test_the_table_compares_the_configs_side_by_side(recorded):
    out = replay("--config", recorded["config"], "--traffic", recorded["traffic"], "--against", recorded["config"])
    assert out.returncode == 0, out.stderr
    assert "| escalated to the heavy model |" in out.stdout
    assert out.stdout.count(str(recorded["config"])) >= 2


def test_truncated_or_foreign_traffic_files_name_the_line(recorded, tmp_path):
    text = recorded["traffic"].read_text()
    truncated = tmp_path / "truncated.jsonl"
    cut = text.index("\n", text.index("\n") + 1) + 40  # inside the third line
    truncated.write_text(text[:cut])
    out = replay("--config", recorded["config"], "--traffic", truncated)
    assert out.returncode == 1 and "line 3" in out.stderr, out.stderr
    foreign = tmp_path / "foreign.jsonl"
    lines = text.splitlines()
    lines[1] = lines[1].replace('"v":1', '"v":2')
    foreign.write_text("\n".join(lines) + "\n")
    out = replay("--config", recorded["config"], "--traffic", foreign)
    assert out.returncode == 1 and "line 2" in out.stderr and "version 2" in out.stderr, out.stderr


def test_a_candidate_with_errors_is_refused_with_field_paths(recorded, tmp_path):
    bad = write_config(tmp_path, config_text(1.5, tmp_path / "t.jsonl"))
    out = replay("--config", bad, "--traffic", recorded["traffic"])
    assert out.returncode == 1
    assert "routes[0].policy.threshold" in out.stderr, out.stderr
    assert "calls replayed" not in out.stdout


CACHED = """
[cache]
l1_max_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true

[[routes]]
name = "repeats"
models = ["digits-cheap"]
cache = CACHE
record = { sample = 1.0, path = "TRAFFIC" }
"""


def test_a_ttl_replay_reproduces_the_live_hit_ratio(tmp_path):
    traffic = tmp_path / "repeats.jsonl"
    text = CACHED.replace("TRAFFIC", str(traffic))
    live_config = write_config(tmp_path, text.replace("CACHE", "{ ttl_s = 300 }"))
    x = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)[:40]
    picks = np.random.default_rng(7).integers(0, len(x), size=200)
    gw = Gateway(config=live_config)
    try:
        session = requests.Session()
        for i in picks:
            body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": x[i].tolist()}]}
            assert session.post(f"{gw.base}/v2/models/repeats/infer", json=body, timeout=30).status_code == 200
        wait_for(lambda: admin(gw, "/admin/stats")["record"]["repeats"]["written"] == len(picks), "every call recorded")
    finally:
        gw.stop()
    [result] = replay_json(live_config, traffic)["configs"]
    distinct = len(set(picks.tolist()))
    assert result["live_cache_hit_ratio"] == pytest.approx(1 - distinct / len(picks))
    assert abs(result["cache_hit_ratio"] - result["live_cache_hit_ratio"]) <= 0.02, result
    uncached = tmp_path / "uncached.toml"
    uncached.write_text(text.replace("CACHE", "{ enabled = false }").replace("{models}", str(MODELS)))
    [result] = replay_json(uncached, traffic)["configs"]
    assert result["cache_hit_ratio"] is None


def test_admin_replay_runs_the_live_sample_through_a_posted_candidate(recorded, tmp_path):
    """The server recording traffic answers `POST /admin/replay` with the
    same report as the command line; a candidate with errors is a 400
    with field paths and nothing runs."""
    gw = Gateway(config=recorded["config"])
    try:
        candidate = config_text(0.6, tmp_path / "unused.jsonl").replace("{models}", str(MODELS))
        r = requests.post(f"{gw.admin}/admin/replay", data=candidate, headers=TOML, timeout=300)
        assert r.status_code == 200, r.text
        [report] = r.json()["reports"]
        current, proposed = report["configs"]
        assert current["config"] == str(recorded["config"]) and proposed["config"] == "candidate"
        candidate_file = tmp_path / "candidate.toml"
        candidate_file.write_text(candidate)
        cli = replay_json(candidate_file, recorded["traffic"], against=recorded["config"])
        assert proposed["escalated_share"] == cli["configs"][1]["escalated_share"]
        assert current["escalated_share"] == cli["configs"][0]["escalated_share"]
        bad = requests.post(f"{gw.admin}/admin/replay", data=config_text(1.5, "t.jsonl"), headers=TOML,
                             timeout=60)
        assert bad.status_code == 400
        assert [i["path"] for i in bad.json()["issues"]] == ["routes[0].policy.threshold"]
        assert requests.post(f"{gw.admin}/admin/replay", data="", timeout=60).status_code == 400
    finally:
        gw.stop()
