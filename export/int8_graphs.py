"""INT8 graphs for PP-OCRv4's recogniser and detector and for ResNet-50: the same answers, in less time?

Each graph is quantized by ONNX Runtime's own quantizer (onnxruntime.quantization) in the ways that
fit a Conv-heavy graph: dynamic (INT8 weights, activations quantized as they come: MatMulInteger,
ConvInteger) and static QDQ (activation ranges calibrated beforehand; ONNX Runtime fuses the pairs
into QLinearConv, its VNNI path), per tensor and per channel. Calibration uses sample images that are
not among those judged. The graphs are first run through quant_pre_process, whose graph optimisation
folds paddle2onnx's Constant weights into the initializers that the quantizer needs, and raised to
opset 13, where DequantizeLinear takes the axis that per-channel scales need.

Texts: the kit's OCR pipeline (the committed `ocr` settings, in this process) reads the test suite's
generated pages and health codes, and pages rendered by headless chromium (--rendered N of each kind,
0 for none), with the FP32 graphs, then with one INT8 graph swapped in, recogniser or detector alone:
lines identical to FP32's, character accuracy against FP32's texts on the images that differ, and
against the known text (spaces aside) for both. Speed: FP32 and every variant in one process,
interleaved input by input, with 1 and 2 intra-op threads, on what the pipeline sent the networks
(recogniser batches of 48 px crops, page-sized detector inputs) and on ResNet-50 batches of 8 at
224x224 made of the same images, where top-1 agreement with FP32 is counted too. A variant is
servable only where it keeps every text identical and is faster at both thread counts.

    python -m export.int8_graphs --rendered 1 --out perf/results/int8/graphs.json   # make perf-int8-graphs, about 8 minutes here
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from difflib import SequenceMatcher
from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime as ort
from onnx import version_converter
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

from kit.pipelines.encoded_images import decode_image
from kit.runners.onnx import make_session
from ocr.pipeline import OcrPipeline
from ocr.reader import NetworkEngines, TextReader
from perf.baselines.ocr_model import ocr_engines, ocr_settings
from perf.engine.tables import table
from perf.probes.output import command_line, emit
from samples.images import mixed_images
from samples.renderings import corpus
from samples.scoring import character_accuracy
from tests.ocr_cases import documents, health_codes

CALIBRATION_SEED = 500  # mixed_images(seed 500): documents and health codes of seeds the judged images do not use
STATIC = {"quant_format": QuantFormat.QDQ, "activation_type": QuantType.QUInt8, "weight_type": QuantType.QInt8}
VARIANTS = {
    "rec": {
        "dynamic MatMul": {"op_types_to_quantize": ["MatMul"]},
        "dynamic MatMul+Conv": {"op_types_to_quantize": ["MatMul", "Conv"]},
        "static QDQ per-tensor": {**STATIC, "per_channel": False},
        "static QDQ per-channel": {**STATIC, "per_channel": True},
    },
    "det": {
        "dynamic Conv": {"op_types_to_quantize": ["Conv"]},
        "static QDQ per-tensor": {**STATIC, "per_channel": False},
        "static QDQ per-channel": {**STATIC, "per_channel": True},
    },
    "resnet50": {
        "dynamic MatMul+Conv": {"op_types_to_quantize": ["MatMul", "Conv"]},
        "static QDQ per-tensor": {**STATIC, "per_channel": False},
        "static QDQ per-channel": {**STATIC, "per_channel": True},
    },
}
TIMED_INPUTS = {"rec": 8, "det": 4, "resnet50": 2}


class Feeds(CalibrationDataReader):
    """The calibration inputs, one session feed at a time, as the static quantizer reads them."""

    def __init__(self, feeds: list[dict]):
        self.feeds = iter(feeds)

    def get_next(self) -> dict | None:
        return next(self.feeds, None)


class Recorder:
    """Engines that keep what the pipeline sends the detector and the recogniser: realistic inputs to calibrate and time."""

    def __init__(self, engines: NetworkEngines):
        self.engines, self.det, self.rec = engines, [], []

    async def detect(self, images):
        self.det.append({"image": images})
        return await self.engines.detect(images)

    async def classify(self, crops):
        return await self.engines.classify(crops)

    async def recognize(self, crops):
        self.rec.append({"image": crops})
        return await self.engines.recognize(crops)


def prepared(source: Path, out: Path) -> Path:
    """The graph as the quantizer needs it: weights as initializers, opset >= 13 (sympy is not installed: no symbolic shapes)."""
    quant_pre_process(str(source), str(out), skip_symbolic_shape=True)
    model = onnx.load(str(out))
    if next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) < 13:
        onnx.save(version_converter.convert_version(model, 13), str(out))
    return out


def quantized(source: Path, out: Path, options: dict, calibration: list[dict]) -> Path:
    if "quant_format" in options:
        quantize_static(str(source), str(out), Feeds(calibration), **options)
    else:
        quantize_dynamic(str(source), str(out), **options)
    return out


def resnet_batches(images: list[np.ndarray], export: dict, batch: int = 8) -> list[dict]:
    """The images squeezed to 224x224 RGB, normalised with the mean and std ResNet's export records, in batches of `batch`."""
    mean, std = np.array(export["image_mean"], np.float32), np.array(export["image_std"], np.float32)
    x = np.stack([(cv2.resize(i, (224, 224), interpolation=cv2.INTER_AREA)[..., ::-1] / 255.0 - mean) / std for i in images])
    x = x.transpose(0, 3, 1, 2).astype(np.float32)
    return [
        {"pixel_values": x[i : i + batch], "image_sizes": np.full((len(x[i : i + batch]), 2), 224, np.int64)}
        for i in range(0, len(x), batch)
    ]


def spread(items: list, n: int) -> list:
    """`n` items evenly spaced over the list, so that every kind of image is among the timed inputs."""
    return [items[round(i * (len(items) - 1) / max(1, n - 1))] for i in range(min(n, len(items)))]


def side_by_side(paths: dict[str, Path], feeds: list[dict], threads: int, repeats: int) -> dict[str, float]:
    """ms per pass over `feeds` for each graph, interleaved feed by feed so that other jobs' load hits all alike."""
    sessions = {name: make_session(path, threads) for name, path in paths.items()}
    for session in sessions.values():
        for feed in feeds:
            session.run(None, feed)
    spent = dict.fromkeys(sessions, 0.0)
    for _ in range(repeats):
        for feed in feeds:
            for name, session in sessions.items():
                start = time.perf_counter()
                session.run(None, feed)
                spent[name] += time.perf_counter() - start
    return {name: round(s / repeats * 1000, 1) for name, s in spent.items()}


def read_all(pipeline: OcrPipeline, engines, images: list[np.ndarray]) -> list[list[str]]:
    return [asyncio.run(pipeline.read(image, engines)).texts for image in images]


def known_accuracy(texts: list[list[str]], truth: list[list[str] | None]) -> float:
    pairs = [(t, k) for t, k in zip(texts, truth) if k is not None]
    return round(character_accuracy([t for t, _ in pairs], [k for _, k in pairs], spaces=False), 4)


def texts_against(reference: list[list[str]], texts: list[list[str]], truth: list[list[str] | None]) -> dict:
    differ = [i for i, (a, b) in enumerate(zip(reference, texts)) if a != b]
    same = sum(m.size for a, b in zip(reference, texts) for m in SequenceMatcher(None, a, b).get_matching_blocks())
    return {
        "lines_identical": f"{same}/{sum(map(len, reference))}",
        "images_identical": f"{len(texts) - len(differ)}/{len(texts)}",
        "accuracy_vs_fp32_where_different": (
            round(character_accuracy([texts[i] for i in differ], [reference[i] for i in differ]), 4) if differ else None
        ),
        "known_text_accuracy": known_accuracy(texts, truth),
    }


def top1_agreement(reference: Path, path: Path, batches: list[dict]) -> dict:
    sessions = [make_session(p, 1) for p in (reference, path)]
    top1 = [np.concatenate([s.run(None, b)[0].argmax(1) for b in batches]) for s in sessions]
    return {"top1_agreement": f"{int((top1[0] == top1[1]).sum())}/{len(top1[0])}", "fp32_distinct_top1": len(set(top1[0]))}


class Judge:
    """The judged images, FP32's texts of them, and the inputs the pipeline sent the networks (to calibrate and time)."""

    def __init__(self, args: argparse.Namespace):
        self.pipeline = TextReader(ocr_settings(), args.ocr / "rec" / "characters.txt").pipeline
        self.engines = ocr_engines(args.ocr, threads=1)
        self.ocr = args.ocr
        generated = [(d.data, d.lines) for d in documents()] + [(h.data, None) for h in health_codes()]
        rendered = []
        if args.rendered:
            print(f"rendering {args.rendered} page(s) of each kind (seed {args.seed}) in headless chromium", flush=True)
            rendered = [(p.data, p.lines) for p in corpus(args.rendered, args.seed)]
        self.images = [decode_image(data) for data, _ in generated + rendered]
        self.truth = [lines for _, lines in generated + rendered]
        self.counts = {"generated": len(generated), "rendered": len(rendered), "rendered_seed": args.seed}
        self.calibration_images = [decode_image(data) for data in mixed_images(args.calibration_images, CALIBRATION_SEED)]
        self.calibrated, self.timed = Recorder(self.engines), Recorder(self.engines)
        read_all(self.pipeline, self.calibrated, self.calibration_images)
        self.reference = read_all(self.pipeline, self.timed, self.images)
        self.resnet_export = json.loads((args.resnet.parent / "export.json").read_text())
        self.resnet = resnet_batches(self.images, self.resnet_export)
        self.calibration = {
            "rec": self.calibrated.rec,
            "det": self.calibrated.det,
            "resnet50": resnet_batches(self.calibration_images, self.resnet_export),
        }
        timed = {"rec": self.timed.rec, "det": self.timed.det, "resnet50": [b for b in self.resnet if len(b["image_sizes"]) == 8]}
        self.timed_inputs = {graph: spread(inputs, TIMED_INPUTS[graph]) for graph, inputs in timed.items()}

    def answers(self, graph: str, name: str, paths: dict[str, Path]) -> dict:
        """How the variant's answers compare with FP32's: texts for the OCR graphs, top-1 classes for ResNet-50."""
        if graph == "resnet50":
            return {} if name == "FP32" else top1_agreement(paths["FP32"], paths[name], self.resnet)
        if name == "FP32":
            return {"known_text_accuracy": known_accuracy(self.reference, self.truth)}
        swapped = ocr_engines(self.ocr, threads=1, replaced={graph: paths[name]})
        return texts_against(self.reference, read_all(self.pipeline, swapped, self.images), self.truth)


def measure(args: argparse.Namespace) -> dict:
    judge = Judge(args)
    args.scratch.mkdir(parents=True, exist_ok=True)
    sources = {"rec": args.ocr / "rec" / "model.onnx", "det": args.ocr / "det" / "model.onnx", "resnet50": args.resnet}
    rows = []
    for graph, variants in VARIANTS.items():
        base = prepared(sources[graph], args.scratch / f"{graph}-prepared.onnx")
        paths = {"FP32": sources[graph]}
        for name, options in variants.items():
            out = args.scratch / f"{graph}-{name.replace(' ', '-').replace('+', '-')}.onnx"
            paths[name] = quantized(base, out, options, judge.calibration[graph])
        ms = {t: side_by_side(paths, judge.timed_inputs[graph], t, args.repeats) for t in (1, 2)}
        for name, path in paths.items():
            row = {"graph": graph, "variant": name, "mb": round(path.stat().st_size / 2**20, 1)}
            for t in (1, 2):
                row[f"ms_{t}_thread"] = ms[t][name]
                row[f"int8_over_fp32_{t}_thread"] = round(ms[t][name] / ms[t]["FP32"], 2)
            row |= judge.answers(graph, name, paths)
            if name != "FP32":
                row["faster"] = max(row["int8_over_fp32_1_thread"], row["int8_over_fp32_2_thread"]) < 1
            if "images_identical" in row:
                row["servable"] = row["faster"] and row["images_identical"] == f"{len(judge.images)}/{len(judge.images)}"
            print(row, flush=True)
            rows.append(row)
    return {
        "command": args.command,
        "onnxruntime": ort.__version__,
        "judged": judge.counts | {"fp32_lines": sum(map(len, judge.reference))},
        "calibration": {"images": len(judge.calibration_images), "seed": CALIBRATION_SEED}
        | {f"{g}_inputs": len(judge.calibration[g]) for g in VARIANTS},
        "resnet_source": judge.resnet_export["source"],
        "timed_inputs": {g: [list(next(iter(f.values())).shape) for f in judge.timed_inputs[g]] for g in VARIANTS},
        "rows": rows,
    }


COLUMNS = {
    "graph": "graph",
    "variant": "variant",
    "mb": "MB",
    "ms_1_thread": "ms, 1 thread",
    "int8_over_fp32_1_thread": "INT8/FP32",
    "ms_2_thread": "ms, 2 threads",
    "int8_over_fp32_2_thread": "INT8/FP32",
    "lines_identical": "lines identical",
    "images_identical": "images identical",
    "accuracy_vs_fp32_where_different": "accuracy vs FP32 where different",
    "known_text_accuracy": "known-text accuracy",
    "top1_agreement": "top-1 agreement",
    "fp32_distinct_top1": "FP32's distinct top-1",
    "servable": "servable",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ocr", type=Path, default=Path("artifacts/ocr"), help="export.ocr's folder")
    parser.add_argument("--resnet", type=Path, default=Path("artifacts/resnet50/model.onnx"))
    parser.add_argument("--scratch", type=Path, default=Path("build/int8"), help="where the INT8 graphs are written")
    parser.add_argument("--rendered", type=int, default=1, help="rendered pages of each kind (9 kinds) to judge; 0: none")
    parser.add_argument("--seed", type=int, default=41, help="of the rendered pages")
    parser.add_argument("--calibration-images", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the inputs, after one untimed")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.command = command_line("export.int8_graphs", argv)
    report = measure(args)
    print("\n".join(table(list(COLUMNS.values()), [[r.get(k, "") for k in COLUMNS] for r in report["rows"]])))
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
