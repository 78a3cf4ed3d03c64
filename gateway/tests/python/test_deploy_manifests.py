"""deploy/k8s: every manifest against the official schemas (offline, through
deploy/k8s/validate/validate.mjs and the @kubernetes-models packages), a
broken manifest fails that validation, the alert rules pass `promtool
check rules`, the metric names they use exist, and the pods' shutdown
timings cover the config's."""

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "deploy" / "k8s"
VALIDATE = K8S / "validate" / "validate.mjs"
RULES = K8S / "components" / "observability" / "prometheusrule.yaml"


def validate(*args, timeout=60):
    node = shutil.which("node")
    assert node, "node missing: install Node.js (scripts/setup.sh test needs it too)"
    assert (K8S / "validate" / "node_modules" / "kubernetes-models").is_dir(), \
        "schemas missing: run `scripts/setup.sh test` (npm ci in deploy/k8s/validate)"
    out = subprocess.run([node, str(VALIDATE), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def test_every_manifest_matches_its_schema():
    rc, out = validate(K8S)
    assert rc == 0, out
    for kind in ("apps/v1 Deployment", "autoscaling/v2 HorizontalPodAutoscaler", "policy/v1 PodDisruptionBudget",
                 "apps/v1 StatefulSet", "serving.knative.dev/v1 Service", "keda.sh/v1alpha1 ScaledObject",
                 "monitoring.coreos.com/v1 ServiceMonitor", "monitoring.coreos.com/v1 PrometheusRule"):
        assert kind in out, f"{kind} not among the checked objects: {out}"


def kustomize_with_components() -> str | None:
    """Why overlays cannot be rendered here, or None when they can."""
    if not shutil.which("kubectl"):
        return "kubectl not installed (no Debian package renders kustomize components); raw files are still checked"
    out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True, timeout=30)
    m = re.search(r"Kustomize Version: v(\d+)\.(\d+)", out.stdout)
    if not m or (int(m[1]), int(m[2])) < (4, 1):
        return f"kubectl's kustomize is too old for components (needs v4.1+): {out.stdout.strip()}"
    return None


@pytest.mark.parametrize("overlay", ["dev", "production", "production-keda"])
def test_overlay_renders_and_matches_schemas(overlay):
    reason = kustomize_with_components()
    if reason:
        pytest.skip(reason)
    rc, out = validate("-k", K8S / "overlays" / overlay)
    assert rc == 0, out
    assert re.search(r"\b(1[0-9]|[2-9][0-9]) object\(s\) checked, 0 problem", out), out


BROKEN = {
    "replicas-not-integer": ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
                             "spec: {replicas: three, selector: {}, template: {spec: {containers: [{name: a}]}}}\n",
                             "/spec/replicas must be integer"),
    "container-without-name": ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
                               "spec: {selector: {}, template: {spec: {containers: [{image: a}]}}}\n",
                               "/spec/template/spec/containers/0 must have required property name"),
    "knative-concurrency-string": ("apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: x}\n"
                                   "spec: {template: {spec: {containerConcurrency: lots, containers: [{image: a}]}}}\n",
                                   "containerConcurrency must be integer"),
    "keda-without-target": ("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\n"
                            "spec: {triggers: [{type: cpu, metadata: {value: '50'}}]}\n",
                            "must have required property scaleTargetRef"),
    "rule-group-without-name": ("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: x}\n"
                                "spec: {groups: [{rules: [{alert: A, expr: up == 0}]}]}\n",
                                "/spec/groups/0 must have required property name"),
    "unknown-kind": ("apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n", "no schema for apps/v1 Deploymnet"),
    "bad-yaml": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n", "YAML:"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_manifest_fails_validation(case, tmp_path):
    text, expected = BROKEN[case]
    (tmp_path / "broken.yaml").write_text(text)
    rc, out = validate(tmp_path)
    assert rc == 1, out
    assert expected in out, out


def test_real_deployment_with_a_typed_error_fails(tmp_path):
    """The shipped gateway Deployment, one value made the wrong type: the
    validator reports that object and field, so a shipped file is checked
    field by field, not merely parsed."""
    doc = yaml.safe_load((K8S / "base" / "gateway-deployment.yaml").read_text())
    doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "35s"
    (tmp_path / "gateway-deployment.yaml").write_text(yaml.safe_dump(doc))
    rc, out = validate(tmp_path)
    assert rc == 1, out
    assert "Deployment/switchyard-gateway: /spec/template/spec/terminationGracePeriodSeconds must be integer" in out


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or str(REPO / ".cache" / "prometheus" / "promtool")
    if not os.access(found, os.X_OK):
        found = shutil.which("promtool")
    assert found, "promtool missing: run `scripts/setup.sh test` (or set PROMTOOL)"
    return found


def rule_file(tmp_path, spec) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": spec["groups"]}))
    return path


def test_alert_rules_pass_promtool(tmp_path):
    spec = yaml.safe_load(RULES.read_text())["spec"]
    out = subprocess.run([promtool(), "check", "rules", str(rule_file(tmp_path, spec))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    count = sum(len(g["rules"]) for g in spec["groups"])
    assert f"SUCCESS: {count} rules found" in out.stdout, out.stdout


def test_promtool_rejects_a_broken_rule(tmp_path):
    spec = yaml.safe_load(RULES.read_text())["spec"]
    spec["groups"][0]["rules"][0]["expr"] = "sum(rate(switchyard_requests_total[5m]) >"
    out = subprocess.run([promtool(), "check", "rules", str(rule_file(tmp_path, spec))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr, out.stdout + out.stderr


def exported_metrics() -> set[str]:
    names = set()
    for src in (REPO / "gateway" / "src", REPO / "runtime" / "src"):
        for f in src.rglob("*.rs"):
            names.update(re.findall(r'"(switchyard_[a-z0-9_]+)"', f.read_text()))
    return names


@pytest.mark.parametrize("path", [
    "components/observability/prometheusrule.yaml",
    "components/observability/switchyard-dashboard.json",
    "components/keda/scaledobject.yaml",
    "base/gateway-hpa.yaml",
    "extras/prometheus-adapter-config.yaml",
])
def test_metric_names_in_manifests_exist(path):
    exported = exported_metrics()
    used = set(re.findall(r"\bswitchyard_[a-z0-9_]+", (K8S / path).read_text()))
    used = {re.sub(r"_(bucket|sum|count)$", "", n) for n in used}
    assert used, f"{path} names no Switchyard metric"
    missing = sorted(n for n in used if n not in exported)
    assert not missing, f"{path} uses metrics Switchyard does not export: {missing}"


def container(manifest: Path, kind: str) -> tuple[dict, dict]:
    for doc in yaml.safe_load_all(manifest.read_text()):
        if doc and doc["kind"] == kind:
            pod = doc["spec"]["template"]["spec"]
            return pod, pod["containers"][0]
    raise AssertionError(f"no {kind} in {manifest}")


@pytest.mark.parametrize("manifest,toml", [
    ("base/gateway-deployment.yaml", "base/switchyard.toml"),
    ("components/runtime-deployment/runtime-deployment.yaml", "components/runtime-config/switchyard-runtime.toml"),
])
def test_termination_grace_covers_the_shutdown(manifest, toml):
    """preStop sleep + shutdown_notice_ms + shutdown_grace_s + the L2 flush
    (2 s) must end before the kubelet's SIGKILL."""
    pod, c = container(K8S / manifest, "Deployment")
    server = tomllib.loads((K8S / toml).read_text())["server"]
    cmd = c["lifecycle"]["preStop"]["exec"]["command"]
    assert cmd[0] == "sleep", cmd
    needed = int(cmd[1]) + server["shutdown_notice_ms"] / 1000 + server["shutdown_grace_s"] + 2
    assert pod["terminationGracePeriodSeconds"] > needed, (pod["terminationGracePeriodSeconds"], needed)
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
