"""Exact-repeat replay (gateway/src/cache/replay.rs) on the real binary: a
request whose bytes were seen before is answered with the remembered reply,
but only while L1 still holds the answer that reply was built from, so TTLs,
`no-cache` refreshes, other encodings and reloads behave exactly as without
replay. `replay_hits` (admin stats) tells replayed hits from full-path ones."""

import requests

from conftest import Gateway
from test_cache import binary_infer, config_text, json_infer, stats, wait_for


def counters(gw):
    c = stats(gw)["cache"]
    return c["l1_hits"], c["replay_hits"]


def test_a_byte_identical_repeat_is_replayed(tmp_path):
    path = tmp_path / "replay.toml"
    path.write_text(config_text())
    gw = Gateway(config=path)
    try:
        first = json_infer(gw, 1, request_id="same")
        assert first.headers["x-cache"] == "miss"
        assert counters(gw) == (0, 0)
        second = json_infer(gw, 1, request_id="same")
        assert second.headers["x-cache"] == "hit-l1"
        assert counters(gw) == (1, 1), "served by replay"
        assert second.json() == first.json(), "the same reply, id included"
        for name in ("x-switchyard-model", "x-switchyard-device", "x-switchyard-reason"):
            assert second.headers[name] == first.headers[name]
        assert second.headers["content-type"] == first.headers["content-type"]

        # Other bytes for the same tensors: an L1 hit through the full path.
        other_id = json_infer(gw, 1, request_id="other")
        assert other_id.headers["x-cache"] == "hit-l1"
        assert other_id.json()["id"] == "other"
        assert counters(gw) == (2, 1)
        binary = binary_infer(gw, 1)
        assert binary.headers["x-cache"] == "hit-l1"
        assert counters(gw) == (3, 1)
        again = binary_infer(gw, 1)
        assert again.content == binary.content
        assert counters(gw) == (4, 2), "binary requests are replayed too"
    finally:
        gw.stop()


def test_a_refreshed_or_expired_entry_is_never_replayed(tmp_path):
    path = tmp_path / "replay-ttl.toml"
    path.write_text(config_text(route_cache="ttl_s = 1"))
    gw = Gateway(config=path)
    try:
        json_infer(gw, 2)
        json_infer(gw, 2)
        assert counters(gw) == (1, 1)
        refreshed = json_infer(gw, 2, headers={"Cache-Control": "no-cache"})
        assert refreshed.headers["x-cache"] == "bypass"
        # L1 now holds the refreshed answer: the old replay is dropped and
        # the request takes the full path (an L1 hit, not a replay) ...
        assert json_infer(gw, 2).headers["x-cache"] == "hit-l1"
        assert counters(gw) == (2, 1)
        # ... which remembers the reply again.
        assert json_infer(gw, 2).headers["x-cache"] == "hit-l1"
        assert counters(gw) == (3, 2)
        # Until the TTL passes the repeats are replayed; after it neither L1
        # nor the replay answers: the model runs again.
        wait_for(lambda: json_infer(gw, 2).headers["x-cache"] == "miss", timeout=5, what="TTL expiry")
        _, replayed = counters(gw)
        assert json_infer(gw, 2).headers["x-cache"] == "hit-l1"
        assert counters(gw)[1] == replayed + 1, "the fresh answer is replayed in turn"
    finally:
        gw.stop()


def test_a_reload_starts_a_new_replay_generation(tmp_path):
    path = tmp_path / "replay-reload.toml"
    path.write_text(config_text(route_cache="ttl_s = 300"))
    gw = Gateway(config=path)
    try:
        json_infer(gw, 3)
        json_infer(gw, 3)
        assert counters(gw) == (1, 1)
        path.write_text(config_text(route_cache="ttl_s = 301"))
        r = requests.post(f"http://127.0.0.1:{gw.admin_port}/admin/reload", timeout=30)
        assert r.status_code == 200, r.text
        # Same canonical key (the route's answers did not change): an L1
        # hit, but not from a replay made under the old generation.
        assert json_infer(gw, 3).headers["x-cache"] == "hit-l1"
        assert counters(gw) == (2, 1)
        assert json_infer(gw, 3).headers["x-cache"] == "hit-l1"
        assert counters(gw) == (3, 2)
    finally:
        gw.stop()
