"""The harness never hands a server a port that another process can take
first (issue 37, item 19: a test failed once with "connection refused" on
the admin port of a gateway started on a busy machine). The gateway and the
upstream apps bind port 0 and report the port they got; Redis and the
other servers that need a port named in advance get one reserved by the
test process. Each test here takes, in another process or socket, the port
that a choose-then-bind harness would have used, and checks that the
servers still start where they can be reached."""

import os
import socket
import subprocess
import sys

import requests

import conftest
import proxy_util
from conftest import Gateway, RedisServer, free_port

BIND_PLAIN = """
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError as e:
    print("refused", e.errno)
else:
    print("bound")
"""

LISTEN_LIKE_A_SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening")
"""


def run(code, port):
    out = subprocess.run([sys.executable, "-c", code, str(port)], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or out.stderr


def test_a_free_port_stays_free_for_the_server_it_was_chosen_for():
    """`free_port()` is reserved until the session ends: another process
    cannot bind it, and a server (SO_REUSEADDR, as every server the tests
    start) still can."""
    port = free_port()
    assert run(BIND_PLAIN, port).startswith("refused"), "another process took the chosen port"
    assert run(LISTEN_LIKE_A_SERVER, port) == "listening"


def chooser_handing_out(taken, real):
    """A port chooser whose first answer is the port `taken` (what a
    choose-then-bind harness could have picked just before another process
    bound it), then whatever `real` chooses."""
    answers = [taken]

    def choose(*args, **kwargs):
        return answers.pop() if answers else real(*args, **kwargs)
    return choose


def take_the_first_choice(monkeypatch, modules, port):
    """Every port chooser of `modules` first answers `port`."""
    real_reserve = getattr(conftest, "reserve_port", conftest.free_port)
    real_free = conftest.free_port
    for module in modules:
        monkeypatch.setattr(module, "free_port", chooser_handing_out(port, real_free))
        monkeypatch.setattr(module, "reserve_port", chooser_handing_out(port, real_reserve), raising=False)


def test_the_gateway_starts_when_the_port_a_chooser_would_pick_is_taken(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        take_the_first_choice(monkeypatch, [conftest], port)
        gw = Gateway()
        try:
            assert port not in (gw.port, gw.admin_port)
            assert requests.get(f"{gw.base}/v2/health/ready", timeout=10).status_code == 200
            assert requests.get(f"{gw.admin}/metrics", timeout=10).status_code == 200
        finally:
            gw.stop()


def test_redis_and_upstream_apps_start_when_their_first_port_is_taken(monkeypatch, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        take_the_first_choice(monkeypatch, [conftest, proxy_util], port)
        redis = RedisServer(tmp_path)
        try:
            assert redis.port != port and redis.ping()
        finally:
            redis.stop()
        app = proxy_util.upstream_app("app")
        try:
            assert app.port != port
            assert requests.get(f"{app.base}/health", timeout=10).status_code == 200
        finally:
            app.stop()


def test_a_taken_port_fails_start_up_and_names_the_listener():
    """The symptom of item 19: with its admin port taken, the gateway used
    to run on, ready on its V2 port with the admin port refusing. Now the
    listeners are bound before serving, and a port in use ends start-up
    with the field that names it (so a harness can retry, and an operator
    reads why)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        binary = os.environ.get("SWITCHYARD_BIN", str(conftest.REPO / "target" / "debug" / "switchyard"))
        for flag, field in (("--admin-listen", "server.admin_listen"), ("--listen", "server.listen")):
            other = "--listen" if flag == "--admin-listen" else "--admin-listen"
            try:
                out = subprocess.run([binary, "serve", other, "127.0.0.1:0", flag, f"127.0.0.1:{port}"],
                                     capture_output=True, text=True, timeout=60, cwd=conftest.REPO)
            except subprocess.TimeoutExpired as e:
                raise AssertionError(f"still running with {field} taken: {(e.stderr or b'')[-2000:]!r}") from e
            assert out.returncode != 0, out.stderr[-2000:]
            assert f"bind {field} 127.0.0.1:{port}" in out.stderr and "in use" in out.stderr, out.stderr[-2000:]
