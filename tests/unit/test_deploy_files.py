"""The GPU deployment files, checked offline: no Docker engine, no GPU, no cluster.

docker-compose.yml is validated by Debian's docker-compose (`make deploy-deps`); the container's
Python packages are checked against what the Python models really import; the dashboard, Prometheus
and Kubernetes files must parse and may only query metric names Triton documents.
"""

import ast
import json
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from deploy.metric_names import DOCUMENTED, GPU_METRICS, all_referenced, referenced
from deploy.triton import check_imports
from kit.control.configs import REPO_ROOT, SOURCE
from kit.control.container import TRT_CACHE_ROOT, python_shm_bytes
from kit.control.repository import plan
from kit.control.served import adapter
from tests.profiles import configs
from tests.unit.test_k8s import by_kind, render

COMPOSE = REPO_ROOT / "docker-compose.yml"
DEPLOY = REPO_ROOT / "deploy"
K8S = DEPLOY / "k8s"
# tritonserver 2.51.0 (the embedded server, the tritonclient pinned beside it) is container 24.10.
TRITON_RELEASE = "24.10"
CONTAINER_PYTHON = (3, 10)  # the Python inside the 24.10 containers (Ubuntu 22.04)
HEALTHCHECK_IN_IMAGE = "/opt/kit/kit/server/healthcheck.py"  # deploy/triton/Dockerfile copies kit/ to /opt/kit/kit
DISTRIBUTIONS = {"cv2": "opencv-python-headless", "PIL": "pillow"}  # import name -> package, where they differ


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def k8s_objects() -> dict[str, dict]:
    """The GPU overlay as kubectl renders it (tests/unit/test_k8s.py), its kustomization and the adapter's values."""
    objects = by_kind(render("gpu"))
    objects["Kustomization"] = yaml.safe_load((K8S / "overlays" / "gpu" / "kustomization.yaml").read_text())
    objects["prometheus-adapter-values"] = yaml.safe_load((K8S / "prometheus-adapter-values.yaml").read_text())
    return objects


def size_bytes(text: str) -> int:
    """Docker's `2gb` / `512m` and Kubernetes' `2Gi` / `512Mi` (both binary multiples here)."""
    number, unit = re.fullmatch(r"(\d+)\s*([kmgt]?)(?:i|b)?", str(text).lower()).groups()
    return int(number) * 1024 ** "bkmgt".index(unit or "b")


def test_compose_file_validates_offline():
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is not installed: run `make deploy-deps` (make test does)")
    run = subprocess.run([binary, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr


def test_every_image_is_pinned_and_triton_matches_the_embedded_server(compose):
    assert version("tritonclient") == "2.51.0"
    for name, service in compose["services"].items():
        image = service["image"]
        assert re.search(r":[\w.${}:-]+$", image) and not image.endswith(":latest"), (name, image)
        if "build" in service and name != "door":  # the door's image is Python's, not Triton's (below)
            assert service["build"]["args"]["TRITON_RELEASE"] == f"${{TRITON_RELEASE:-{TRITON_RELEASE}}}"
            dockerfile = (REPO_ROOT / service["build"]["dockerfile"]).read_text()
            assert f"ARG TRITON_RELEASE={TRITON_RELEASE}\n" in dockerfile
            assert re.search(r"^FROM nvcr\.io/nvidia/\w+:\$\{TRITON_RELEASE\}-py3$", dockerfile, re.M)


def test_triton_service_reserves_gpus_mounts_the_repository_and_restarts(compose):
    triton = compose["services"]["triton"]
    (device,) = triton["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"]
    assert "./build/repository/gpu:/models:ro" in triton["volumes"]
    assert f"trt-cache:{TRT_CACHE_ROOT}" in triton["volumes"]
    assert "--model-repository=/models" in triton["command"]
    assert {"--model-control-mode=explicit", "--load-model=*"} <= set(triton["command"])
    assert HEALTHCHECK_IN_IMAGE in triton["healthcheck"]["test"]
    assert triton["restart"] == "unless-stopped"
    label = compose["services"]["autoheal"]["environment"]["AUTOHEAL_CONTAINER_LABEL"]
    assert triton["labels"][label] == "true"


def test_health_check_script_is_in_the_image_and_runs_on_its_python():
    dockerfile = (DEPLOY / "triton" / "Dockerfile").read_text()
    assert re.search(r"^COPY kit /opt/kit/kit$", dockerfile, re.M)
    source = (REPO_ROOT / "kit" / "server" / "healthcheck.py").read_text()
    ast.parse(source, feature_version=CONTAINER_PYTHON)
    imported = {a.name.split(".")[0] for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert imported <= set(sys.stdlib_module_names), f"not standard library: {imported - set(sys.stdlib_module_names)}"


def test_shared_memory_fits_the_python_instances_of_the_gpu_profile(compose):
    needed = python_shm_bytes(configs("gpu"))
    assert size_bytes(compose["services"]["triton"]["shm_size"]) >= needed
    volumes = k8s_objects()["Deployment"]["spec"]["template"]["spec"]["volumes"]
    (dshm,) = [v for v in volumes if v["name"] == "dshm"]
    assert dshm["emptyDir"]["medium"] == "Memory" and size_bytes(dshm["emptyDir"]["sizeLimit"]) >= needed


def imported_modules(path: Path) -> set[str]:
    """Absolute imports of a file, parsed as the container's Python parses it (3.11 syntax fails)."""
    tree = ast.parse(path.read_text(), str(path), feature_version=CONTAINER_PYTHON)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def kit_files(name: str) -> list[Path]:
    """The files importing `kit.a.b` runs: every package __init__ on the way and the module itself."""
    parts = name.split(".")
    bases = [REPO_ROOT.joinpath(*parts[:i]) for i in range(1, len(parts) + 1)]
    return [p for base in bases for p in (base / "__init__.py", base.with_suffix(".py")) if p.is_file()]


def third_party_imports(files: list[Path]) -> set[str]:
    """Top-level non-stdlib modules reached from `files`, following imports through the kit."""
    third_party, seen, stack = set(), set(), list(files)
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_modules(path):
            top = name.partition(".")[0]
            if top in check_imports.PACKAGES:
                stack += kit_files(name)
            elif top not in sys.stdlib_module_names and top != "triton_python_backend_utils":
                third_party.add(top)
    return third_party


def test_container_requirements_are_exactly_what_the_python_models_import():
    models = sorted({m.adapter for m in plan("gpu").values() if m.adapter is not None})
    third_party = third_party_imports(models + sorted(SOURCE.glob("*.py")))  # with the shipped pipeline modules
    lines = (DEPLOY / "triton" / "requirements.txt").read_text().splitlines()
    pinned = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    needed = {DISTRIBUTIONS.get(m, m) for m in third_party}
    assert needed == set(pinned), "deploy/triton/requirements.txt must pin exactly what the Python models import"


def test_image_build_imports_what_every_model_py_imports_from_the_kit():
    dockerfile = (DEPLOY / "triton" / "Dockerfile").read_text()
    adapters = sorted({m.adapter for m in plan("gpu").values() if m.adapter is not None})
    # A spec's models that no shipped model has: an image classifier's pixels.
    adapters += [adapter("image_pixels_model")]
    named = " \\\n    ".join(f"/opt/kit/kit/adapters/{path.name}" for path in adapters)
    assert f"RUN python3 /tmp/check/check_imports.py /tmp/check/model_repository {named}" in dockerfile
    checked = check_imports.check(SOURCE, adapters)
    assert "text_classifier_model: kit.pipelines.text.pipeline" in checked
    assert "image_pixels_model: kit.pipelines.image_processing" in checked
    assert "pipeline_model: kit.adapters.custom_pipeline" in checked
    assert "ocr_pipeline: ocr.reader" in checked and "health_code_pipeline: ocr.health_code" in checked


def test_grafana_dashboard_parses_and_uses_the_provisioned_datasource(compose):
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "triton.json").read_text())
    datasource = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "triton.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    mount = f"./deploy/grafana/dashboards:{provider['providers'][0]['options']['path']}:ro"
    assert mount in compose["services"]["grafana"]["volumes"]
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Queue time per request", "Compute time per request", "Average batch size", "Throughput"} <= titles
    assert {"GPU utilisation", "GPU memory"} <= titles
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == uid and panel["targets"], panel["title"]


def test_prometheus_scrapes_tritons_metrics_port_and_the_doors(compose):
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["triton"]["static_configs"][0]["targets"] == ["triton:8002"]
    assert "--metrics-port=8002" in compose["services"]["triton"]["command"]
    assert jobs["door"]["static_configs"][0]["targets"] == ["door:8080"] and jobs["door"]["metrics_path"] == "/metrics"
    assert "8080" in compose["services"]["door"]["command"]


def test_kubernetes_manifests_serve_from_object_storage_with_probes_and_autoscaling():
    objects = k8s_objects()
    kustomization = objects["Kustomization"]
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "triton")
    assert any(arg.startswith("--model-repository=s3://") for arg in container["args"])
    assert container["envFrom"][0]["secretRef"]["name"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert HEALTHCHECK_IN_IMAGE in container["livenessProbe"]["exec"]["command"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["image"].endswith(f":{TRITON_RELEASE}") and kustomization["images"][0]["newTag"] == TRITON_RELEASE
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/dev/shm", TRT_CACHE_ROOT}
    assert container["image"] == f"triton-kit/triton:{TRITON_RELEASE}"
    hpa = objects["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == objects["Deployment"]["metadata"]["name"]
    adapter_names = {rule["name"]["as"] for rule in objects["prometheus-adapter-values"]["rules"]["custom"]}
    assert {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]} <= adapter_names


def test_every_metric_the_deployment_queries_is_one_triton_documents():
    unknown = {file: names - DOCUMENTED for file, names in referenced().items() if names - DOCUMENTED}
    assert not unknown
    wanted = {
        "nv_inference_queue_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_count",
        "nv_inference_exec_count",
        "nv_gpu_utilization",
        "nv_gpu_memory_used_bytes",
    }
    assert wanted <= referenced()["grafana/dashboards/triton.json"]
    assert "nv_inference_pending_request_count" in referenced()["k8s/prometheus-adapter-values.yaml"]
    assert all_referenced() & GPU_METRICS


DOOR_IMPORTS = {
    "cv2": "opencv-python-headless",
    "PIL": "pillow",
    "google": "protobuf",
    "grpc": "grpcio",
    "prometheus_client": "prometheus-client",
    "fastapi_offline": "fastapi-offline",
}


def test_door_runs_beside_triton_in_compose_and_in_the_pod(compose):
    door = compose["services"]["door"]
    assert door["build"]["dockerfile"] == "door/Dockerfile"
    assert door["command"][:2] == ["--triton", "triton:8001"] and "0.0.0.0" in door["command"]
    assert door["ports"] == ["127.0.0.1:8080:8080"] and "DOOR_API_KEYS" in door["environment"]
    assert door["pid"] == "service:triton"
    dockerfile = (REPO_ROOT / "door" / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11\.\d+-slim-\w+$", dockerfile, re.M)
    objects = k8s_objects()
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "door"]
    assert pod["shareProcessNamespace"] is True
    assert container["args"][:2] == ["--triton", "127.0.0.1:8001"]
    assert container["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "door-api-keys"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert {"name": "door", "port": 8080, "targetPort": "door"} in objects["Service"]["spec"]["ports"]
    tag = container["image"].rsplit(":", 1)[1]
    assert {"name": "triton-kit/door", "newName": "triton-kit/door", "newTag": tag} in objects["Kustomization"]["images"]


def test_door_image_pins_what_the_door_imports_at_the_serve_venvs_versions():
    files = list((REPO_ROOT / "door").glob("*.py"))
    # pytriton is imported only inside kit.server.runtime.triton_dist, which starts Triton: never in the door.
    needed = {DOOR_IMPORTS.get(module, module) for module in third_party_imports(files) - {"door", "pytriton"}}
    lines = (REPO_ROOT / "door" / "requirements.txt").read_text().splitlines()
    pinned = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    names = {re.sub(r"\[.*\]", "", name).replace("_", "-").lower(): version for name, version in pinned.items()}
    assert needed <= set(names), f"door/requirements.txt misses {needed - set(names)}"
    lock = dict(line.split("==") for line in (REPO_ROOT / "requirements" / "serve.lock").read_text().splitlines() if "==" in line)
    lock = {name.replace("_", "-").lower(): version for name, version in lock.items()}
    assert {name: version for name, version in names.items() if name in lock} == {
        name: lock[name] for name in names if name in lock
    }
