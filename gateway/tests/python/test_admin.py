"""The admin listener reports live runtime statistics that move with traffic."""

import requests


def model_stats(gateway, name):
    stats = requests.get(f"http://127.0.0.1:{gateway.admin_port}/admin/stats", timeout=10).json()
    return next(m for m in stats["models"] if m["name"] == name)


def test_stats_count_requests_and_batches(gateway):
    before = model_stats(gateway, "digits-heavy")["pools"][0]
    body = {"inputs": [{"name": "X", "shape": [2, 64], "datatype": "FP32", "data": [1.0] * 128}]}
    for _ in range(3):
        assert requests.post(f"{gateway.base}/v2/models/digits-heavy/infer", json=body, timeout=30).status_code == 200
    after = model_stats(gateway, "digits-heavy")
    pool = after["pools"][0]
    assert after["state"] == "ready"
    assert after["last_cold_start_us"] > 0
    assert pool["requests"] - before["requests"] == 3
    assert pool["executed_rows"] - before["executed_rows"] == 6
    assert pool["device"] == "cpu" and pool["available"]
    assert any(b["samples"] > 0 for b in pool["latency"])


def test_admin_healthz_and_unknown_path(gateway):
    base = f"http://127.0.0.1:{gateway.admin_port}"
    assert requests.get(f"{base}/healthz", timeout=10).status_code == 200
    assert requests.get(f"{base}/admin/nope", timeout=10).status_code == 404
