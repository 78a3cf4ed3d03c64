"""The prefix-route cache is a shared cache and follows RFC 9111's rules
for one (issue 24, item 3). With an upstream that says `max-age` without
`private`, an answer to a request with `Authorization` or `Cookie` was
stored and served to other users and to anonymous requests, and an answer
for one `Host` was served for another.

The upstream app echoes the request headers it saw and a request counter
`n`, so a response that reached the wrong client shows it."""

import time
import uuid

import pytest
import requests

from conftest import Gateway
from proxy_util import upstream_app
from routing_util import write_config


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
name = "cached"
prefix = "/cached/"
upstream = "app"
cache = {{ headers = ["accept"], ttl_s = 60 }}

[[prefix_routes]]
name = "forced"
prefix = "/forced/"
upstream = "app"
cache = {{ force = true }}

[[prefix_routes]]
name = "keyed"
prefix = "/keyed/"
upstream = "app"
cache = {{ headers = ["cookie", "authorization"] }}
"""
    g = Gateway(config=write_config(tmp_path_factory.mktemp("cacheprivacy"), config))
    yield g
    g.stop()


def fresh(prefix, cc="max-age=60", **query):
    """A path no other test uses, answered with `Cache-Control: cc`."""
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    return f"/{prefix}/{uuid.uuid4().hex}?cc={cc}{extra}"


def get(gw, path, **headers):
    r = requests.get(f"{gw.base}{path}", headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    if r.headers.get("x-cache") != "hit-l1":
        time.sleep(0.1)  # the gateway stores answers in the background: let it finish
    return r


def seen(r, header):
    return r.json()["headers"].get(header)


@pytest.mark.parametrize("credential", ["Authorization", "Cookie"])
def test_an_answer_to_a_user_is_never_served_to_another_or_to_anonymous(gw, credential):
    path = fresh("cached")
    alice = get(gw, path, **{credential: "alice-secret"})
    bob = get(gw, path, **{credential: "bob-secret"})
    anonymous = get(gw, path)
    assert seen(alice, credential.lower()) == "alice-secret"
    assert seen(bob, credential.lower()) == "bob-secret", "bob was served alice's answer"
    assert seen(anonymous, credential.lower()) is None, "an anonymous client was served a user's answer"
    assert len({alice.json()["n"], bob.json()["n"], anonymous.json()["n"]}) == 3
    assert bob.headers["x-cache"] == "miss"


@pytest.mark.parametrize("credential", ["Authorization", "Cookie"])
def test_an_anonymous_answer_is_not_served_to_a_request_with_credentials(gw, credential):
    path = fresh("cached")
    assert get(gw, path).headers["x-cache"] == "miss"
    assert get(gw, path).headers["x-cache"] == "hit-l1", "stored for anonymous requests"
    user = get(gw, path, **{credential: "carol-secret"})
    assert user.headers["x-cache"] == "miss" and seen(user, credential.lower()) == "carol-secret"


@pytest.mark.parametrize("cc", ["public, max-age=60", "s-maxage=60", "max-age=60, must-revalidate"])
def test_an_answer_the_upstream_marks_shared_is_shared_despite_authorization(gw, cc):
    path = fresh("cached", cc=cc)
    first = get(gw, path, Authorization="alice-secret")
    second = get(gw, path, Authorization="bob-secret")
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("miss", "hit-l1")


def test_only_public_shares_an_answer_to_a_cookie(gw):
    path = fresh("cached", cc="s-maxage=60")
    get(gw, path, Cookie="s=alice")
    assert get(gw, path, Cookie="s=bob").headers["x-cache"] == "miss"
    path = fresh("cached", cc="public")
    get(gw, path, Cookie="s=alice")
    assert get(gw, path, Cookie="s=bob").headers["x-cache"] == "hit-l1"


def test_force_does_not_override_credentials(gw):
    path = fresh("forced", cc="x")
    get(gw, path, Authorization="alice-secret")
    assert get(gw, path, Authorization="alice-secret").headers["x-cache"] == "miss"
    get(gw, path)
    assert get(gw, path).headers["x-cache"] == "hit-l1", "forced for anonymous requests"


def test_keyed_credentials_get_an_entry_each(gw):
    path = fresh("keyed")
    alice = get(gw, path, Cookie="s=alice", Authorization="a")
    again = get(gw, path, Cookie="s=alice", Authorization="a")
    bob = get(gw, path, Cookie="s=bob", Authorization="a")
    assert (alice.headers["x-cache"], again.headers["x-cache"], bob.headers["x-cache"]) == ("miss", "hit-l1", "miss")
    assert again.json()["n"] == alice.json()["n"] and seen(bob, "cookie") == "s=bob"


def test_the_host_is_keyed(gw):
    path = fresh("cached")
    a = get(gw, path, Host="a.example")
    b = get(gw, path, Host="b.example")
    assert seen(b, "x-forwarded-host") == "b.example", "the answer for another host was served"
    assert b.headers["x-cache"] == "miss"
    assert get(gw, path, Host="A.example").json()["n"] == a.json()["n"], "host names are case-insensitive"


@pytest.mark.parametrize("query", [
    {"vary": "*"}, {"vary": "Accept-Language"}, {"vary": "Accept, Cookie"},
    {"setcookie": "s=1"}, {"cc": "private, max-age=60"}, {"cc": "no-store"}, {"cc": "max-age=60, no-cache"},
])
def test_responses_a_shared_cache_must_not_store_are_not_stored(gw, query):
    cc = query.pop("cc", "max-age=60")
    path = fresh("cached", cc=cc, **query)
    first, second = get(gw, path), get(gw, path)
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("miss", "miss")
    assert first.json()["n"] != second.json()["n"]
