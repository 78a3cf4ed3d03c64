"""Writes a `podman kube play` file for the gateway pod of deploy/k8s/base
(test-image.sh): the Deployment's pod template as it is (init container,
args, security context), its ConfigMap from base/switchyard.toml, and the
changes a single host without a cluster needs, each one named here:

- listeners on the given loopback ports (podman runs it with the host's
  network; the manifest's 0.0.0.0:8000/9000 and container ports go);
- the models volume as a hostPath (the PVC has no provisioner here);
- the Secret's values as plain `env` (podman 4.3 reads only its own
  secrets), the probes dropped (podman 4.3 runs no readiness probe);
- the image tag given;
- a Pod (the Deployment's template, restartPolicy Never) rather than the
  Deployment: under restartPolicy Always podman 4.3 restarts an init
  container that exited 0 and then fails to remove it.

    python3 kube-pod.py OUT MODELS_DIR PORT ADMIN_PORT IMAGE [broken]

`broken`: the ConfigMap gets a route threshold out of range (1.8).
"""
import re
import sys
from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parents[1] / "k8s" / "base"


def main() -> int:
    out, models, port, admin, image = sys.argv[1:6]
    broken = sys.argv[6:7] == ["broken"]
    toml = (K8S / "switchyard.toml").read_text()
    toml = re.sub(r'(?m)^listen = ".*"$', f'listen = "127.0.0.1:{port}"', toml)
    toml = re.sub(r'(?m)^admin_listen = ".*"$', f'admin_listen = "127.0.0.1:{admin}"', toml)
    if broken:
        toml = toml.replace("threshold = 0.8", "threshold = 1.8")
    secret = yaml.safe_load((K8S / "secret.yaml").read_text())
    env = [{"name": k, "value": v} for k, v in secret["stringData"].items()]
    dep = yaml.safe_load((K8S / "gateway-deployment.yaml").read_text())
    spec = dep["spec"]["template"]["spec"]
    for c in spec["initContainers"] + spec["containers"]:
        c["image"] = image
        c.pop("envFrom", None)
        c["env"] = env + c.get("env", [])
        for key in ("ports", "readinessProbe", "livenessProbe", "startupProbe"):
            c.pop(key, None)
    spec["volumes"] = [
        v if v["name"] != "models" else {"name": "models", "hostPath": {"path": models, "type": "Directory"}}
        for v in spec["volumes"]
    ]
    spec["restartPolicy"] = "Never"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**dep["spec"]["template"]["metadata"], "name": dep["metadata"]["name"]}, "spec": spec}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "switchyard-gateway-config"},
          "data": {"switchyard.toml": toml}}
    Path(out).write_text(yaml.safe_dump_all([cm, pod]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
