"""Prepare the PP-OCRv4 detector, recogniser and angle classifier for Triton.

The models are the ONNX files that ship in the pinned `rapidocr-onnxruntime` package (checked
against the SHA-256 sums below), or a user's own PaddleOCR inference models converted with
paddle2onnx. Each graph is rewritten only at its edges, and checked against the original:

- every tensor gets a readable name and named axes (`image`, `prob_map`, `batch_size`, ...);
- `det` takes the uint8 BGR picture [batch, height, width, 3] and normalises inside the graph, so
  a quarter of the bytes cross the Python backend's shared memory (max abs diff reported);
- `rec` ends in ArgMax + ReduceMax over the character axis: the full softmax holds every class at
  every time step, what CTC decoding needs is 2 numbers per time step. The decoded texts must be identical
  to the original graph's on sample crops, or the export fails.

Writes det/model.onnx, cls/model.onnx, rec/model.onnx, rec/characters.txt and export.json.

    python -m export.ocr --out artifacts/ocr
    python -m export.ocr --out artifacts/ocr --paddle-rec my_rec_infer/ --rec-dict my_dict.txt
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from export.onnx_validate import TensorSpec, ValidationError, check_signature, sha256

PACKAGE = "rapidocr_onnxruntime"
PACKAGE_VERSION = "1.4.4"
SOURCES = {
    "det": ("ch_PP-OCRv4_det_infer.onnx", "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    "rec": ("ch_PP-OCRv4_rec_infer.onnx", "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
    "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
}
DET_ATOL = 1e-4
CLS_ATOL = 1e-5
PADDLE_OPSET = 14

F32, U8, I64 = np.dtype("float32"), np.dtype("uint8"), np.dtype("int64")
SIGNATURES = {
    "det": (
        [TensorSpec("image", U8, ("batch_size", "height", "width", 3))],
        [TensorSpec("prob_map", F32, ("batch_size", 1, "height", "width"))],
    ),
    "cls": ([TensorSpec("image", F32, ("batch_size", 3, 48, 192))], [TensorSpec("probs", F32, ("batch_size", 2))]),
    "rec": (
        [TensorSpec("image", F32, ("batch_size", 3, 48, "width"))],
        [TensorSpec("char_indices", I64, ("batch_size", "steps")), TensorSpec("char_probs", F32, ("batch_size", "steps"))],
    ),
}


class ExportError(Exception):
    """The source models are missing, altered, or the rewritten graph differs from them."""


def package_models() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ExportError(f"{PACKAGE}=={PACKAGE_VERSION} is not installed in this Python (it is in the serve venv)")
    version = importlib.metadata.version(PACKAGE.replace("_", "-"))
    if version != PACKAGE_VERSION:
        raise ExportError(f"{PACKAGE} is {version}; the checksums here are for {PACKAGE_VERSION}")
    return Path(spec.origin).parent / "models"


def verified_source(kind: str) -> Path:
    name, expected = SOURCES[kind]
    path = package_models() / name
    if not path.is_file():
        raise ExportError(f"{path} is missing from the installed {PACKAGE}")
    actual = sha256(path)
    if actual != expected:
        raise ExportError(f"{path} has SHA-256 {actual}, expected {expected}: not the pinned model")
    return path


def paddle_to_onnx(model_dir: Path, out: Path) -> Path:
    """Convert a PaddleOCR inference model (inference.pdmodel + .pdiparams) with paddle2onnx."""
    tool = shutil.which("paddle2onnx")
    if tool is None:
        raise ExportError(
            "paddle2onnx is not on PATH: `pip install paddlepaddle paddle2onnx` where you run this "
            "(they are not in the kit's virtualenvs)"
        )
    for name in ("inference.pdmodel", "inference.pdiparams"):
        if not (model_dir / name).is_file():
            raise ExportError(f"{model_dir} is not a PaddleOCR inference model: no {name}")
    subprocess.run(
        [
            tool,
            "--model_dir",
            str(model_dir),
            "--model_filename",
            "inference.pdmodel",
            "--params_filename",
            "inference.pdiparams",
            "--save_file",
            str(out),
            "--opset_version",
            str(PADDLE_OPSET),
        ],
        check=True,
    )
    return out


def rename_value(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    for value in list(graph.input) + list(graph.output):
        if value.name == old:
            value.name = new


def name_axes(value: onnx.ValueInfoProto, dims: tuple) -> None:
    shape = value.type.tensor_type.shape
    del shape.dim[:]
    for dim in dims:
        entry = shape.dim.add()
        if isinstance(dim, str):
            entry.dim_param = dim
        else:
            entry.dim_value = dim


def opset_of(model: onnx.ModelProto) -> int:
    return next(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))


def rewrite_det(model: onnx.ModelProto) -> onnx.ModelProto:
    """uint8 NHWC in, normalise in the graph: (x / 255 - 0.5) / 0.5 as PaddleOCR's DetPreProcess does."""
    graph = model.graph
    old_input, old_output = graph.input[0].name, graph.output[0].name
    rename_value(graph, old_output, "prob_map")
    graph.initializer.extend(
        [
            helper.make_tensor("image_scale", TensorProto.FLOAT, [], [1 / 255.0]),
            helper.make_tensor("image_half", TensorProto.FLOAT, [], [0.5]),
        ]
    )
    prologue = [
        helper.make_node("Cast", ["image"], ["image_f32"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["image_f32"], ["image_nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Mul", ["image_nchw", "image_scale"], ["image_unit"]),
        helper.make_node("Sub", ["image_unit", "image_half"], ["image_centred"]),
        helper.make_node("Div", ["image_centred", "image_half"], [old_input]),
    ]
    nodes = prologue + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input[0].CopyFrom(helper.make_tensor_value_info("image", TensorProto.UINT8, None))
    name_axes(graph.input[0], SIGNATURES["det"][0][0].dims)
    name_axes(graph.output[0], SIGNATURES["det"][1][0].dims)
    return model


def rewrite_cls(model: onnx.ModelProto) -> onnx.ModelProto:
    graph = model.graph
    rename_value(graph, graph.input[0].name, "image")
    rename_value(graph, graph.output[0].name, "probs")
    name_axes(graph.input[0], SIGNATURES["cls"][0][0].dims)
    name_axes(graph.output[0], SIGNATURES["cls"][1][0].dims)
    return model


def rewrite_rec(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace the softmax output [batch, steps, classes] by its argmax and max over classes."""
    graph = model.graph
    rename_value(graph, graph.input[0].name, "image")
    softmax = graph.output[0].name
    if opset_of(model) >= 18:
        graph.initializer.append(helper.make_tensor("class_axis", TensorProto.INT64, [1], [2]))
        reduce = helper.make_node("ReduceMax", [softmax, "class_axis"], ["char_probs"], keepdims=0)
    else:
        reduce = helper.make_node("ReduceMax", [softmax], ["char_probs"], axes=[2], keepdims=0)
    graph.node.extend([helper.make_node("ArgMax", [softmax], ["char_indices"], axis=2, keepdims=0), reduce])
    del graph.output[:]
    graph.output.extend(
        [
            helper.make_tensor_value_info("char_indices", TensorProto.INT64, None),
            helper.make_tensor_value_info("char_probs", TensorProto.FLOAT, None),
        ]
    )
    name_axes(graph.input[0], SIGNATURES["rec"][0][0].dims)
    for value, spec in zip(graph.output, SIGNATURES["rec"][1]):
        name_axes(value, spec.dims)
    return model


REWRITES = {"det": rewrite_det, "cls": rewrite_cls, "rec": rewrite_rec}


def session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def sample_crops() -> list[np.ndarray]:
    """Printed lines of the synthetic pages (Chinese, English, digits), at several heights."""
    from samples.images import PHRASES, text_line

    return [np.asarray(text_line(text, height))[:, :, ::-1] for text in PHRASES for height in (32, 48, 64)]


def sample_page() -> np.ndarray:
    import cv2

    from samples.images import document

    page = cv2.imdecode(np.frombuffer(document(3, width=800).data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.resize(page, (800, 736))


def validate_det(source: Path, target: Path) -> dict:
    page = sample_page()[None]
    normalised = ((page.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2)
    (want,) = session(source).run(None, {session(source).get_inputs()[0].name: normalised})
    (got,) = session(target).run(["prob_map"], {"image": page})
    diff = float(np.max(np.abs(got - want)))
    if not diff <= DET_ATOL:
        raise ValidationError(f"det: rewritten graph differs by {diff:.3g} (max abs), above {DET_ATOL:g}")
    return {"max_abs_diff": diff, "atol": DET_ATOL, "input_shape": list(page.shape)}


def validate_cls(source: Path, target: Path) -> dict:
    from ocr.recognize import cls_batch

    batch = cls_batch(sample_crops())
    (want,) = session(source).run(None, {session(source).get_inputs()[0].name: batch})
    (got,) = session(target).run(["probs"], {"image": batch})
    diff = float(np.max(np.abs(got - want)))
    if not diff <= CLS_ATOL:
        raise ValidationError(f"cls: rewritten graph differs by {diff:.3g} (max abs), above {CLS_ATOL:g}")
    return {"max_abs_diff": diff, "atol": CLS_ATOL, "crops": len(batch)}


def validate_rec(source: Path, target: Path, characters: list[str]) -> dict:
    """Decode both graphs' outputs with the same CTC decoder: texts must be identical."""
    from ocr.recognize import ctc_decode, rec_batch, rec_width

    original, rewritten = session(source), session(target)
    table = ["blank", *characters, " "]
    crops = sample_crops()
    texts, prob_diff = 0, 0.0
    for crop in crops:
        batch = rec_batch([crop], rec_width(crop))
        (softmax,) = original.run(None, {original.get_inputs()[0].name: batch})
        indices, probs = rewritten.run(["char_indices", "char_probs"], {"image": batch})
        want = ctc_decode(softmax.argmax(axis=2), softmax.max(axis=2), table)
        got = ctc_decode(indices, probs, table)
        if [t for t, _ in got] != [t for t, _ in want]:
            raise ValidationError(f"rec: rewritten graph decodes {got[0][0]!r}, the original {want[0][0]!r}")
        prob_diff = max(prob_diff, float(np.max(np.abs(probs - softmax.max(axis=2)))))
        texts += 1
    return {
        "crops": texts,
        "decoded_texts_identical": True,
        "max_abs_diff_char_probs": prob_diff,
        "softmax_bytes_per_step": int(softmax.shape[2] * 4),
        "output_bytes_per_step": 12,
    }


def character_list(model_path: Path, rec_dict: Path | None) -> list[str]:
    """PaddleOCR keeps the recogniser's characters in the ONNX metadata; a user's model needs its dict."""
    if rec_dict is not None:
        return rec_dict.read_text(encoding="utf-8").splitlines()
    meta = {p.key: p.value for p in onnx.load(str(model_path), load_external_data=False).metadata_props}
    if "character" not in meta:
        raise ExportError(f"{model_path} has no 'character' metadata: pass --rec-dict with its dictionary file")
    return meta["character"].splitlines()


def export(out: Path, paddle: dict[str, Path | None] | None = None, rec_dict: Path | None = None) -> dict:
    paddle = paddle or {}
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"source": {}, "validation": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("det", "cls", "rec"):
            if paddle.get(kind) is not None:
                source = paddle_to_onnx(paddle[kind], Path(tmp) / f"{kind}.onnx")
                report["source"][kind] = {"paddle_model": str(paddle[kind]), "sha256": sha256(source)}
            else:
                source = verified_source(kind)
                report["source"][kind] = {
                    "package": f"{PACKAGE}=={PACKAGE_VERSION}",
                    "file": source.name,
                    "sha256": sha256(source),
                }
            target = out / kind / "model.onnx"
            target.parent.mkdir(exist_ok=True)
            model = REWRITES[kind](onnx.load(str(source)))
            if kind == "rec":
                characters = character_list(source, rec_dict)
                helper.set_model_props(model, {"character": "\n".join(characters)})
            onnx.checker.check_model(model)
            onnx.save(model, str(target))
            check_signature(target, *SIGNATURES[kind])
            if kind == "det":
                report["validation"][kind] = validate_det(source, target)
            elif kind == "cls":
                report["validation"][kind] = validate_cls(source, target)
            else:
                report["validation"][kind] = validate_rec(source, target, characters)
                (out / "rec" / "characters.txt").write_text("\n".join(characters) + "\n", encoding="utf-8")
                report["characters"] = len(characters)
            report["source"][kind]["exported_sha256"] = sha256(target)
    (out / "export.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    for kind in ("det", "rec", "cls"):
        parser.add_argument(f"--paddle-{kind}", type=Path, help=f"your PaddleOCR {kind} inference model directory")
    parser.add_argument("--rec-dict", type=Path, help="character dictionary of a --paddle-rec model")
    args = parser.parse_args(argv)
    paddle = {"det": args.paddle_det, "rec": args.paddle_rec, "cls": args.paddle_cls}
    try:
        report = export(args.out, paddle, args.rec_dict)
    except (ExportError, ValidationError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for kind, result in report["validation"].items():
        print(f"  {kind}: {json.dumps(result)}")
    print(f"exported det/cls/rec to {args.out} ({report['characters']} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
