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
# The graph the CPU serves (export.text_model --precision): fused (default, exact within --atol), int8
# (dynamic quantization, gated on AI probabilities against FP32 PyTorch; RADAR_INT8_GATE sets the
# thresholds, e.g. "--int8-max-diff 0.02") or fp32 (the graph as torch exported it).
RADAR_PRECISION ?= fused
RADAR_INT8_GATE ?=
RADAR_ONNX := $(ARTIFACTS)/radar/export.json
# The tiny stand-in at INT8, which the served tests run end to end beside the default export.
RADAR_INT8_ONNX := $(ARTIFACTS)/radar-int8/export.json
OCR_ONNX := $(ARTIFACTS)/ocr/export.json
# A hub id (e.g. microsoft/resnet-50) or a checkpoint directory; empty: ResNet-50's architecture with random weights.
RESNET_MODEL ?=
RESNET_ONNX := $(ARTIFACTS)/resnet50/export.json
RESNET_COST := $(ARTIFACTS)/resnet50/cost.json
PIP_INSTALL = bin/pip install --quiet --disable-pip-version-check
SERVE_ARGS ?=
PYTEST_ARGS ?=

.PHONY: help serve test lint test-export test-serve export standins system-deps clean

# Every target named in a .PHONY line, in the order they appear, with the text after its `## `.
help: ## show this help
	@awk '/^\.PHONY:/ { for (i = 2; i <= NF; i++) if ($$i !~ /\$$/ && !seen[$$i]++) order[++n] = $$i } \
		/^[A-Za-z0-9_.-]+:.*## / { split($$0, parts, ":.*## "); sub(/:.*/, "", parts[1]); text[parts[1]] = parts[2] } \
		END { for (i = 1; i <= n; i++) printf "  make %-22s %s\n", order[i], text[order[i]] }' $(MAKEFILE_LIST)

serve: $(VENV)/serve/.installed export ## export if needed, build the CPU repository, run tritonserver on 127.0.0.1:8000/8001/8002
	$(SERVE_PY) -m kit.server.serve $(SERVE_ARGS)

test: lint test-export test-serve gpu-dry-run ## set everything up, then lint, run the whole test suite against a real tritonserver and rehearse the GPU run on this CPU

lint: $(VENV)/serve/.installed ## ruff lint and format check, and the import layering contracts (pyproject.toml)
	$(VENV)/serve/bin/ruff check .
	$(VENV)/serve/bin/ruff format --check .
	$(VENV)/serve/bin/lint-imports

test-export: $(VENV)/export/.installed ## the export tests, in the export venv
	$(EXPORT_PY) -m pytest tests/export -q $(PYTEST_ARGS)

test-serve: $(VENV)/serve/.installed export $(RADAR_INT8_ONNX) ## the unit and served tests, against a real tritonserver
	$(SERVE_PY) -m pytest tests/unit tests/served -q $(PYTEST_ARGS)

export: $(RADAR_ONNX) $(OCR_ONNX) $(RESNET_COST) export-specs ## export RADAR_MODEL (default: the tiny stand-in), the PP-OCRv4 models and ResNet-50, and the checkpoints of models/*.toml, each validated
.PHONY: export-specs
export-specs: $(VENV)/serve/.installed $(VENV)/export/.installed ## export each checkpoint a spec in models/ names where its export is missing or stale, its steps printed as they run (docs/MODELS.md)
	$(SERVE_PY) -m kit.control.models export

standins: $(VENV)/export/.installed ## generate the tiny and RoBERTa-large-shaped RADAR stand-ins
	$(EXPORT_PY) -m export.standins --size tiny --out $(ARTIFACTS)/checkpoints/radar-tiny
	$(EXPORT_PY) -m export.standins --size large --out $(ARTIFACTS)/checkpoints/radar-large

# Re-export when the source model or the precision changes, not only when the export code does.
RADAR_EXPORT_ARGS = --model $(RADAR_MODEL) --precision $(RADAR_PRECISION) $(RADAR_INT8_GATE)
ifneq ($(shell cat $(ARTIFACTS)/radar/.source 2>/dev/null),$(strip $(RADAR_EXPORT_ARGS)))
.PHONY: $(RADAR_ONNX)
endif
ifeq ($(RADAR_MODEL),$(TINY_RADAR))
$(RADAR_ONNX): $(TINY_RADAR)/config.json
endif
RADAR_EXPORT_CODE := export/text_model.py export/cpu_graphs.py export/accuracy_gate.py export/onnx_validate.py \
	kit/runners/torch_models.py kit/pipelines/text/pipeline.py samples/texts.py
$(RADAR_ONNX): $(RADAR_EXPORT_CODE) | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.text_model $(RADAR_EXPORT_ARGS) --out $(ARTIFACTS)/radar
	echo "$(strip $(RADAR_EXPORT_ARGS))" > $(ARTIFACTS)/radar/.source

$(RADAR_INT8_ONNX): $(TINY_RADAR)/config.json $(RADAR_EXPORT_CODE) | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.text_model --model $(TINY_RADAR) --precision int8 --no-checkpoint --out $(ARTIFACTS)/radar-int8

$(TINY_RADAR)/config.json: export/standins.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.standins --size tiny --out $(TINY_RADAR)

# PP-OCRv4 det/rec/cls ship in the pinned rapidocr-onnxruntime wheel (serve venv); checksummed, rewritten, validated.
$(OCR_ONNX): export/ocr.py export/onnx_validate.py ocr/recognize.py samples/images.py | $(VENV)/serve/.installed
	$(SERVE_PY) -m export.ocr --out $(ARTIFACTS)/ocr

# ResNet-50 for padded mixed-shape batches (RESNET_MODEL, default a random-weight stand-in), then its
# run time per batch and image size on this machine, for the `cost` merge policy.
ifneq ($(shell cat $(ARTIFACTS)/resnet50/.source 2>/dev/null),$(RESNET_MODEL))
.PHONY: $(RESNET_ONNX)
endif
$(RESNET_ONNX): export/resnet.py export/onnx_validate.py kit/runners/torch_models.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.resnet $(if $(RESNET_MODEL),--model $(RESNET_MODEL)) --out $(ARTIFACTS)/resnet50
	echo "$(RESNET_MODEL)" > $(ARTIFACTS)/resnet50/.source

$(RESNET_COST): $(RESNET_ONNX) export/resnet_cost.py | $(VENV)/serve/.installed
	$(SERVE_PY) -m export.resnet_cost --model $(ARTIFACTS)/resnet50/model.onnx --out $@

.PHONY: perf-resnet perf-resnet-quick
perf-resnet: $(VENV)/serve/.installed $(RESNET_COST) ## ResNet-50 on (3, 224±50, 224±50) images, 1-70 clients: no / Triton / Paddle / cost batching (~25 min) -> perf/results/resnet/REPORT.md
	$(SERVE_PY) -m perf sweep --spec resnet --out perf/results/resnet

perf-resnet-quick: $(VENV)/serve/.installed $(RESNET_COST) ## the same four variants at 1, 8 and 32 clients, 10 s windows (~5 min) -> build/perf/results-resnet-quick/REPORT.md
	$(SERVE_PY) -m perf sweep --spec resnet-quick --out build/perf/results-resnet-quick

system-deps: ## Debian packages the embedded server, the door's browser test and the deployment checks need (installed only when missing; needs root)
	@missing=""; \
	command -v $(PYTHON) >/dev/null || missing="$$missing python3.11 python3.11-venv"; \
	[ -e /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 ] || missing="$$missing libpython3.11"; \
	[ -e /usr/lib/x86_64-linux-gnu/libGL.so.1 ] || missing="$$missing libgl1"; \
	[ -e /usr/lib/x86_64-linux-gnu/libgthread-2.0.so.0 ] || missing="$$missing libglib2.0-0"; \
	[ -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || missing="$$missing fonts-wqy-microhei"; \
	[ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ] || missing="$$missing libb64-0d"; \
	[ -e /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	[ -e /usr/bin/promtool ] || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; apt-get update -qq && apt-get install -y -qq $$missing; fi

# Each venv installs the kit editable with its extra (pyproject.toml), constrained by its lock file.
# editable_mode=compat writes a plain path .pth: the Python-backend stub ignores PYTHONPATH and import
# hooks are not needed to find the kit from inside it.
$(VENV)/serve/.installed: pyproject.toml requirements/serve.lock | system-deps
	rm -rf $(VENV)/serve && $(PYTHON) -m venv $(VENV)/serve
	$(VENV)/serve/$(PIP_INSTALL) -c requirements/serve.lock -e '.[serve,dev]' --config-settings editable_mode=compat
	touch $@

$(VENV)/export/.installed: pyproject.toml requirements/export.lock | system-deps
	rm -rf $(VENV)/export && $(PYTHON) -m venv $(VENV)/export
	$(VENV)/export/$(PIP_INSTALL) -c requirements/export.lock -e '.[export]' --config-settings editable_mode=compat
	touch $@

clean: ## remove virtualenvs, exported models and built repositories
	rm -rf $(VENV) $(ARTIFACTS) build

# Performance kit (perf/, docs/PERFORMANCE.md): `python -m perf sweep --spec NAME` runs perf/specs/NAME.json
# on the one engine; a run into perf/results/<workload>/ also regenerates the index perf/RESULTS.md. RADAR runs
# on the RoBERTa-large-shaped stand-in (random weights, real compute per chunk). Each starts its own servers on free ports.
PERF_CHECKPOINT := $(ARTIFACTS)/checkpoints/radar-large
PERF_MODEL := $(ARTIFACTS)/radar-large/export.json

.PHONY: perf perf-quick perf-text-mix perf-sim perf-report

perf: $(VENV)/serve/.installed $(PERF_MODEL) ## full RADAR sweep: kit vs Flask/gunicorn/FastAPI baselines and the offline limit -> perf/results/radar/REPORT.md (~35 min)
	$(SERVE_PY) -m perf sweep --spec full --out perf/results/radar

perf-quick: $(VENV)/serve/.installed $(PERF_MODEL) ## every target once at 16 clients (under 10 min) -> build/perf/results-quick/REPORT.md
	$(SERVE_PY) -m perf sweep --spec quick --out build/perf/results-quick

perf-text-mix: $(VENV)/serve/.installed $(PERF_MODEL) ## RADAR on long and one-chunk texts against their limits, in turns, two windows of chunks in flight (~25 min) -> perf/results/radar/text-mix/REPORT.md
	$(SERVE_PY) -m perf sweep --spec text-mix --out perf/results/radar/text-mix

perf-sim: $(VENV)/serve/.installed $(RADAR_ONNX) $(RESNET_ONNX) ## serving overhead on a simulated H100: every design's CPU per chunk, by process, and what 16 cores could feed (~15 min) -> perf/results/sim-h100/REPORT.md
	$(SERVE_PY) -m perf sweep --spec sim-h100 --out perf/results/sim-h100

perf-report: $(VENV)/serve/.installed ## regenerate every perf/results/*/REPORT.md and perf/RESULTS.md from the committed results.json (no benchmark)
	$(SERVE_PY) -m perf report

$(PERF_CHECKPOINT)/config.json: export/standins.py | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.standins --size large --out $(PERF_CHECKPOINT)

# No PyTorch checkpoint copy (--no-checkpoint): the CPU benchmarks serve the ONNX graphs, and a copy is 1.4 GB. The CPU
# serves the default (fused) graph as `make export` does; --also-int8 adds the gated INT8 graph, which a
# spec's kit, baselines and limit can each name (`graph`). Re-export when the arguments change, as for RADAR_ONNX.
PERF_EXPORT_ARGS = --model $(PERF_CHECKPOINT) --also-int8 --no-checkpoint
ifneq ($(shell cat $(ARTIFACTS)/radar-large/.source 2>/dev/null),$(strip $(PERF_EXPORT_ARGS)))
.PHONY: $(PERF_MODEL)
endif
$(PERF_MODEL): $(PERF_CHECKPOINT)/config.json $(RADAR_EXPORT_CODE) | $(VENV)/export/.installed
	$(EXPORT_PY) -m export.text_model $(PERF_EXPORT_ARGS) --out $(ARTIFACTS)/radar-large
	echo "$(strip $(PERF_EXPORT_ARGS))" > $(ARTIFACTS)/radar-large/.source

# A new version of a text model under load (kit.server.deploy, docs/RELIABILITY.md): NAME=radar VERSION=2
# FROM=DIR, where DIR holds the new export as artifacts/ does (DIR/radar/...); TRITON_ADMIN_KEY where the
# server has one. Loads it beside the serving version, checks its golden set, then retires the old one.
NAME ?= radar
REPOSITORY ?= build/repository/cpu
TRITON_HTTP ?= 127.0.0.1:8000
.PHONY: deploy-model
deploy-model: $(VENV)/serve/.installed ## load VERSION of NAME from the export in FROM into the running server, check it, then retire the old one
	$(SERVE_PY) -m kit.server.deploy $(NAME) --version $(VERSION) --artifacts $(FROM) --repository $(REPOSITORY) --url $(TRITON_HTTP)

# GPU deployment (docs/GPU.md): built and checked offline here, run on a GPU host. TRITON_RELEASE is the
# Triton container release (24.10 = tritonserver 2.51.0, the embedded server's version), exported to
# docker-compose.yml, whose own default is the same; tests/unit/test_deploy_files.py keeps the
# Dockerfiles and deploy/k8s on it.
TRITON_RELEASE ?= 24.10
export TRITON_RELEASE
GPU_REPOSITORY := build/repository/gpu
# export.tensorrt runs here by default, and refuses (exit 2) without TensorRT; on a GPU host,
# TRT_RUN="docker compose --profile tools run --rm tensorrt" runs it with the serving release's TensorRT.
TRT_RUN ?= $(SERVE_PY) -m export.tensorrt

.PHONY: repository-gpu compose-config tensorrt deploy-deps

repository-gpu: $(VENV)/serve/.installed export ## build the GPU repository in build/repository/gpu (hard links, not symlinks: mountable, uploadable)
	$(SERVE_PY) -m kit.control.repository build --profile gpu --out $(GPU_REPOSITORY).links
	rm -rf $(GPU_REPOSITORY)
	cp -rL --link $(GPU_REPOSITORY).links $(GPU_REPOSITORY) 2>/dev/null \
		|| { rm -rf $(GPU_REPOSITORY); cp -rL $(GPU_REPOSITORY).links $(GPU_REPOSITORY); }
	rm -rf $(GPU_REPOSITORY).links

compose-config: deploy-deps ## validate docker-compose.yml offline (no Docker engine needed)
	docker-compose -f docker-compose.yml config -q

tensorrt: $(VENV)/serve/.installed $(RADAR_ONNX) ## build RADAR's TensorRT engine with an FP16 accuracy check (GPU + TensorRT 10.5: see TRT_RUN)
	$(TRT_RUN) --onnx $(ARTIFACTS)/radar/model.onnx --out $(ARTIFACTS)/radar/model.plan \
		$$($(SERVE_PY) -m kit.control.repository trt-shapes radar_classifier) \
		--int-high $$($(SERVE_PY) -c 'from tokenizers import Tokenizer; print(Tokenizer.from_file("$(ARTIFACTS)/radar/tokenizer.json").get_vocab_size())')

deploy-deps: ## Debian's docker-compose, to validate docker-compose.yml offline (installed only when missing; needs root)
	@command -v docker-compose >/dev/null || { echo "installing: docker-compose"; apt-get update -qq && apt-get install -y -qq docker-compose; }

# The prometheus-operator CRD schemas for tests/unit/test_k8s.py, as pinned by deploy/k8s/crd-check's npm lock.
CRD_CHECK := build/crd-check

# tests/unit/test_deploy_files.py runs docker-compose, tests/unit/test_k8s.py the CRD check: `make test` installs both first.
test-serve: deploy-deps $(CRD_CHECK)/.installed

$(CRD_CHECK)/.installed: deploy/k8s/crd-check/package.json deploy/k8s/crd-check/package-lock.json deploy/k8s/crd-check/validate.mjs | system-deps
	rm -rf $(CRD_CHECK) && mkdir -p $(CRD_CHECK) && cp deploy/k8s/crd-check/* $(CRD_CHECK)/
	cd $(CRD_CHECK) && npm ci --no-audit --no-fund --silent
	touch $@

# Reliability (perf/RELIABILITY.md): longer runs of the peak, soak, fuzz and chaos tests that `make test`
# runs briefly. Loopback only, bounded in count and time; each prints its figures and writes
# build/reliability/*.json.
.PHONY: soak peak fuzz chaos
CHAOS_SECONDS ?= 1200

soak: $(VENV)/serve/.installed export ## 10-minute soak of the kit, then of the Flask baseline: RSS slope after warm-up
	KIT_SOAK_SECONDS=600 $(SERVE_PY) -m pytest tests/served/test_soak.py -q -s $(PYTEST_ARGS)

peak: $(VENV)/serve/.installed export ## 4,000 requests at once per protocol, past radar's queue bound of 2,048
	$(SERVE_PY) -m kit.server.reply_buffer
	KIT_PEAK_REQUESTS=4000 $(SERVE_PY) -m pytest tests/served/test_peak.py -q -s $(PYTEST_ARGS)

fuzz: $(VENV)/serve/.installed export ## 5,000 malformed requests per protocol against a server of its own
	KIT_FUZZ_CASES=5000 $(SERVE_PY) -m pytest tests/served/test_fuzz.py -q -s $(PYTEST_ARGS)

chaos: $(VENV)/serve/.installed export ## 20 minutes (CHAOS_SECONDS) of faults under load: 64 clients, a fault every 20-60 s, every answer checked -> build/reliability/chaos.{json,md}
	$(SERVE_PY) -m perf chaos --seconds $(CHAOS_SECONDS) --out build/reliability/chaos.json

# OCR in the performance kit (perf/specs/ocr*.json): the kit's `ocr` against FastAPI + uvicorn on the
# same pipeline and PP-OCRv4 models, and the in-process limit; `make perf` is the RADAR sweep.
.PHONY: perf-ocr perf-ocr-quick perf-ocr-rendered perf-int8-graphs

perf-ocr: $(VENV)/serve/.installed $(OCR_ONNX) ## OCR sweep: kit vs FastAPI + uvicorn (1/2/4 workers) and the in-process limit, 1-32 clients -> perf/results/ocr/REPORT.md (6-10 min)
	$(SERVE_PY) -m perf sweep --spec ocr --out perf/results/ocr

perf-ocr-quick: $(VENV)/serve/.installed $(OCR_ONNX) ## OCR: the kit and uvicorn once at 8 clients (under 5 min) -> build/perf/results-ocr-quick/REPORT.md
	$(SERVE_PY) -m perf sweep --spec ocr-quick --out build/perf/results-ocr-quick

perf-int8-graphs: $(VENV)/serve/.installed $(OCR_ONNX) $(RESNET_ONNX) system-deps ## INT8 (dynamic, static QDQ) of the OCR recogniser and detector and ResNet-50: texts kept, time ratios (~10 min) -> perf/results/int8/graphs.json
	$(SERVE_PY) -m export.int8_graphs --rendered 1 --out perf/results/int8/graphs.json

perf-ocr-rendered: $(VENV)/serve/.installed $(OCR_ONNX) system-deps ## OCR served at 8 clients on rendered pages, committed sizing vs RapidOCR's side by side -> perf/results/ocr/rendered/REPORT.md (10 min)
	$(SERVE_PY) -m perf sweep --spec ocr-rendered --out perf/results/ocr/rendered

# The GPU run (docs/GPU.md): one device call runs `bash deploy/gpu_host/run.sh` on the GPU host with the carry that
# gpu-carry builds in .gpu/ (ignored): the perf spec `gpu` on the engine. gpu-dry-run runs the same script and code
# on this CPU (the spec `gpu-quick`: the first call's targets, steps and goals on tiny models, the PyTorch runner in
# FP32), and fails when any step failed or was skipped or no profiler trace came back: `make test` runs it, so that
# the GPU path cannot rot between the rare runs on a GPU host. .venv/gpu stands for the host's Python: the `gpu`
# extra's packages, without the kit installed and without what the carry brings.
GPU_PYTHON_VERSION ?= 3.12
GPU_CARRY := .gpu
GPU_DRY := build/gpu-dry-run
GPU_REQUIREMENTS = $(shell $(PYTHON) -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["gpu"]))')
LOCAL_PYTHON_VERSION = $(shell $(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

.PHONY: gpu-carry gpu-dry-run

gpu-carry: ## the GPU host's carry in .gpu/: tritonserver repacked and the wheels it lacks (GPU_PYTHON_VERSION); prints its size
	$(PYTHON) -m deploy.gpu_host.carry --python $(GPU_PYTHON_VERSION) --out $(GPU_CARRY)

gpu-dry-run: $(VENV)/gpu/.installed ## deploy/gpu_host/run.sh on this CPU: the first GPU call on tiny models in FP32 (a few minutes) -> build/gpu-dry-run/
	$(PYTHON) -m deploy.gpu_host.carry --python $(LOCAL_PYTHON_VERSION) --out $(GPU_DRY)-carry
	rm -rf $(GPU_DRY)
	GPU_PYTHON=$(VENV)/gpu/bin/python GPU_CARRY=$(GPU_DRY)-carry GPU_WORK=$(GPU_DRY)-work GPU_SPEC=gpu-quick GPU_DEVICE=cpu \
		GPU_BUDGET_S=900 OUT=$(GPU_DRY) bash deploy/gpu_host/run.sh
	tar -tzf $(GPU_DRY)/results.tar.gz | grep -q 'trace\.json\.gz$$' || { echo "gpu-dry-run: no profiler trace came back" >&2; exit 1; }

$(VENV)/gpu/.installed: pyproject.toml requirements/gpu.lock
	rm -rf $(VENV)/gpu && $(PYTHON) -m venv $(VENV)/gpu
	$(VENV)/gpu/$(PIP_INSTALL) -c requirements/gpu.lock $(GPU_REQUIREMENTS)
	touch $@

# The front door's cost (docs/DOOR.md): RADAR through the door and straight to Triton's gRPC port, in turns; the
# RoBERTa-large-shaped stand-in at 16 and 64 clients, the tiny one at 1 (perf/specs/door-overhead.json).
.PHONY: door-overhead
door-overhead: $(VENV)/serve/.installed $(PERF_MODEL) $(RADAR_ONNX) ## door vs direct gRPC on RADAR, in turns (~12 min) -> perf/results/door/REPORT.md
	$(SERVE_PY) -m perf sweep --spec door-overhead --out perf/results/door
