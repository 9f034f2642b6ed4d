"""The committed Prometheus configuration and rules pass Debian's promtool (`make system-deps` installs it):
the configuration and its rule files check, and the rules' own unit tests (deploy/prometheus/tests) pass:
a failing canary alerts after a minute and a passing one never; a queue that keeps refusing alerts and one
that stopped does not; the door's 429s alert per route; pending requests are summed per server."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kit.control.configs import REPO_ROOT

PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is not installed: run `make system-deps` (Debian's prometheus package)")
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_the_configuration_and_its_rules_check():
    run = promtool("check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert run.returncode == 0 and "SUCCESS: 1 rule files found" in run.stdout, run.stdout + run.stderr
    run = promtool("check", "rules", *map(str, sorted((PROMETHEUS / "rules").glob("*.yml"))))
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_rules_unit_tests_pass():
    run = promtool("test", "rules", str(PROMETHEUS / "tests" / "rules_test.yml"))
    assert run.returncode == 0 and "SUCCESS" in run.stdout, run.stdout + run.stderr


def test_a_rules_unit_test_that_expects_the_wrong_alert_fails(tmp_path):
    """The unit tests can fail: the same file expecting the passing canary to alert is refused."""
    text = (PROMETHEUS / "tests" / "rules_test.yml").read_text()
    wrong = tmp_path / "rules_test.yml"
    wrong.write_text(
        text.replace("../rules/", f"{PROMETHEUS / 'rules'}/").replace('instance: "door-a:8080"', 'instance: "door-b:8080"')
    )
    assert promtool("test", "rules", str(wrong)).returncode != 0
