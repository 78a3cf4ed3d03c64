"""deploy/: the TOML files that ship as ConfigMaps (and the image's default
config) pass `switchyard check-config`, run exactly as the pods' init
containers run it; an invalid ConfigMap stops both the init container and
`serve` (the pod never turns ready) with the field paths in the log."""

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "deploy" / "k8s"
MODELS = REPO / "models"
SECRETS = {
    "SWITCHYARD_ADMIN_TOKEN": "test-admin-token-0123456789",
    "SWITCHYARD_KEY_TEAM_A": "test-team-a-key-0123456789",
    "SWITCHYARD_KEY_TEAM_B": "test-team-b-key-0123456789",
}
# tier -> (pod manifest, its ConfigMap file)
TIERS = {
    "gateway": ("base/gateway-deployment.yaml", "base/switchyard.toml"),
    "runtime": ("components/runtime-deployment/runtime-deployment.yaml",
                "components/runtime-config/switchyard-runtime.toml"),
}


def binary() -> str:
    return os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))


def pod_spec(manifest: str) -> dict:
    return yaml.safe_load((K8S / manifest).read_text())["spec"]["template"]["spec"]


def local_copy(toml: Path, tmp_path: Path, edit=lambda s: s) -> Path:
    """The ConfigMap file with the /models volume pointed at this checkout's models."""
    text = toml.read_text()
    assert re.search(r'(?m)^path = "/models"$', text), f"{toml}: [repository] path is not /models"
    out = tmp_path / toml.name
    out.write_text(edit(text.replace('path = "/models"', f'path = "{MODELS}"')))
    return out


def run_as_pod(args: list[str], config: Path, timeout=60) -> subprocess.CompletedProcess:
    """The container's args with its mounted config path swapped for `config`."""
    args = [str(config) if a.startswith("/etc/switchyard/") else a for a in args]
    env = {**os.environ, **SECRETS}
    return subprocess.run([binary(), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("tier", sorted(TIERS))
def test_configmap_passes_the_init_container_check(tier, tmp_path):
    manifest, toml = TIERS[tier]
    init = pod_spec(manifest)["initContainers"][0]
    assert init["args"][0] == "check-config", init
    out = run_as_pod(init["args"], local_copy(K8S / toml, tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr


def test_image_default_config_passes_check_config(tmp_path):
    config = local_copy(REPO / "deploy" / "container" / "switchyard.toml", tmp_path)
    out = run_as_pod(["check-config", str(config)], config)
    assert out.returncode == 0, out.stdout + out.stderr


def break_gateway_config(text: str) -> str:
    return text.replace("max_batch_size = 64, max_queue_delay_us = 200",
                        'max_batch_size = "lots", max_queue_delay_us = 200')


def break_routes(text: str) -> str:
    return (text.replace("threshold = 0.8", "threshold = 1.8")
            .replace('"digits-cheap", "digits-heavy-remote"', '"digits-cheap", "digits-nope"'))


@pytest.mark.parametrize("edit,paths", [
    (break_gateway_config, ["models[0].batching.max_batch_size"]),
    (break_routes, ["routes[0].models[1]", "routes[0].policy.threshold"]),
])
def test_invalid_configmap_fails_init_and_serve_with_field_paths(edit, paths, tmp_path):
    """Init container: exits non-zero with every problem's field path (pod
    Init:Error, `kubectl logs POD -c check-config`). Without the init
    container, `serve` itself exits with the same paths before listening,
    so the pod never passes readiness and its log says why."""
    manifest, toml = TIERS["gateway"]
    spec = pod_spec(manifest)
    config = local_copy(K8S / toml, tmp_path, edit)
    for args in (spec["initContainers"][0]["args"], spec["containers"][0]["args"]):
        out = run_as_pod(args, config)
        log = out.stdout + out.stderr
        assert out.returncode != 0, log
        for path in paths:
            assert path in log, f"{args[0]}: {path} not in the log: {log}"
