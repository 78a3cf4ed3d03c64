"""The admin listener without a token (the loopback default) against web
pages: a cross-site "simple" POST (no preflight) changes nothing, and a
request naming another host (DNS rebinding) reads nothing; the console's
own same-origin calls, scripts without browser headers and Prometheus
(`Host: ip:port`) keep working. Against the real binary.

Issue 37 item 7."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from conftest import REPO, Gateway
from routing_util import DIGITS_MODELS, write_config

CONFIG = DIGITS_MODELS + """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
"""

# What any web page can make a browser send to 127.0.0.1 without a CORS
# preflight: a text/plain POST, with the browser's own headers.
CROSS_SITE = {
    "Content-Type": "text/plain",
    "Origin": "http://evil.example",
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "no-cors",
}


@pytest.fixture
def open_gateway(tmp_path):
    config = write_config(tmp_path, CONFIG)
    gw = Gateway(config=config)
    yield gw, config
    gw.stop()


def generation(gw):
    return requests.get(f"{gw.admin}/admin/config", timeout=10).json()["generation"]


def threshold(gw):
    doc = requests.get(f"{gw.admin}/admin/config", timeout=10).json()
    return next(r for r in doc["config"]["routes"] if r["name"] == "digits")["policy"]["threshold"]


def cheap_pool(gw):
    stats = requests.get(f"{gw.admin}/admin/stats", timeout=10).json()
    model = next(m for m in stats["models"] if m["name"] == "digits-cheap")
    return model["pools"][0]


def assert_refused(r):
    assert r.status_code == 403, r.text
    assert "application/json" in r.headers["content-type"]
    assert r.json()["error"], r.text


def test_cross_site_simple_posts_change_nothing(open_gateway):
    gw, config = open_gateway
    before_text, before_generation = config.read_text(), generation(gw)
    edit = json.dumps({"route": "digits", "threshold": 0.3, "apply": True})
    calls = [
        ("/admin/config/edit", edit),
        ("/admin/reload", ""),
        ("/admin/models/digits-cheap/pools/cpu/pause", ""),
        ("/admin/models/digits-heavy/unload", ""),
        ("/admin/models/digits-heavy/load", ""),
        ("/admin/replay", config.read_text()),
    ]
    for path, body in calls:
        assert_refused(requests.post(f"{gw.admin}{path}", data=body, headers=CROSS_SITE, timeout=60))
    # Each browser signal alone is enough to refuse.
    for headers in [
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "application/json", "Origin": "http://evil.example"},
        {"Content-Type": "application/json", "Origin": "null"},
        {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{gw.port}"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
    ]:
        r = requests.post(f"{gw.admin}/admin/config/edit", data=edit, headers=headers, timeout=60)
        assert_refused(r)
    assert config.read_text() == before_text
    assert generation(gw) == before_generation
    assert threshold(gw) == pytest.approx(0.8)
    assert cheap_pool(gw)["paused"] is False
    assert gw.alive()


def test_same_origin_calls_and_scripts_still_work(open_gateway):
    gw, config = open_gateway
    # A script: JSON body, no browser headers.
    r = requests.post(f"{gw.admin}/admin/config/edit", json={"route": "digits", "threshold": 0.7, "apply": True},
                      timeout=60)
    assert r.status_code == 200 and r.json()["applied"] is True, r.text
    assert threshold(gw) == pytest.approx(0.7)
    # The console's own call, as the browser sends it.
    same_origin = {"Origin": gw.admin, "Sec-Fetch-Site": "same-origin", "Host": f"127.0.0.1:{gw.admin_port}"}
    r = requests.post(f"{gw.admin}/admin/config/edit", json={"route": "digits", "threshold": 0.6, "apply": True},
                      headers=same_origin, timeout=60)
    assert r.status_code == 200 and r.json()["applied"] is True, r.text
    assert threshold(gw) == pytest.approx(0.6)
    # Empty-bodied changes from a script need no Content-Type.
    r = requests.post(f"{gw.admin}/admin/models/digits-cheap/pools/cpu/pause", timeout=10)
    assert r.status_code == 200 and r.json()["paused"] is True, r.text
    r = requests.post(f"{gw.admin}/admin/models/digits-cheap/pools/cpu/resume",
                      headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 200 and r.json()["paused"] is False, r.text
    assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
    r = requests.post(f"{gw.admin}/admin/replay", data=config.read_text(),
                      headers={"Content-Type": "application/toml"}, timeout=120)
    assert r.status_code != 403, r.text


def test_requests_naming_another_host_are_refused(open_gateway):
    """DNS rebinding: the page's name now points at 127.0.0.1, so the
    browser connects to the listener but sends its own name as Host."""
    gw, _ = open_gateway
    for path in ["/admin/config", "/admin/stats", "/metrics", "/healthz", "/console/"]:
        for host in [f"evil.example:{gw.admin_port}", "evil.example", f"localhost.evil.example:{gw.admin_port}"]:
            r = requests.get(f"{gw.admin}{path}", headers={"Host": host}, timeout=10)
            assert_refused(r)
            assert "admin_listen" not in r.text and "digits" not in r.text
    r = requests.post(f"{gw.admin}/admin/reload", headers={"Host": f"evil.example:{gw.admin_port}"}, timeout=10)
    assert_refused(r)
    # The listener's own names, as local tools, port forwards and
    # Prometheus (`Host: ip:port`) send them.
    for host in [f"127.0.0.1:{gw.admin_port}", f"localhost:{gw.admin_port}", f"[::1]:{gw.admin_port}",
                 "127.0.0.1:19000", "LOCALHOST"]:
        assert requests.get(f"{gw.admin}/admin/config", headers={"Host": host}, timeout=10).status_code == 200, host
    metrics = requests.get(f"{gw.admin}/metrics", headers={"Host": f"127.0.0.1:{gw.admin_port}"}, timeout=10)
    assert metrics.status_code == 200 and "switchyard_" in metrics.text


def test_configured_admin_hosts_are_accepted_and_checked(tmp_path):
    config = write_config(tmp_path, '[server]\nadmin_hosts = ["switchyard-admin.test", "203.0.113.7"]\n' + CONFIG)
    gw = Gateway(config=config)
    try:
        for host in [f"switchyard-admin.test:{gw.admin_port}", "Switchyard-Admin.Test.", "203.0.113.7:9000"]:
            assert requests.get(f"{gw.admin}/admin/config", headers={"Host": host}, timeout=10).status_code == 200
        doc = requests.get(f"{gw.admin}/admin/config", timeout=10).json()
        assert doc["config"]["server"]["admin_hosts"] == ["switchyard-admin.test", "203.0.113.7"]
        assert_refused(requests.get(f"{gw.admin}/admin/config", headers={"Host": "other.test"}, timeout=10))
    finally:
        gw.stop()
    bad = write_config(tmp_path, '[server]\nadmin_hosts = ["ok.test", "http://admin.test:9000"]\n' + CONFIG)
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    out = subprocess.run([binary, "check-config", str(bad)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "server.admin_hosts[1]" in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_token_does_not_exempt_a_foreign_host(tmp_path):
    config = write_config(tmp_path, CONFIG)
    token = "csrf-test-admin-token-0123456789"
    gw = Gateway(config=config, env={"SWITCHYARD_ADMIN_TOKEN": token})
    try:
        auth = {"Authorization": f"Bearer {token}"}
        assert_refused(requests.get(f"{gw.admin}/metrics", headers={"Host": "evil.example"}, timeout=10))
        assert requests.get(f"{gw.admin}/admin/config", headers=auth, timeout=10).status_code == 200
        # With the token, a script's form-encoded body (curl -d) is fine.
        r = requests.post(f"{gw.admin}/admin/config/edit", headers=auth, timeout=60,
                          data=json.dumps({"route": "digits", "threshold": 0.75}))
        assert r.status_code == 200, r.text
    finally:
        gw.stop()


BROWSER = REPO / "gateway" / "tests" / "browser"


def browser(*args):
    node = shutil.which("node")
    chromium = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    assert node and Path(chromium).exists(), "run scripts/setup.sh test (node, chromium)"
    assert (BROWSER / "node_modules" / "playwright-core").is_dir(), "run scripts/setup.sh test (npm ci)"
    run = subprocess.run([node, str(BROWSER / "admin_csrf_browser.mjs"), *args], cwd=BROWSER,
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    return run.stdout


def model_state(gw, name):
    models = requests.get(f"{gw.admin}/admin/models", timeout=10).json()["models"]
    return next(m for m in models if m["name"] == name)["state"]


def test_in_a_browser_a_foreign_page_changes_nothing_and_the_console_does(open_gateway, tmp_path):
    """Headless Chromium: a page of another origin posts to the admin
    listener as a hostile site would (no-cors fetches, a text/plain form);
    then the console page's own fetch applies an edit."""
    gw, config = open_gateway
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "index.html").write_text(EVIL_PAGE.replace("{admin}", gw.admin))
    server = subprocess.Popen([shutil.which("python3") or "python3", "-u", "-m", "http.server", "--bind",
                               "127.0.0.1", "0"], cwd=evil, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (...)"
        port = int(line.split(" port ")[1].split()[0])
        before_text, before_generation = config.read_text(), generation(gw)
        heavy_state = model_state(gw, "digits-heavy")
        out = browser("foreign", f"http://127.0.0.1:{port}/index.html")
        assert "foreign page done" in out and "form" in out, out
    finally:
        server.kill()
        server.wait()
    assert config.read_text() == before_text, "a foreign page changed the config file"
    assert generation(gw) == before_generation, "a foreign page reloaded the config"
    assert threshold(gw) == pytest.approx(0.8)
    assert cheap_pool(gw)["paused"] is False, "a foreign page paused a pool"
    assert model_state(gw, "digits-heavy") == heavy_state, "a foreign page unloaded a model"
    out = browser("console", gw.admin)
    assert "console applied 200" in out, out
    assert "threshold = 0.65" in config.read_text()
    assert threshold(gw) == pytest.approx(0.65)


# A hostile page: no-cors fetches and a text/plain form post to the admin
# listener, none of which needs a CORS preflight.
EVIL_PAGE = """<!doctype html><html><body>
<form id="f" method="POST" action="{admin}/admin/models/digits-cheap/pools/cpu/pause" enctype="text/plain"
      target="sink"><input name="a" value="b"></form>
<iframe name="sink" id="sink"></iframe>
<script>
window.attack = async function () {
  const edit = JSON.stringify({route: "digits", threshold: 0.3, apply: true});
  const done = [];
  const posts = [
    ["/admin/config/edit", {body: edit}],
    ["/admin/config/edit", {headers: {"content-type": "text/plain"}, body: edit}],
    ["/admin/reload", {}],
    ["/admin/models/digits-heavy/unload", {}],
  ];
  for (const [path, init] of posts) {
    try {
      await fetch("{admin}" + path, Object.assign({method: "POST", mode: "no-cors"}, init));
      done.push(path);
    } catch (e) { done.push(path + " " + e); }
  }
  await new Promise((resolve) => {
    document.getElementById("sink").addEventListener("load", resolve, {once: true});
    setTimeout(resolve, 5000);
    document.getElementById("f").submit();
  });
  done.push("form");
  return done;
};
</script></body></html>
"""
