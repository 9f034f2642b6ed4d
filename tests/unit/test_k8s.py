"""The Kubernetes manifests as a cluster would get them: each overlay rendered by `kubectl kustomize`, every
object validated offline against the schemas of two Kubernetes releases (kubernetes-validate, strict: an
unknown field is an error), the prometheus-operator objects against the operator's CRD schemas (the
@kubernetes-models/prometheus-operator models, `make test` installs them into build/crd-check), and the
rules a platform team holds a workload to: only the door exposed, Triton's admin APIs behind a key, a
disruption budget, non-root containers without privilege escalation, a read-only root for the door, both
metrics endpoints scraped, no replica count beside the HPA, resources requested, the GPU only on GPU."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from kit.control.configs import REPO_ROOT
from kit.server.runtime import ADMIN_APIS

K8S = REPO_ROOT / "deploy" / "k8s"
OVERLAYS = ("gpu", "cpu")
KUBERNETES = ("1.30.0", "1.37.0")  # an older release still in support and the newest kubernetes-validate knows
CRD_CHECK = REPO_ROOT / "build" / "crd-check" / "validate.mjs"
OPERATOR_KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}


def render(overlay: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed: it renders the kustomize overlays (`kubectl kustomize`)")
    run = subprocess.run([kubectl, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return list(yaml.safe_load_all(run.stdout))


def by_kind(objects: list[dict]) -> dict[str, dict]:
    return {obj["kind"]: obj for obj in objects}


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> tuple[str, dict[str, dict]]:
    return request.param, by_kind(render(request.param))


def operator_errors(objects: list[dict]) -> dict[str, str | None]:
    if not CRD_CHECK.is_file():
        pytest.fail(f"{CRD_CHECK} is missing: `make test` installs it (deploy/k8s/crd-check)")
    run = subprocess.run(["node", str(CRD_CHECK)], input=json.dumps(objects), capture_output=True, text=True, check=True)
    return {f"{line['kind']}/{line['name']}": line["error"] for line in map(json.loads, run.stdout.splitlines())}


def test_every_object_validates_against_two_kubernetes_releases_and_the_operators_crds(overlay):
    name, objects = overlay
    native = [obj for obj in objects.values() if obj["kind"] not in OPERATOR_KINDS]
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"} <= set(objects)
    for obj in native:
        for release in KUBERNETES:
            kubernetes_validate.validate(obj, release, strict=True)
    operator = [obj for obj in objects.values() if obj["kind"] in OPERATOR_KINDS]
    assert [obj["kind"] for obj in operator] == ["PodMonitor"]
    assert operator_errors(operator) == {"PodMonitor/triton": None}


def test_the_validators_refuse_what_a_cluster_would(overlay):
    _, objects = overlay
    typo = copy.deepcopy(objects["Deployment"])
    typo["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBERNETES[0], strict=True)
    wrong = copy.deepcopy(objects["PodMonitor"])
    wrong["spec"]["podMetricsEndpoints"][0]["interval"] = 5
    assert operator_errors([wrong])["PodMonitor/triton"]


def containers(objects: dict[str, dict]) -> dict[str, dict]:
    return {c["name"]: c for c in objects["Deployment"]["spec"]["template"]["spec"]["containers"]}


def test_only_the_door_is_exposed_and_tritons_admin_apis_need_a_key(overlay):
    _, objects = overlay
    assert [(p["port"], p["targetPort"]) for p in objects["Service"]["spec"]["ports"]] == [(8080, "door")]
    triton = containers(objects)["triton"]
    for flag in ("--http-restricted-api=", "--grpc-restricted-protocol="):
        (arg,) = [a for a in triton["args"] if a.startswith(flag)]
        apis, key = arg.removeprefix(flag).split(":")
        assert set(apis.split(",")) == set(ADMIN_APIS) and key == "triton-admin-key=$(TRITON_ADMIN_KEY)"
    (key_ref,) = [e["valueFrom"]["secretKeyRef"] for e in triton["env"] if e["name"] == "TRITON_ADMIN_KEY"]
    door_env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in containers(objects)["door"]["env"]}
    assert door_env["DOOR_TRITON_ADMIN_KEY"] == key_ref, "the door reads Triton's model index, an admin API, with its key"
    assert "--model-control-mode=explicit" in triton["args"] and "--load-model=*" in triton["args"]
    assert containers(objects)["door"]["args"][:2] == ["--triton", "127.0.0.1:8001"], "the door reaches Triton on loopback"
    ingress = objects["NetworkPolicy"]["spec"]["ingress"]
    opened = {port["port"] for rule in ingress for port in rule["ports"]}
    assert opened == {"door", "metrics"} and objects["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"] == {"app": "triton"}


def test_the_pod_runs_unprivileged_and_the_door_on_a_read_only_root(overlay):
    _, objects = overlay
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"]
        assert context["runAsUser"] > 0
    door = containers(objects)["door"]
    assert door["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in door["volumeMounts"]} == {"/tmp"}
    dockerfile = (REPO_ROOT / "door" / "Dockerfile").read_text()
    assert "USER nobody" in dockerfile and door["securityContext"]["runAsUser"] == 65534, "the image's own user"


def test_the_hpa_alone_sets_replicas_and_the_budget_covers_the_pods(overlay):
    _, objects = overlay
    deployment = objects["Deployment"]
    assert "replicas" not in deployment["spec"]
    assert objects["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    budget = objects["PodDisruptionBudget"]["spec"]
    assert budget["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert budget["maxUnavailable"] == 1, "a drain of a single replica is not blocked"


def test_both_metrics_endpoints_are_scraped_by_port_name(overlay):
    _, objects = overlay
    monitor = objects["PodMonitor"]["spec"]
    assert monitor["selector"]["matchLabels"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]
    ports = {port["name"]: port["containerPort"] for c in containers(objects).values() for port in c["ports"]}
    scraped = {endpoint["port"]: endpoint["path"] for endpoint in monitor["podMetricsEndpoints"]}
    assert scraped == {"metrics": "/metrics", "door": "/metrics"} and {ports["metrics"], ports["door"]} == {8002, 8080}


def test_resources_are_requested_and_the_gpu_is_only_on_the_gpu_overlay(overlay):
    name, objects = overlay
    for container in containers(objects).values():
        assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
        assert container["resources"]["limits"]["memory"]
    triton = containers(objects)["triton"]
    assert ("nvidia.com/gpu" in triton["resources"]["limits"]) == (name == "gpu")
    assert f"--model-repository=s3://triton-models/triton/{name}" in triton["args"]


def test_probes_are_the_kits_health_checks(overlay):
    _, objects = overlay
    triton, door = containers(objects)["triton"], containers(objects)["door"]
    assert triton["readinessProbe"]["httpGet"]["path"] == triton["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert "/opt/kit/kit/server/healthcheck.py" in triton["livenessProbe"]["exec"]["command"]
    assert door["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert door["livenessProbe"]["httpGet"]["path"] == door["startupProbe"]["httpGet"]["path"] == "/health/live"
