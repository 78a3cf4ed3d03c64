"""A Redis Cluster setting that names one plain server (issue 38, item 7):
`redis = { urls = ["redis://host:6379"] }` against a redis-server not in
cluster mode. Every command used to fail ("cluster support disabled") and
L2 was never used; the gateway now says so at start-up and uses the
server as a plain one, so a second gateway gets an L2 hit."""

import time

from test_cache import json_infer, outputs, start, stats


def wait_for(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_one_plain_server_in_urls_is_used_as_a_plain_server(tmp_path, redis_server):
    a = start(tmp_path, "a", cluster_urls=[redis_server.url])
    b = start(tmp_path, "b", cluster_urls=[redis_server.url])
    try:
        first = json_infer(a, 7)
        assert first.headers["x-cache"] == "miss"
        wait_for(lambda: redis_server.dbsize() == 1, "the background L2 write to the plain server")
        from_b = json_infer(b, 7)
        assert from_b.headers["x-cache"] == "hit-l2", from_b.headers
        assert outputs(from_b) == outputs(first)
        cache = stats(b)["cache"]
        assert cache["l2_hits"] == 1 and cache["l2_errors"] == 0, cache
        for gw in (a, b):
            log = gw.log_text()
            assert "not a Redis Cluster node" in log and "url = " in log, log
            assert "cluster support disabled" not in log.replace("(cluster support disabled)", ""), log
    finally:
        a.stop()
        b.stop()
