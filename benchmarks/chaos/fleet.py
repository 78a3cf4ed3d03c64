"""The processes of the chaos scenario, all real and on loopback:

    clients -> front gateway -> replica A, replica B  (V2 upstream, health-checked)
                             -> app 1, app 2          (prefix route /apps/app/)
    replicas A and B share Redis as their L2 cache.

Each replica serves `digits-cheap` from a file of its own that the
model-swap event replaces (with digits-heavy's graph, version 2)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soak"))
import services  # noqa: E402
from services import MODELS  # noqa: E402

REPLICA = """
[server]
shutdown_grace_s = 10
shutdown_notice_ms = 800

[reload]
watch = false

[cache]
redis = {{ url = "{redis}" }}

[[models]]
name = "digits-cheap"
path = "{model}"
version = {version}
warmup = true
batching = {{ max_batch_size = 32, max_queue_delay_us = 200, queue_capacity = 256 }}

[[routes]]
name = "digits"
models = ["digits-cheap"]
budget_ms = {{ default = 2000, max = 10000 }}
cache = {{ ttl_s = 30 }}
"""

FRONT = """
[server]
max_concurrent_requests = {max_concurrent}

[[upstreams]]
name = "replicas"
kind = "v2"
addrs = ["{a}", "{b}"]
health = {{ interval_ms = 100 }}
models = [{{ name = "digits-fleet", model = "digits" }}]

[[routes]]
name = "digits"
models = ["digits-fleet"]
budget_ms = {{ default = 5000 }}
cache = {{ enabled = false }}

[[upstreams]]
name = "app"
addrs = ["127.0.0.1:{app1}", "127.0.0.1:{app2}"]
health = {{ path = "/health", interval_ms = 100 }}

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
"""


class Fleet:
    """Starts everything; `close()` stops everything by PID."""

    def __init__(self, binary: str, loadgen: str, workdir: Path, max_concurrent: int = 256):
        self.binary, self.loadgen, self.workdir = binary, loadgen, workdir
        self.redis = services.Redis(workdir)
        self.apps = [services.UpstreamApp(workdir), services.UpstreamApp(workdir)]
        self.replicas = [self.replica("a"), self.replica("b")]
        front_config = workdir / "front.toml"
        front_config.write_text(FRONT.format(
            max_concurrent=max_concurrent, a=self.replicas[0].addr, b=self.replicas[1].addr,
            app1=self.apps[0].port, app2=self.apps[1].port))
        self.front = services.Gateway(binary, front_config, workdir, name="front")

    def replica(self, name: str) -> services.Gateway:
        folder = self.workdir / name
        folder.mkdir(exist_ok=True)
        shutil.copy(MODELS / "digits-cheap.onnx", folder / "served.onnx")
        self.write_replica_config(folder, version=1)
        return services.Gateway(self.binary, folder / "switchyard.toml", folder, name=f"replica-{name}")

    def write_replica_config(self, folder: Path, version: int) -> None:
        (folder / "switchyard.toml").write_text(REPLICA.format(
            redis=self.redis.url, model=folder / "served.onnx", version=version))

    def close(self) -> None:
        for part in [getattr(self, "front", None), *getattr(self, "replicas", []), *getattr(self, "apps", []),
                     getattr(self, "redis", None)]:
            if part is not None:
                part.close()
