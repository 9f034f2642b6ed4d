"""A real Prometheus (Debian's package) with the committed configuration and rules, its two jobs pointed at the
session's server and a door in front of it, while clients send work through the door: every query of the
Grafana dashboard returns series, the HPA's query (prometheus-adapter's rule, filled in as the adapter fills
it) and the recording rule behind it return series, the rules evaluate without error and no alert fires.
Panels on GPU metrics (deploy/metric_names.py GPU_METRICS) must return nothing here: a CPU server exports
none, which the test checks on the server's own metrics page and names in its output."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import urllib.parse
import urllib.request

import pytest
import yaml

from clients.door import DoorClient
from deploy.metric_names import GPU_METRICS, METRIC
from kit.control.configs import REPO_ROOT
from kit.server.runtime import answers_ok, free_port
from samples.images import document
from samples.texts import sample_texts
from tests.served.doors import running_door
from tests.served.reliability import Workers, wait_for

PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dashboards" / "triton.json"
ADAPTER = REPO_ROOT / "deploy" / "k8s" / "prometheus-adapter-values.yaml"


def config_for(triton_metrics: str, door: str) -> dict:
    """The committed configuration with its targets pointed here and its rule files by absolute path."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    targets = {"triton": triton_metrics, "door": door}
    for job in config["scrape_configs"]:
        (static,) = job["static_configs"]
        static["targets"] = [targets[job["job_name"]]]
    config["rule_files"] = [str(PROMETHEUS / pattern) for pattern in config["rule_files"]]
    return config


def query(url: str, expr: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=10) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]["result"]


def adapter_queries() -> list[str]:
    """prometheus-adapter's metricsQuery for each rule, filled as it fills it for one scraped server."""
    rules = yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]
    filled = []
    for rule in rules:
        series = METRIC.search(rule["seriesQuery"]).group()
        text = rule["metricsQuery"].replace("<<.Series>>", series).replace("<<.LabelMatchers>>", 'job="triton"')
        filled.append(text.replace("<<.GroupBy>>", "instance"))
    return filled


class Traffic(Workers):
    """A few clients sending texts and an image through the door until stopped."""

    def __init__(self, door_url: str):
        super().__init__()
        self.client = DoorClient(door_url)
        self.texts = sample_texts(16, 150, 900, seed=27)
        self.image = document(28, width=480, lines=2).data
        self.threads = [threading.Thread(target=self.send, args=(i,)) for i in range(4)]

    def send(self, index: int) -> None:
        n = index
        while not self.stop.is_set():
            if index == 0 and n % 8 == 0:
                self.client.read(self.image)
            else:
                self.client.classify(self.texts[n % len(self.texts)])
            n += 1


@pytest.fixture(scope="module")
def prometheus(server, tmp_path_factory):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: run `make system-deps` (Debian's prometheus package)")
    root = tmp_path_factory.mktemp("prometheus")
    with running_door(server.options.grpc_url, root / "door.log") as door:
        metrics = f"{server.options.host}:{server.options.metrics_port}"
        (root / "prometheus.yml").write_text(yaml.safe_dump(config_for(metrics, door.url.removeprefix("http://"))))
        port = free_port()
        with open(root / "prometheus.log", "wb") as log:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={root / 'prometheus.yml'}",
                    f"--storage.tsdb.path={root / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            assert wait_for(lambda: answers_ok(f"{url}/-/ready"), 60, every=0.5), (root / "prometheus.log").read_text()[-2000:]
            with Traffic(door.url):
                # Two scrapes of both jobs in a rate's window, and the rules evaluated at least once.
                assert wait_for(lambda: len(query(url, "count_over_time(up[1m]) >= 3")) == 2, 90, every=1)
                assert wait_for(lambda: query(url, "instance:triton_pending_requests:sum"), 60, every=1)
                yield url, server
        finally:
            process.terminate()
            process.wait(20)


def panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_dashboard_query_returns_series_except_the_gpu_panels_on_a_cpu_server(prometheus):
    url, server = prometheus
    with urllib.request.urlopen(server.options.metrics_url, timeout=10) as page:
        exported = set(METRIC.findall(page.read().decode()))
    assert not exported & GPU_METRICS, "a CPU server exports no GPU metric"
    empty, gpu_panels = [], []
    for title, expr in panel_queries():
        uses_gpu = bool(set(METRIC.findall(expr)) & GPU_METRICS)
        result = query(url, expr)
        if uses_gpu:
            gpu_panels.append(title)
            assert result == [], f"{title}: {expr} returned series without a GPU"
        elif not result:
            empty.append(f"{title}: {expr}")
    assert not empty, empty
    assert gpu_panels, "the dashboard has GPU panels, checked here only for their absence"
    print(f"\nGPU-only panels, empty on this CPU server: {sorted(set(gpu_panels))}", file=sys.stderr)


def test_the_autoscalers_query_and_its_recording_rule_return_each_servers_pending_requests(prometheus):
    url, _ = prometheus
    for expr in [*adapter_queries(), "instance:triton_pending_requests:sum"]:
        result = query(url, expr)
        assert len(result) == 1 and float(result[0]["value"][1]) >= 0, (expr, result)


def test_the_doors_metrics_are_collected_and_the_rules_evaluate_without_firing(prometheus):
    url, _ = prometheus
    assert [float(r["value"][1]) for r in query(url, "door_canary_ok")] == [1.0]
    assert query(url, 'sum(rate(door_requests_total{route="/v1/radar", status="200"}[1m])) > 0')
    with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=10) as answer:
        groups = json.load(answer)["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert rules and all(rule["health"] == "ok" for rule in rules), [(r["name"], r.get("lastError")) for r in rules]
    assert query(url, 'ALERTS{alertstate="firing"}') == []
