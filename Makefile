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
OCR_ONNX := $(ARTIFACTS)/ocr/export.json
# A hub id (e.g. microsoft/resnet-50) or a checkpoint directory; empty: ResNet-50's architecture with random weights.
RESNET_MODEL ?=
RESNET_ONNX := $(ARTIFACTS)/resnet50/export.json
RESNET_COST := $(ARTIFACTS)/resnet50/cost.json
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

export: $(RADAR_ONNX) $(OCR_ONNX) $(RESNET_COST) ## export RADAR_MODEL (default: the tiny stand-in), the PP-OCRv4 models and ResNet-50, each validated

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

# PP-OCRv4 det/rec/cls ship in the pinned rapidocr-onnxruntime wheel (serve venv); checksummed, rewritten, validated.
$(OCR_ONNX): export/ocr.py export/onnx_validate.py kit/ocr/recognize.py kit/ocr/synthetic.py | $(VENV)/serve/.installed
	$(SERVE_PY) -m export.ocr --out $(ARTIFACTS)/ocr

# ResNet-50 for padded mixed-shape batches (RESNET_MODEL, default a random-weight stand-in), then its
# run time per batch and image size on this machine, for the `cost` merge policy.
ifneq ($(shell cat $(ARTIFACTS)/resnet50/.source 2>/dev/null),$(RESNET_MODEL))
.PHONY: $(RESNET_ONNX)
endif
$(RESNET_ONNX): export/resnet.py export/onnx_validate.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.resnet $(if $(RESNET_MODEL),--model $(RESNET_MODEL)) --out $(ARTIFACTS)/resnet50
	echo "$(RESNET_MODEL)" > $(ARTIFACTS)/resnet50/.source

$(RESNET_COST): $(RESNET_ONNX) kit/batching/measure_cost.py model_repository/profiles/cpu.json | $(VENV)/serve/.installed
	$(SERVE_PY) -m kit.batching.measure_cost --model $(ARTIFACTS)/resnet50/model.onnx --out $@

.PHONY: perf-resnet
perf-resnet: $(VENV)/serve/.installed $(RESNET_COST) ## ResNet-50 on (3, 224±50, 224±50) images, 1-70 clients: no / Triton / Paddle / cost batching (~25 min) -> perf/RESULTS.md
	$(SERVE_PY) -m perf.resnet_padding --report perf/RESULTS.md

system-deps: ## Debian packages the embedded server needs (installed only when missing; needs root)
	@missing=""; \
	command -v $(PYTHON) >/dev/null || missing="$$missing python3.11 python3.11-venv"; \
	[ -e /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 ] || missing="$$missing libpython3.11"; \
	[ -e /usr/lib/x86_64-linux-gnu/libGL.so.1 ] || missing="$$missing libgl1"; \
	[ -e /usr/lib/x86_64-linux-gnu/libgthread-2.0.so.0 ] || missing="$$missing libglib2.0-0"; \
	[ -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || missing="$$missing fonts-wqy-microhei"; \
	[ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ] || missing="$$missing libb64-0d"; \
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

# Performance kit (perf/): perf_analyzer sweeps of the kit against the hand-rolled baselines, on the
# RoBERTa-large-shaped stand-in (random weights, real compute per chunk). Each starts its own servers on free ports.
PERF_CHECKPOINT := $(ARTIFACTS)/checkpoints/radar-large
PERF_MODEL := $(ARTIFACTS)/radar-large/export.json

.PHONY: perf perf-quick tune

perf: $(VENV)/serve/.installed $(PERF_MODEL) ## full sweep: kit vs Flask/gunicorn/FastAPI baselines and the offline limit -> perf/RESULTS.md (~30 min)
	$(SERVE_PY) -m perf.sweep --spec full --out perf/results --report perf/RESULTS.md

perf-quick: $(VENV)/serve/.installed $(PERF_MODEL) ## every target once at 16 clients (under 10 min) -> build/perf/results-quick/REPORT.md
	$(SERVE_PY) -m perf.sweep --spec quick --out build/perf/results-quick

tune: $(VENV)/serve/.installed $(PERF_MODEL) ## search instances x threads x queue delay x buckets; write the winner into model_repository/profiles/cpu.json
	$(SERVE_PY) -m perf.tune --spec tune

$(PERF_CHECKPOINT)/config.json: export/standins.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.standins --size large --out $(PERF_CHECKPOINT)

$(PERF_MODEL): $(PERF_CHECKPOINT)/config.json | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.radar --model $(PERF_CHECKPOINT) --out $(ARTIFACTS)/radar-large

# GPU deployment (docs/GPU.md): built and checked offline here, run on a GPU host. The Triton
# container release is pinned in docker-compose.yml (TRITON_RELEASE, 24.10 = tritonserver 2.51.0);
# tests/unit/test_deploy_files.py keeps the Dockerfiles and deploy/k8s on the same release.
GPU_REPOSITORY := build/repository/gpu
# export.tensorrt runs here by default, and refuses (exit 2) without TensorRT; on a GPU host,
# TRT_RUN="docker compose --profile tools run --rm tensorrt" runs it with the serving release's TensorRT.
TRT_RUN ?= $(SERVE_PY) -m export.tensorrt

.PHONY: repository-gpu compose-config tensorrt deploy-deps

repository-gpu: $(VENV)/serve/.installed export ## build the GPU repository in build/repository/gpu (hard links, not symlinks: mountable, uploadable)
	$(SERVE_PY) -m kit.repository build --profile gpu --out $(GPU_REPOSITORY).links
	rm -rf $(GPU_REPOSITORY)
	cp -rL --link $(GPU_REPOSITORY).links $(GPU_REPOSITORY) 2>/dev/null \
		|| { rm -rf $(GPU_REPOSITORY); cp -rL $(GPU_REPOSITORY).links $(GPU_REPOSITORY); }
	rm -rf $(GPU_REPOSITORY).links

compose-config: deploy-deps ## validate docker-compose.yml offline (no Docker engine needed)
	docker-compose -f docker-compose.yml config -q

tensorrt: $(VENV)/serve/.installed $(RADAR_ONNX) ## build RADAR's TensorRT engine with an FP16 accuracy check (GPU + TensorRT 10.5: see TRT_RUN)
	$(TRT_RUN) --onnx $(ARTIFACTS)/radar/model.onnx --out $(ARTIFACTS)/radar/model.plan \
		$$($(SERVE_PY) -m kit.gpu_profile trt-shapes radar_classifier) \
		--int-high $$($(SERVE_PY) -c 'from tokenizers import Tokenizer; print(Tokenizer.from_file("$(ARTIFACTS)/radar/tokenizer.json").get_vocab_size())')

deploy-deps: ## Debian's docker-compose, to validate docker-compose.yml offline (installed only when missing; needs root)
	@command -v docker-compose >/dev/null || { echo "installing: docker-compose"; apt-get update -qq && apt-get install -y -qq docker-compose; }

# tests/unit/test_deploy_files.py runs docker-compose: `make test` installs it first.
test-serve: deploy-deps

# Reliability (perf/RELIABILITY.md): longer runs of the peak, soak and fuzz tests that `make test`
# runs briefly. Loopback only, bounded in count and time; each prints its figures and writes
# build/reliability/*.json.
.PHONY: soak peak fuzz

soak: $(VENV)/serve/.installed export ## 10-minute soak of the kit, then of the Flask baseline: RSS slope after warm-up
	KIT_SOAK_SECONDS=600 $(SERVE_PY) -m pytest tests/served/test_soak.py -q -s $(PYTEST_ARGS)

peak: $(VENV)/serve/.installed export ## 4,000 requests at once per protocol, past radar's queue bound of 2,048
	KIT_PEAK_REQUESTS=4000 $(SERVE_PY) -m pytest tests/served/test_peak.py -q -s $(PYTEST_ARGS)

fuzz: $(VENV)/serve/.installed export ## 5,000 malformed requests per protocol against a server of its own
	KIT_FUZZ_CASES=5000 $(SERVE_PY) -m pytest tests/served/test_fuzz.py -q -s $(PYTEST_ARGS)

# OCR in the performance kit (perf/specs/ocr*.json): the kit's `ocr` against FastAPI + uvicorn on the
# same pipeline and PP-OCRv4 models, and the in-process limit; `make perf` is the RADAR sweep.
.PHONY: perf-ocr perf-ocr-quick

perf-ocr: $(VENV)/serve/.installed $(OCR_ONNX) ## OCR sweep: kit vs FastAPI + uvicorn (1/2/4 workers) and the in-process limit, 1-32 clients -> perf/RESULTS.md (6-10 min)
	$(SERVE_PY) -m perf.sweep --spec ocr --out perf/results/ocr --report perf/RESULTS.md

perf-ocr-quick: $(VENV)/serve/.installed $(OCR_ONNX) ## OCR: the kit and uvicorn once at 8 clients (under 5 min) -> build/perf/results-ocr-quick/REPORT.md
	$(SERVE_PY) -m perf.sweep --spec ocr-quick --out build/perf/results-ocr-quick
