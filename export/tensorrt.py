"""ONNX -> TensorRT engine (`model.plan`) for Triton's TensorRT backend, checked against ONNX Runtime.

    python -m export.tensorrt --onnx artifacts/radar/model.onnx --out artifacts/radar/model.plan \\
        --profile-shapes input_ids:1x1,attention_mask:1x1 input_ids:32x128,attention_mask:32x128 \\
                         input_ids:32x512,attention_mask:32x512 --int-high 50265

Each `--profile-shapes MIN OPT MAX` (trtexec syntax, batch dimension first) adds one optimisation
profile; `make tensorrt` takes them from the GPU profile (`python -m kit.control.repository trt-shapes
MODEL`), so that the engine covers batch sizes 1..max_batch_size and the lengths the server sends.
The engine then runs on every profile's min, opt and max shapes beside ONNX Runtime (FP32, CPU) on
the same random inputs, and is refused (exit 1, nothing written) when the largest difference
exceeds --atol. A report (`<out>.json`) records the build time, engine size, the GPU memory its
activations need and the difference measured.

An engine loads only in the TensorRT version that built it, on the GPU architecture it was built
on: build it with Triton 24.10's TensorRT (10.5) on the serving GPU. The TensorRT Python API builds
it and Polygraphy runs it for the check, so trtexec alone is not enough; without them this exits 2
and says what to install.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

SERVING_TENSORRT = "10.5"  # the TensorRT inside the Triton 24.10 container
INSTALL_HINT = (
    f"install the TensorRT the serving container uses, on a machine with an NVIDIA GPU and driver: "
    f"`pip install tensorrt=={SERVING_TENSORRT}.0 polygraphy==0.49.14`, or run this in the TensorRT "
    f"container: `docker compose --profile tools run --rm tensorrt ...` (see docs/GPU.md)"
)
ORT_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}

Profile = dict[str, tuple[list[int], list[int], list[int]]]


class SetupError(Exception):
    """This cannot run here (no TensorRT, wrong version, bad arguments): exit 2."""


class AccuracyError(Exception):
    """The engine's outputs differ from ONNX Runtime's by more than the tolerance: exit 1."""


def parse_shapes(text: str) -> dict[str, list[int]]:
    """`input_ids:1x48,attention_mask:1x48` -> {"input_ids": [1, 48], "attention_mask": [1, 48]}."""
    shapes = {}
    for item in text.split(","):
        name, _, dims = item.rpartition(":")
        try:
            shapes[name] = [int(d) for d in dims.split("x")]
        except ValueError:
            raise SetupError(f"bad shape {item!r}: expected NAME:DIMxDIM...") from None
        if not name or min(shapes[name]) < 1:
            raise SetupError(f"bad shape {item!r}: expected NAME:DIMxDIM... with every dim >= 1")
    return shapes


def parse_profile(low: str, opt: str, high: str) -> Profile:
    points = [parse_shapes(low), parse_shapes(opt), parse_shapes(high)]
    if not points[0].keys() == points[1].keys() == points[2].keys():
        raise SetupError(f"min, opt and max name different inputs: {low} / {opt} / {high}")
    profile = {}
    for name in points[0]:
        a, b, c = (p[name] for p in points)
        if not len(a) == len(b) == len(c) or any(not x <= y <= z for x, y, z in zip(a, b, c)):
            raise SetupError(f"{name}: need min <= opt <= max with equal ranks, got {a} / {b} / {c}")
        profile[name] = (a, b, c)
    return profile


def require_tensorrt(any_version: bool):
    """The TensorRT Python API builds the engine; Polygraphy runs it for the accuracy check."""
    missing = [name for name in ("tensorrt", "polygraphy") if importlib.util.find_spec(name) is None]
    if missing:
        raise SetupError(f"TensorRT is not installed here (no {' and no '.join(missing)} module): {INSTALL_HINT}")
    import tensorrt as trt

    if not any_version and not trt.__version__.startswith(SERVING_TENSORRT + "."):
        raise SetupError(
            f"TensorRT {trt.__version__} would build an engine that Triton 24.10 (TensorRT {SERVING_TENSORRT}) "
            f"cannot load; {INSTALL_HINT}, or pass --any-tensorrt for another server release"
        )
    return trt


def build_engine(trt, onnx_path: Path, profiles: list[Profile], fp16: bool, workspace: int) -> bytes:
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):  # also finds external weights beside the file
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise SetupError(f"TensorRT cannot parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    for profile in profiles:
        optimisation = builder.create_optimization_profile()
        for name, (low, opt, high) in profile.items():
            optimisation.set_shape(name, low, opt, high)
        config.add_optimization_profile(optimisation)
    engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise SetupError("TensorRT could not build the engine (see its log above)")
    return bytes(engine)


def needs_int_high(tensor) -> bool:
    """Integer inputs that are not masks (token ids) need a range the model accepts."""
    return tensor.type in ("tensor(int64)", "tensor(int32)") and "mask" not in tensor.name


def random_feeds(session: ort.InferenceSession, shapes: dict[str, list[int]], rng, int_high: int | None) -> dict:
    """Masks are all ones; other integers are drawn below --int-high (token ids: the vocabulary size)."""
    feeds = {}
    for tensor in session.get_inputs():
        dtype, shape = ORT_DTYPES[tensor.type], shapes[tensor.name]
        if np.issubdtype(dtype, np.floating):
            feeds[tensor.name] = rng.random(shape).astype(dtype)
        elif needs_int_high(tensor):
            feeds[tensor.name] = rng.integers(0, int_high, shape).astype(dtype)
        elif dtype == np.uint8:
            feeds[tensor.name] = rng.integers(0, 256, shape).astype(dtype)
        else:
            feeds[tensor.name] = np.ones(shape, dtype)
    return feeds


def max_abs_diff(engine, session: ort.InferenceSession, profiles: list[Profile], int_high: int | None) -> float:
    """The largest output difference over every profile's min, opt and max shapes (inf for NaN)."""
    from polygraphy.backend.trt import TrtRunner

    rng = np.random.default_rng(0)
    names = [o.name for o in session.get_outputs()]
    worst = 0.0
    for index, profile in enumerate(profiles):
        with TrtRunner(engine, optimization_profile=index) as runner:
            for point in range(3):
                feeds = random_feeds(session, {name: dims[point] for name, dims in profile.items()}, rng, int_high)
                got = runner.infer(feeds)
                for name, want in zip(names, session.run(names, feeds)):
                    diff = float(np.abs(np.asarray(got[name], np.float64) - want).max())
                    worst = max(worst, diff if np.isfinite(diff) else float("inf"))
    return worst


def export(args: argparse.Namespace) -> dict:
    if not args.onnx.is_file():
        raise SetupError(f"{args.onnx} does not exist; run `make export` first")
    profiles = [parse_profile(*p) for p in args.profile_shapes]
    trt = require_tensorrt(args.any_tensorrt)
    session = ort.InferenceSession(str(args.onnx), providers=["CPUExecutionProvider"])
    inputs = {t.name: t for t in session.get_inputs()}
    for profile in profiles:
        if profile.keys() != inputs.keys():
            raise SetupError(f"a profile names {sorted(profile)}, the model's inputs are {sorted(inputs)}")
    if args.int_high is None and any(needs_int_high(t) for t in inputs.values()):
        raise SetupError("the model has integer inputs: give --int-high (for token ids, the vocabulary size)")
    start = time.monotonic()
    serialized = build_engine(trt, args.onnx, profiles, args.precision == "fp16", args.workspace_bytes)
    build_seconds = time.monotonic() - start
    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(serialized)
    diff = max_abs_diff(engine, session, profiles, args.int_high)
    if not diff <= args.atol:
        raise AccuracyError(f"{args.precision} engine differs from ONNX Runtime by {diff:.3g} > atol {args.atol}; not written")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(serialized)
    report = {
        "onnx": str(args.onnx),
        "tensorrt": trt.__version__,
        "precision": args.precision,
        "profiles": args.profile_shapes,
        "build_seconds": round(build_seconds, 1),
        "engine_bytes": len(serialized),
        "activation_bytes": int(
            engine.device_memory_size_v2 if hasattr(engine, "device_memory_size_v2") else engine.device_memory_size
        ),
        "max_abs_diff": diff,
        "atol": args.atol,
    }
    Path(f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--onnx", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile-shapes", nargs=3, action="append", required=True, metavar=("MIN", "OPT", "MAX"))
    parser.add_argument("--precision", choices=["fp16", "fp32"], default="fp16")
    parser.add_argument("--atol", type=float, default=1e-2, help="largest accepted output difference (default 1e-2)")
    parser.add_argument("--int-high", type=int, help="integer inputs other than masks are drawn from [0, N)")
    parser.add_argument("--workspace-bytes", type=int, default=2 * 2**30)
    parser.add_argument("--any-tensorrt", action="store_true", help="allow a TensorRT other than the server's")
    args = parser.parse_args(argv)
    try:
        report = export(args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except AccuracyError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
