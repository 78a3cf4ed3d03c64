"""The servers under test: started pinned to the servers' CPU, waited for,
measured (memory of the whole process tree) and stopped by their own
process group.

Each server gets its own session (process group) at start, so stopping it
reaches the worker processes it forked (uvicorn, MLServer) and nothing
else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url: str, body: bytes | None = None, timeout: float = 2.0) -> bool:
    """True when GET (or POST `body`) on `url` answers 2xx."""
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return 200 <= r.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def one_row_body() -> bytes:
    """A valid one-row request for every example model (input X [1,64])."""
    data = [float(i % 17) for i in range(64)]
    return json.dumps({"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": data}]}).encode()


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _kib(path: str, field: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(pid: int) -> dict:
    """Memory of a process tree: the sum of VmRSS (counts shared pages once
    per process) and of Pss (shares them out), in MiB, and the process count."""
    pids = process_tree(pid)
    rss = sum(_kib(f"/proc/{p}/status", "VmRSS") for p in pids)
    pss = sum(_kib(f"/proc/{p}/smaps_rollup", "Pss") for p in pids)
    return {"rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1), "processes": len(pids)}


class Server:
    """One server under test. `cmd` must listen on 127.0.0.1:`port`."""

    def __init__(self, name: str, cmd: list[str], port: int, log: Path, *, pinned: bool = True,
                 env_extra: dict | None = None):
        self.name = name
        self.cmd = (env.server_prefix() if pinned else []) + cmd
        self.port = port
        self.log = log
        self.env = env.child_env()
        self.env.update(env_extra or {})
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.ready_s: float | None = None
        self.all_models_s: float | None = None
        self.grpc_port: int | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def infer_url(self, model: str) -> str:
        return f"{self.base}/v2/models/{model}/infer"

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, cwd=env.REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        out.close()

    def wait_ready(self, timeout_s: float = 180.0) -> float:
        """Seconds from start until /v2/health/ready answers 200."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before it was ready; "
                                   f"see {self.log}")
            if http_ok(f"{self.base}/v2/health/ready", timeout=1.0):
                self.ready_s = time.monotonic() - self.started
                return self.ready_s
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} was not ready after {timeout_s:.0f} s; see {self.log}")

    def warm(self, models: list[str], timeout_s: float = 120.0) -> float:
        """Sends one request to each model (loading lazily loaded ones);
        returns seconds from start until every model had answered."""
        body = one_row_body()
        deadline = time.monotonic() + timeout_s
        for model in models:
            while not http_ok(self.infer_url(model), body, timeout=30.0):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name}: model {model} does not answer; see {self.log}")
                time.sleep(0.05)
        self.all_models_s = time.monotonic() - self.started
        return self.all_models_s

    def memory(self) -> dict:
        if not self.proc:
            return {"rss_mib": 0.0, "pss_mib": 0.0, "processes": 0}
        return memory(self.proc.pid)

    def stop(self) -> None:
        """SIGINT to the server's process group (a fast shutdown for all
        three servers), SIGKILL after 5 s."""
        if not self.proc or self.proc.poll() is not None:
            return
        pgid = self.proc.pid  # start_new_session: the group is the server's own
        for sig, wait in ((signal.SIGINT, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # workers left behind by a parent that already exited
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Servers:
    """Servers started together and stopped together (a context manager)."""

    def __init__(self) -> None:
        self.all: list[Server] = []

    def add(self, server: Server) -> Server:
        self.all.append(server)
        server.start()
        return server

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        for s in self.all:
            s.stop()


# ------------------------------------------------------------------ the peers


NO_ACCESS_LOG = "info,pingora=warn,ort=warn,switchyard::access=off"


def switchyard(out: Path, name: str = "switchyard", config: Path | None = None, grpc: bool = False) -> Server:
    """Switchyard with its built-in config (or `config`), access log off;
    with `grpc`, its gRPC listener on too (port in `server.grpc_port`)."""
    port = free_port()
    cmd = [env.rel(env.SWITCHYARD), "serve", "--listen", f"127.0.0.1:{port}",
           "--admin-listen", f"127.0.0.1:{free_port()}"]
    if config:
        cmd[2:2] = ["--config", env.rel(config)]
    grpc_port = free_port() if grpc else None
    if grpc_port:
        cmd += ["--grpc-listen", f"127.0.0.1:{grpc_port}"]
    server = Server(name, cmd, port, out / f"{name}.log", env_extra={"RUST_LOG": NO_ACCESS_LOG})
    server.grpc_port = grpc_port
    return server


def fastapi(out: Path, name: str = "fastapi", max_batch_size: int = 0, run_mode: str = "threadpool") -> Server:
    """The FastAPI + uvicorn + onnxruntime baseline: 1 worker, 1 intra-op
    thread; `run_mode` "inline" calls `session.run` on the event loop
    instead of in Starlette's threadpool (no thread hop: faster for
    microsecond models, but one slow run holds every other request)."""
    port = free_port()
    cmd = [env.rel(env.PY), "benchmarks/baseline/fastapi_server.py", "--models-dir", "models", "--host", "127.0.0.1",
           "--port", str(port), "--workers", "1", "--intra-op-threads", "1"]
    if max_batch_size:
        cmd += ["--max-batch-size", str(max_batch_size)]
    if run_mode != "threadpool":
        cmd += ["--run-mode", run_mode]
    return Server(name, cmd, port, out / f"{name}.log")


MLSERVER_BATCH = {"max_batch_size": 32, "max_batch_time_s": 0.0005}


def mlserver(out: Path, name: str = "mlserver", batching: bool = False) -> Server:
    """MLServer 1.7 with the small onnxruntime runtime class; inference in
    the server process (parallel_workers 0), 1 intra-op thread; adaptive
    batching when `batching` (MLSERVER_BATCH)."""
    port = free_port()
    cmd = [env.rel(env.MLSERVER_PY), "benchmarks/mlserver/serve.py", "--models-dir", "models", "--port", str(port),
           "--grpc-port", str(free_port()), "--metrics-port", str(free_port()),
           "--workdir", env.rel(out / f"{name}-repo"), "--intra-op-threads", "1"]
    if batching:
        cmd += ["--max-batch-size", str(MLSERVER_BATCH["max_batch_size"]),
                "--max-batch-time", str(MLSERVER_BATCH["max_batch_time_s"])]
    return Server(name, cmd, port, out / f"{name}.log")


def versions() -> dict:
    """Versions of the peers' packages, as installed."""
    found = {}
    for label, py, pkgs in ((".venv", env.PY, ["fastapi", "uvicorn", "onnxruntime"]),
                            (".venv-mlserver", env.MLSERVER_PY, ["mlserver", "onnxruntime"])):
        code = ("import importlib.metadata as m, json, sys; "
                "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))")
        try:
            r = subprocess.run([str(py), "-c", code, *pkgs], capture_output=True, text=True, timeout=30)
            found[label] = json.loads(r.stdout) if r.returncode == 0 else {}
        except (OSError, subprocess.SubprocessError, ValueError):
            found[label] = {}
    return found
