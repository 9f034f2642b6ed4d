#!/usr/bin/env bash
# The GPU run (docs/GPU.md) in one device call, from the repository's root:
#
#   bash deploy/gpu_host/run.sh          # on the GPU host, with carry [".gpu"] (make gpu-carry), results into $OUT
#
# Unpacks the repacked tritonserver (with Python's tarfile: the host may have no xz), installs the carried wheels
# into folders, makes an overlay virtualenv whose python3 sees them, the host's packages and this tree (the
# Python-backend stub takes its packages from the first python3 on PATH), checks that the stub finds its libpython
# (given to the server's processes alone, through KIT_STUB_LIBRARY_PATH), that this Python imports what the run
# needs, that CUDA is there (unless GPU_DEVICE=cpu) and that the stubs' numpy 1.x works with the host's torch. Then
# it generates the models the spec serves where they are served (deploy.gpu_host.models) and runs the spec GPU_SPEC
# (default perf/specs/gpu.json, the first call: RADAR alone; gpu-resnet.json is the second's) on the engine,
# `python -m perf sweep`, against a deadline counted from this script's start; the sweep skips and records what no
# longer fits and exits non-zero when a step failed or was skipped. The device returns at most 8 files of 16 MiB:
# $OUT gets run.log, the suite's REPORT.md, each part's report as <part>.md and everything (results.json, CSVs,
# plots, the servers' logs, the runners' torch.profiler traces while they fit) in results.tar.gz. The host has no
# git: the commit comes from the carry's manifest. KIT_TRACE_DIR= (empty) turns the traces off.
#
# The CPU rehearsal (make gpu-dry-run) runs this same script with: GPU_PYTHON (the host's python3), GPU_CARRY (the
# carried folder), GPU_WORK (scratch), GPU_SPEC=gpu-quick, GPU_DEVICE=cpu and GPU_BUDGET_S (seconds).
set -euo pipefail
START=$(date +%s)
ROOT=$(pwd)
PY=${GPU_PYTHON:-python3}
CARRY=$(realpath "${GPU_CARRY:-.gpu}")
WORK=$(realpath -m "${GPU_WORK:-/tmp/kit-gpu}")
OUT=$(realpath -m "${OUT:?set OUT to the folder for the results}")
SPEC=${GPU_SPEC:-gpu}
DEVICE=${GPU_DEVICE:-cuda}
DEADLINE=$((START + ${GPU_BUDGET_S:-540}))
MODELS="$ROOT/build/gpu/models"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1

fail() { echo "run.sh: $*" >&2; exit 3; }
VERSION=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
TARBALL="$CARRY/tritonserver-py$VERSION.tar.xz"
[ -f "$TARBALL" ] || fail "no $TARBALL: the carry was built for another Python (make gpu-carry GPU_PYTHON_VERSION=$VERSION)"
echo "run.sh: python $VERSION ($("$PY" -c 'import sys; print(sys.executable)')), carry $CARRY, work $WORK, spec $SPEC on $DEVICE"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

rm -rf "$WORK" && mkdir -p "$WORK/server"
"$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' "$TARBALL" "$WORK/server"
KIT_COMMIT=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("commit", ""))' "$CARRY/MANIFEST.json")
export KIT_COMMIT
export KIT_TRITON_DIST="$WORK/server/pytriton/tritonserver" KIT_STUB_SITE="$WORK/stub-wheels"
for folder in wheels stub-wheels; do
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/$folder" "$CARRY/$folder"/*.whl
done

# The overlay: this tree first, then the carried wheels (they shadow older host copies), then the host's packages;
# in the stub processes alone (a line added below), the stub's numpy 1.x before all (the 2.51 stub reads numpy 2
# arrays wrongly).
"$PY" -m venv --without-pip "$WORK/venv"
VPY="$WORK/venv/bin/python3"
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
{
  echo "$ROOT"
  echo "import site; site.addsitedir('$WORK/wheels')"
  "$PY" -c 'import site; print("\n".join(f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()))'
} >"$SITE/_kit_gpu.pth"

LIBDIR=$("$VPY" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
LIBPYTHON="libpython$VERSION.so.1.0"
if [ ! -e "$LIBDIR/$LIBPYTHON" ]; then
  FOUND=$(find /usr /opt /root -name "$LIBPYTHON" -print -quit 2>/dev/null || true)
  if [ -z "$FOUND" ]; then
    echo "run.sh: what this host has instead (for the next carry):"
    find / -xdev -name 'libpython3*' 2>/dev/null | head -20
    "$PY" -c 'import sys, sysconfig; print(sys.executable, sys.base_prefix, sysconfig.get_config_var("Py_ENABLE_SHARED"))'
    fail "$LIBPYTHON is not under $LIBDIR nor /usr, /opt, /root: the Python-backend stub cannot start"
  fi
  LIBDIR=$(dirname "$FOUND")
fi
# Only the server's processes get it (kit.server.runtime.server_env), and only libpython: a folder holding that one
# link, not the system's library folder, whose CUDA libraries (cuDNN, NCCL) would shadow the ones torch brings in the
# stubs that run it.
mkdir -p "$WORK/libpython"
ln -sf "$LIBDIR/$LIBPYTHON" "$WORK/libpython/$LIBPYTHON"
export KIT_STUB_LIBRARY_PATH="$WORK/libpython"
for binary in bin/tritonserver backends/python/libtriton_python.so "python_backend_stubs/$VERSION/triton_python_backend_stub"; do
  MISSING=$(LD_LIBRARY_PATH="$KIT_STUB_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$KIT_TRITON_DIST/$binary" | grep "not found" || true)
  [ -z "$MISSING" ] || fail "$binary misses libraries: $MISSING"
done
echo "run.sh: the stub finds $LIBDIR/$LIBPYTHON"

DEVICE=$DEVICE "$VPY" - <<'EOF' || fail "this Python cannot run the measurement (see above)"
import importlib, os, sys
for name in ("numpy", "torch", "transformers", "tokenizers", "onnxscript", "tritonclient.grpc", "fastapi", "flask",
             "uvicorn", "aiohttp", "pynvml", "matplotlib", "onnxruntime", "kit.runners.torch", "deploy.gpu_host.models",
             "perf.__main__"):
    module = importlib.import_module(name)
    print(f"  {name:<22} {getattr(module, '__version__', '-'):<14} {module.__file__}")
import numpy, torch
print(f"run.sh: numpy {numpy.__version__}; torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
if os.environ["DEVICE"] == "cuda" and not torch.cuda.is_available():
    sys.exit("run.sh: torch sees no CUDA device: nothing would run on the GPU (GPU_DEVICE=cpu rehearses on the CPU)")
EOF
# What a stub process sees: the carried numpy 1.x under the host's packages. Those that fail to import under it
# (built for numpy 2; transformers imports some whenever they are installed) are hidden from the stubs.
"$VPY" -m deploy.gpu_host.stub_imports --stub-site "$WORK/stub-wheels" --out "$WORK/stub-hidden.json" \
  || fail "the stubs cannot import the kit's models under the stubs' numpy (see above)"
STUB_PATH="import os, sys; os.path.basename(os.readlink('/proc/self/exe')) == 'triton_python_backend_stub'"
echo "$STUB_PATH and (sys.path.insert(0, '$WORK/stub-wheels'), sys.modules.update(dict.fromkeys($(cat "$WORK/stub-hidden.json"))))" \
  >>"$SITE/_kit_gpu.pth"

TINY=()
[ "$SPEC" = "gpu-quick" ] && TINY=(--tiny)
OVERRIDE='{}'
[ "$DEVICE" = "cpu" ] && OVERRIDE='{"placement": {"device": "cpu", "dtype": "fp32"}}'
SERVED=$("$VPY" -c 'import sys; from perf.engine.spec import load_spec
print(*sorted({part["model"].rsplit("/", 1)[-1] for part in load_spec(sys.argv[1])["suite"].values()}))' "$SPEC")
rm -rf "$MODELS"
# shellcheck disable=SC2086
"$VPY" -m deploy.gpu_host.models --out "$MODELS" --device "$DEVICE" "${TINY[@]}" --models $SERVED
# The PyTorch runner's stubs write the traces a kit variant asks for (profile_executions) here, inside the results.
export KIT_TRACE_DIR=${KIT_TRACE_DIR-$WORK/results/traces}
echo "run.sh: set up in $(($(date +%s) - START)) s"
STATUS=0
# GPU_SWEEP_ARGS: more of the sweep's options, e.g. "--families kit" to measure again only what failed.
# shellcheck disable=SC2086
"$VPY" -m perf sweep --spec "$SPEC" --deadline "$DEADLINE" --override "$OVERRIDE" --out "$WORK/results" --work "$WORK/perf" \
  ${GPU_SWEEP_ARGS:-} || STATUS=$?

# A server that did not start says why in its log, which stays on the host: its errors go to run.log, its log into
# the pack.
if [ "$STATUS" != 0 ]; then
  find "$WORK/perf" -name server.log -print0 2>/dev/null | while IFS= read -r -d '' log; do
    grep -qE "^E[0-9]|error|Error" "$log" || continue
    echo "run.sh: $log"; grep -E "^E[0-9]|rror|Traceback|exception" "$log" | tail -15
  done
fi
# At most 8 files of 16 MiB come back: the index, each part's report beside it, and everything else packed (the
# servers' logs too), the traces last and only while the pack stays a MiB under the limit.
cp "$WORK/results/REPORT.md" "$OUT/REPORT.md" 2>/dev/null || echo "run.sh: the sweep wrote no index"
for report in "$WORK"/results/*/REPORT.md; do
  [ -f "$report" ] && cp "$report" "$OUT/$(basename "$(dirname "$report")").md"
done
[ -d "$WORK/results" ] && "$PY" - "$OUT/results.tar.gz" "$WORK/results" "$WORK/perf" <<'EOF'
import os, sys, tarfile
from pathlib import Path
TRACE, ROOM = ".trace.json.gz", 15 * 2**20
with tarfile.open(sys.argv[1], "w:gz") as pack:
    pack.add(sys.argv[2], arcname="results", filter=lambda member: None if member.name.endswith(TRACE) else member)
    for log in Path(sys.argv[3]).rglob("server.log"):
        pack.add(log, arcname=f"logs/{log.relative_to(sys.argv[3])}")
    for trace in sorted(Path(sys.argv[2]).rglob(f"*{TRACE}")):
        if os.path.getsize(sys.argv[1]) + trace.stat().st_size > ROOM:
            print(f"run.sh: {trace.name} ({trace.stat().st_size} bytes) left out: the pack would pass 16 MiB")
            continue
        pack.add(trace, arcname=f"results/{trace.relative_to(sys.argv[2])}")
EOF
echo "run.sh: done in $(($(date +%s) - START)) s, sweep exit status $STATUS"
exit "$STATUS"
