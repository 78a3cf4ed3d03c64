"""Harness: starts the real `switchyard` binary on loopback, waits until it
is ready, and stops it by PID after the tests.

Ports: nothing here picks a port and hands it to a server that binds it
later (another process could take it in between). The gateway binds port
0 and reports what it got (`serve --ports-file`); servers that cannot
report their port (redis-server, test apps given a fixed port) get a
*reserved* port (`reserve_port`): a socket of this process holds it bound,
never listening, until the session ends, so no other process can bind it
or use it for a connection, while the server, which sets SO_REUSEADDR as
every server started here does, can still bind and listen on it."""

import itertools
import json
import os
import signal
import socket
import subprocess
import time
from functools import lru_cache
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"

# Every server here is stopped with SIGINT, the fast shutdown each one
# handles. A shell that starts a job in the background (CI runners, `nohup`,
# `make test &`) starts it with SIGINT ignored, and an ignored signal stays
# ignored across exec: a Python upstream then never sees the SIGINT and is
# killed only after `stop`'s whole wait (10 s each, ~2 minutes per suite).
# A handler in this process is reset to the default in every child, so the
# children take SIGINT however the suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Reserved ports (see the module docstring): port -> the socket holding it.
_RESERVED: dict[int, socket.socket] = {}


def reserve_port(port: int = 0, wait_s: float = 0.0) -> int:
    """Reserves loopback `port` (0: a free one) for the rest of the session
    and returns it; reserving a port twice is a no-op. A server that sets
    SO_REUSEADDR binds and listens on it as usual; any other bind, and the
    kernel's choice of ports for new connections, stay off it. `wait_s`:
    how long to keep trying while another process holds `port` (a fixed
    port just given up by a stopped server)."""
    if port in _RESERVED:
        return port
    deadline = time.monotonic() + wait_s
    while True:
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", port))
        except OSError:
            holder.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
            continue
        port = holder.getsockname()[1]
        _RESERVED[port] = holder
        return port


def free_port() -> int:
    """A free loopback port, reserved for the session (`reserve_port`), so
    a server started later still finds it free."""
    return reserve_port()


def port_in_use(log_text: str) -> bool:
    """True when a server's log says it could not bind its port."""
    return "Address already in use" in log_text or "address in use" in log_text.lower()


@lru_cache(maxsize=None)
def reports_ports(binary: str) -> bool:
    """Whether `binary serve` has `--ports-file` (an older build, e.g. one
    checked against a regression test, has not: it gets reserved ports)."""
    out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=60)
    return "--ports-file" in out.stdout


_LOG_NUMBERS = itertools.count()


class Gateway:
    """A running gateway process."""

    def __init__(self, config=None, extra_args=(), env=None, port=None, admin_port=None, preexec_fn=None,
                 tls_ca=None, client_cert=None, admin_tls=False):
        """`port`/`admin_port`: fixed ports (to restart a replica where its
        peers expect it; reserved for the session); by default the gateway
        binds port 0 and the harness reads the ports it got. `grpc_port` is
        the gRPC listener's port when one is on. `preexec_fn` runs in the
        child before the binary (e.g. to lower its open-file limit).
        `tls_ca`: the V2 listener serves HTTPS (`server.tls`) with a
        certificate from this CA file (`base` is then `https://`);
        `client_cert`: the (cert, key) files readiness presents (mTLS);
        `admin_tls`: the admin listener serves HTTPS too."""
        self.tls_ca = str(tls_ca) if tls_ca else None
        self.client_cert = client_cert
        self.admin_tls = admin_tls
        binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
        tmp = Path(os.environ.get("TMPDIR", "/tmp"))
        stem = f"switchyard-{os.getpid()}-{next(_LOG_NUMBERS)}"
        self.log_path = tmp / f"{stem}.log"
        ports_file = tmp / f"{stem}.ports.json"
        ports_file.unlink(missing_ok=True)
        reported = reports_ports(binary)

        def listen(fixed):
            if fixed:
                return f"127.0.0.1:{reserve_port(fixed, wait_s=10)}"
            return "127.0.0.1:0" if reported else f"127.0.0.1:{reserve_port()}"

        args = [binary, "serve", "--listen", listen(port), "--admin-listen", listen(admin_port)]
        self.port = int(args[3].rsplit(":", 1)[1])
        self.admin_port = int(args[5].rsplit(":", 1)[1])
        self.grpc_port = None
        if config:
            args += ["--config", str(config)]
        args += list(extra_args)
        if reported:
            args += ["--ports-file", str(ports_file)]
        self.log = open(self.log_path, "wb")
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
                                     preexec_fn=preexec_fn)
        if reported:
            self._read_ports(ports_file)
        self.url = f"127.0.0.1:{self.port}"
        self.base = f"{'https' if self.tls_ca else 'http'}://{self.url}"
        self._wait_ready()

    def _read_ports(self, path, timeout=60.0):
        """Waits for the ports file the gateway writes once it is bound."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"switchyard exited with {self.proc.returncode}:\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"switchyard bound no port in {timeout}s:\n{self.log_text()}")
            time.sleep(0.05)
        bound = json.loads(path.read_text())
        path.unlink()
        self.port = int(bound["listen"].rsplit(":", 1)[1])
        self.admin_port = int(bound["admin_listen"].rsplit(":", 1)[1])
        if bound.get("grpc_listen"):
            self.grpc_port = int(bound["grpc_listen"].rsplit(":", 1)[1])

    def _wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"switchyard exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                ready = requests.get(f"{self.base}/v2/health/ready", timeout=1,
                                     verify=self.tls_ca or True, cert=self.client_cert)
                if ready.status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"switchyard not ready after {timeout}s:\n{self.log_text()}")

    @property
    def admin(self) -> str:
        return f"{'https' if self.admin_tls else 'http'}://127.0.0.1:{self.admin_port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        """The log's last 4,000 characters, for error messages."""
        return self.whole_log()[-4000:]

    def whole_log(self) -> str:
        """The whole log. A line the gateway logs (access lines, rollout
        events) is written by its log thread in bursts, a little after the
        state it reports, and a busy gateway's log soon runs past
        `log_text`'s tail: wait for it in the whole file."""
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        """`with Gateway(...) as gw:` stops it when the block ends."""
        return self

    def __exit__(self, *exc):
        self.stop()


@pytest.fixture(scope="session")
def gateway():
    gw = Gateway()
    yield gw
    gw.stop()


REDIS_SERVER = os.environ.get("REDIS_SERVER_BIN", "redis-server")
REDIS_CLI = os.environ.get("REDIS_CLI_BIN", "redis-cli")


class PortTaken(RuntimeError):
    """A server could not bind the port it was given."""


def free_cluster_port() -> int:
    """A reserved port P <= 55535 whose cluster bus port P + 10000 is
    reserved too (Redis Cluster needs both; ephemeral ports are too high)."""
    import random
    for _ in range(200):
        port = random.randint(20000, 30000)
        try:
            reserve_port(port + 10000)
        except OSError:
            continue
        try:
            return reserve_port(port)
        except OSError:
            continue
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisTls:
    """TLS for a RedisServer: its certificate and key, the CA that clients
    (and, in a cluster, the other nodes) are checked against; with
    `auth_clients`, clients must present a certificate of that CA."""

    def __init__(self, cert, key, ca, auth_clients=False):
        self.cert, self.key, self.ca, self.auth_clients = cert, key, ca, auth_clients

    def server_args(self, port):
        """TLS only: no plain port, `port` the TLS one."""
        return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(self.cert),
                "--tls-key-file", str(self.key), "--tls-ca-cert-file", str(self.ca),
                "--tls-auth-clients", "yes" if self.auth_clients else "no"]

    def cli_args(self):
        return ["--tls", "--cacert", str(self.ca)]


class RedisServer:
    """A throw-away `redis-server` on a reserved loopback port (no
    persistence), stopped by PID. `kill()` and `start()` simulate an outage
    on the same port (the reservation keeps it ours meanwhile). With
    `cluster=True` it runs as a cluster node (see RedisCluster); with `tls`
    (a RedisTls) it speaks TLS only, its cluster bus too."""

    def __init__(self, workdir, port=None, cluster=False, tls=None):
        self.dir = Path(workdir)
        self.cluster = cluster
        self.tls = tls
        self.proc = None
        if port:
            self.port = reserve_port(port, wait_s=10)
            self.start()
            return
        for attempt in range(5):
            self.port = free_cluster_port() if cluster else reserve_port()
            try:
                self.start()
                return
            except PortTaken:
                # Only a server that binds without SO_REUSEADDR can hold a
                # reserved port; never seen, but a new port costs nothing.
                continue
        raise RuntimeError("redis-server found every port it was given in use")

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}"

    def start(self):
        listen = self.tls.server_args(self.port) if self.tls else ["--port", str(self.port)]
        args = [REDIS_SERVER, *listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.dir)]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{self.port}.conf"]
            if self.tls:
                args += ["--tls-cluster", "yes"]
        log_path = self.dir / f"redis-{self.port}.log"
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                text = log_path.read_text(errors="replace")[-2000:]
                if port_in_use(text):
                    raise PortTaken(text)
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{text}")
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    def ping(self) -> bool:
        """PING answered; over TLS, the port accepting connections."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                if self.tls:
                    return True
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def cli_args(self) -> list:
        """redis-cli's arguments to reach this server."""
        return [*(self.tls.cli_args() if self.tls else []), "-p", str(self.port)]

    def cli(self, *args) -> str:
        out = subprocess.run([REDIS_CLI, *self.cli_args(), *args], capture_output=True, text=True, timeout=10)
        return out.stdout.strip()

    def dbsize(self) -> int:
        text = self.cli("DBSIZE")
        return int(text) if text.isdigit() else 0

    def kill(self):
        """Abrupt outage: SIGKILL, as a crashed server."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()


class RedisCluster:
    """Three cluster-enabled masters joined with `redis-cli --cluster create`;
    with `tls` (a RedisTls), over TLS."""

    def __init__(self, workdir, masters=3, tls=None):
        self.nodes = []
        try:
            for _ in range(masters):
                self.nodes.append(RedisServer(workdir, cluster=True, tls=tls))
            addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
            tls_args = tls.cli_args() if tls else []
            subprocess.run([REDIS_CLI, *tls_args, "--cluster", "create", *addrs, "--cluster-replicas", "0",
                            "--cluster-yes"], check=True, capture_output=True, timeout=30)
            deadline = time.monotonic() + 20
            while not all("cluster_state:ok" in n.cli("CLUSTER", "INFO") for n in self.nodes):
                if time.monotonic() > deadline:
                    raise RuntimeError("redis cluster did not reach cluster_state:ok")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    @property
    def urls(self):
        return [n.url for n in self.nodes]

    def stop(self):
        for n in self.nodes:
            n.stop()


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.stop()
