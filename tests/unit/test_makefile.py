"""The Makefile's own promises: `make help` lists every target a person may run, and the variables that
the files it drives refer to are defined by it."""

from __future__ import annotations

import re
import subprocess

import yaml

from kit.control.configs import REPO_ROOT

MAKEFILE = (REPO_ROOT / "Makefile").read_text()


def phony_targets() -> list[str]:
    names = [name for line in re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.M) for name in line.split()]
    return [name for name in dict.fromkeys(names) if "$" not in name]


def test_help_lists_every_phony_target_with_its_description_digits_included():
    shown = subprocess.run(["make", "-s", "help"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    listed = dict(re.findall(r"^  make (\S+) +(.*)$", shown, re.M))
    assert list(listed) == phony_targets()
    assert listed["perf-int8-graphs"].startswith("INT8"), "a target whose name holds a digit"
    described = re.findall(r"^([A-Za-z0-9_.-]+):.*## ", MAKEFILE, re.M)
    assert set(described) <= set(listed), "a described target missing from .PHONY"
    assert all(listed.values()), [name for name, text in listed.items() if not text]


def test_the_triton_release_docker_compose_refers_to_is_the_makefiles():
    release = re.search(r"^TRITON_RELEASE \?= (\S+)$", MAKEFILE, re.M).group(1)
    assert re.search(r"^export TRITON_RELEASE$", MAKEFILE, re.M)
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["triton"]["image"] == f"triton-kit/triton:${{TRITON_RELEASE:-{release}}}"
