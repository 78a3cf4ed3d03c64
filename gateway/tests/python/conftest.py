"""Harness: starts the real `switchyard` binary on a free loopback port,
waits until it is ready, and stops it by PID after the tests."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A running gateway process."""

    def __init__(self, config=None, extra_args=(), env=None, port=None, admin_port=None, preexec_fn=None):
        """`port`/`admin_port`: fixed ports (to restart a replica where its
        peers expect it); free ones by default. `preexec_fn` runs in the
        child before the binary (e.g. to lower its open-file limit)."""
        binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
        self.port = port or free_port()
        self.admin_port = admin_port or free_port()
        self.url = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.url}"
        args = [binary, "serve", "--listen", self.url, "--admin-listen", f"127.0.0.1:{self.admin_port}"]
        if config:
            args += ["--config", str(config)]
        args += list(extra_args)
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchyard-{self.port}.log"
        self.log = open(self.log_path, "wb")
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
                                     preexec_fn=preexec_fn)
        self._wait_ready()

    def _wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"switchyard exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if requests.get(f"{self.base}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"switchyard not ready after {timeout}s:\n{self.log_text()}")

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def gateway():
    gw = Gateway()
    yield gw
    gw.stop()


REDIS_SERVER = os.environ.get("REDIS_SERVER_BIN", "redis-server")
REDIS_CLI = os.environ.get("REDIS_CLI_BIN", "redis-cli")


def free_cluster_port() -> int:
    """A free port P <= 55535 whose cluster bus port P + 10000 is free too
    (Redis Cluster needs both; ephemeral ports are too high)."""
    import random
    for _ in range(200):
        port = random.randint(20000, 30000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisServer:
    """A throw-away `redis-server` on a free loopback port (no persistence),
    stopped by PID. `kill()` and `start()` simulate an outage on the same
    port. With `cluster=True` it runs as a cluster node (see RedisCluster)."""

    def __init__(self, workdir, port=None, cluster=False):
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.dir = Path(workdir)
        self.cluster = cluster
        self.proc = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.dir)]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{self.port}.conf"]
        self.log = open(self.dir / f"redis-{self.port}.log", "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def cli(self, *args) -> str:
        out = subprocess.run([REDIS_CLI, "-p", str(self.port), *args], capture_output=True, text=True, timeout=10)
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
    """Three cluster-enabled masters joined with `redis-cli --cluster create`."""

    def __init__(self, workdir, masters=3):
        self.nodes = []
        try:
            for _ in range(masters):
                self.nodes.append(RedisServer(workdir, cluster=True))
            addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
            subprocess.run([REDIS_CLI, "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, capture_output=True, timeout=30)
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
