"""A V2 upstream whose answers have the wrong shape (issue 24, item 10):
3 rows for a one-row request, 9 probabilities where the signature says
10, a label of rank 2. Each is a 502 naming the output, counts against the
upstream as a bad answer, and is never cached; a correct answer still is."""

import re

import pytest
import requests

from conftest import Gateway
from proxy_util import upstream_app
from routing_util import infer_body, write_config


@pytest.fixture(scope="module")
def shapes():
    server = upstream_app("v2-shapes")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gw(shapes, tmp_path_factory):
    models = ", ".join(f'{{ name = "{m}-remote", model = "{m}" }}' for m in ("good", "rows", "dims", "rank"))
    routes = "".join(f"""
[[routes]]
name = "{m}"
models = ["{m}-remote"]
""" for m in ("good", "rows", "dims", "rank"))
    config = f"""
[cache]

[[upstreams]]
name = "shapes"
kind = "v2"
addrs = ["{shapes.addr}"]
breaker = {{ failures = 1000 }}
models = [{models}]
{routes}"""
    g = Gateway(config=write_config(tmp_path_factory.mktemp("v2shapes"), config))
    yield g
    g.stop()


def bad_answers(gw):
    text = requests.get(f"{gw.admin}/metrics", timeout=5).text
    pattern = r'switchyard_upstream_attempts_total\{[^}]*outcome="bad_response"[^}]*\} (\d+)'
    return sum(int(n) for n in re.findall(pattern, text))


def infer(gw, route):
    body = infer_body([[0.0] * 64])
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=body, timeout=10)


def test_a_correct_answer_is_served_and_cached(gw):
    first, second = infer(gw, "good"), infer(gw, "good")
    assert first.status_code == second.status_code == 200, first.text
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("miss", "hit-l1")


@pytest.mark.parametrize("route,why", [
    ("rows", r"output 'label' has 3 row\(s\), the request has 1"),
    ("dims", r"output 'probabilities' has shape \[1, 9\], the model's signature says \[-1, 10\]"),
    ("rank", r"output 'label' has shape \[1, 1, 1\], the model's signature says \[-1\]"),
], ids=["rows", "dims", "rank"])
def test_a_wrong_shape_is_a_502_counted_against_the_upstream_and_never_cached(gw, route, why):
    for attempt in range(2):
        before = bad_answers(gw)
        r = infer(gw, route)
        assert r.status_code == 502, f"attempt {attempt}: {r.status_code} {r.text}"
        assert re.search(why, r.json()["error"]), r.text
        assert r.headers.get("x-cache") != "hit-l1"
        assert bad_answers(gw) > before, "the upstream was asked again and its answer counted as bad"
