"""Dot-segments in request paths (issue 24, item 16b): with
`strip_prefix = false`, `/apps/public/../../secret` matched the prefix
`/apps/public/` and reached the upstream as sent, where it means
`/secret`. Paths with dot-segments, plain or percent-encoded, are refused
with 400 before any route is matched; the upstream (which records every
path it receives) never sees them. Other paths reach it exactly as matched."""

import http.client

import pytest
import requests

from conftest import Gateway
from proxy_util import upstream_app
from routing_util import write_config

HOSTILE = [
    "/apps/public/../../secret",
    "/apps/public/../secret?x=1",
    "/apps/public/%2e%2e/%2E%2E/secret",
    "/apps/public/.%2e/secret",
    "/apps/public/..%2f..%2fsecret",
    "/apps/public/..%5c..%5csecret",
    "/apps/public/..\\..\\secret",
    "/apps/public/..;/secret",
    "/apps/public/./x",
    "/apps/public/x/..",
]


@pytest.fixture(scope="module")
def app():
    server = upstream_app("app")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gw(app, tmp_path_factory):
    config = f"""
[[upstreams]]
name = "app"
addrs = ["{app.addr}"]

[[prefix_routes]]
name = "public"
prefix = "/apps/public/"
upstream = "app"
strip_prefix = false
"""
    g = Gateway(config=write_config(tmp_path_factory.mktemp("paths"), config))
    yield g
    g.stop()


def raw_get(gw, path):
    """GET with the path sent byte for byte (HTTP libraries normalise it)."""
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def seen(app):
    """The paths the upstream received through the gateway."""
    return [p for p in requests.get(f"{app.base}/seen", timeout=5).json()["paths"] if p != "/seen"]


@pytest.mark.parametrize("path", HOSTILE)
def test_dot_segments_are_refused_before_routing(gw, app, path):
    status, body = raw_get(gw, path)
    assert status == 400, f"{path}: {status} {body[:200]!r}"
    assert b"dot-segment" in body
    assert path not in seen(app), "the upstream must never see it"


def test_other_paths_reach_the_upstream_as_matched(gw, app):
    path = "/apps/public/a.b/c..d/.hidden/x%2Fy?q=../z"
    status, body = raw_get(gw, path)
    assert status == 200, body
    assert seen(app)[-1] == path
    assert all(p.startswith("/apps/public/") and "/../" not in p for p in seen(app))
