# Triton deployment kit. `make help` lists the targets.
# Everything a target needs is installed by the target itself: system packages (as root),
# two virtualenvs (export: torch/transformers/onnx; serve: tritonserver/tritonclient/onnxruntime),
# the exported models and the built model repository.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# The Python-backend stub embeds CPython 3.11 (the stubs in the pytriton wheel go by minor version).
PYTHON ?= python3.11
VENV := .venv
SERVE_PY := $(VENV)/serve/bin/python
EXPORT_PY := $(VENV)/export/bin/python
ARTIFACTS := artifacts
# A hub id (e.g. TrustSafeAI/RADAR-Vicuna-7B) or a checkpoint directory. The default is the tiny
# stand-in generated offline (see README: it has random weights and only exercises the pipeline).
TINY_RADAR := $(ARTIFACTS)/checkpoints/radar-tiny
RADAR_MODEL ?= $(TINY_RADAR)
RADAR_ONNX := $(ARTIFACTS)/radar/export.json
PIP_INSTALL = bin/pip install --quiet --disable-pip-version-check
SERVE_ARGS ?=
PYTEST_ARGS ?=

.PHONY: help serve test test-export test-serve export standins system-deps clean

help: ## show this help
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

serve: $(VENV)/serve/.installed export ## export if needed, build the CPU repository, run tritonserver on 127.0.0.1:8000/8001/8002
	$(SERVE_PY) -m kit.serve $(SERVE_ARGS)

test: test-export test-serve ## set everything up, then run the whole test suite against a real tritonserver

test-export: $(VENV)/export/.installed
	$(EXPORT_PY) -m pytest tests/export -q $(PYTEST_ARGS)

test-serve: $(VENV)/serve/.installed export
	$(SERVE_PY) -m pytest tests/unit tests/served -q $(PYTEST_ARGS)

export: $(RADAR_ONNX) ## export RADAR_MODEL (default: the tiny stand-in) to ONNX, validated against PyTorch

standins: $(VENV)/export/.installed ## generate the tiny and RoBERTa-large-shaped RADAR stand-ins
	$(EXPORT_PY) -m export.standins --size tiny --out $(ARTIFACTS)/checkpoints/radar-tiny
	$(EXPORT_PY) -m export.standins --size large --out $(ARTIFACTS)/checkpoints/radar-large

# Re-export when the source model changes, not only when the export code does.
ifneq ($(shell cat $(ARTIFACTS)/radar/.source 2>/dev/null),$(RADAR_MODEL))
.PHONY: $(RADAR_ONNX)
endif
ifeq ($(RADAR_MODEL),$(TINY_RADAR))
$(RADAR_ONNX): $(TINY_RADAR)/config.json
endif
$(RADAR_ONNX): export/radar.py export/onnx_validate.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.radar --model $(RADAR_MODEL) --out $(ARTIFACTS)/radar
	echo "$(RADAR_MODEL)" > $(ARTIFACTS)/radar/.source

$(TINY_RADAR)/config.json: export/standins.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.standins --size tiny --out $(TINY_RADAR)

system-deps: ## Debian packages the embedded server needs (installed only when missing; needs root)
	@missing=""; \
	command -v $(PYTHON) >/dev/null || missing="$$missing python3.11 python3.11-venv"; \
	[ -e /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 ] || missing="$$missing libpython3.11"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; apt-get update -qq && apt-get install -y -qq $$missing; fi

$(VENV)/serve/.installed: requirements/serve.txt requirements/serve.lock | system-deps
	rm -rf $(VENV)/serve && $(PYTHON) -m venv $(VENV)/serve
	cd $(VENV)/serve && $(PIP_INSTALL) -r ../../requirements/serve.txt -c ../../requirements/serve.lock
	# The Python-backend stub ignores PYTHONPATH: make the kit importable from the venv itself.
	echo "$(CURDIR)" > $$($(SERVE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/triton-kit.pth
	touch $@

$(VENV)/export/.installed: requirements/export.txt requirements/export.lock | system-deps
	rm -rf $(VENV)/export && $(PYTHON) -m venv $(VENV)/export
	cd $(VENV)/export && $(PIP_INSTALL) -r ../../requirements/export.txt -c ../../requirements/export.lock
	echo "$(CURDIR)" > $$($(EXPORT_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/triton-kit.pth
	touch $@

clean: ## remove virtualenvs, exported models and built repositories
	rm -rf $(VENV) $(ARTIFACTS) build
