"""OCR as a workload: generated pages and health-code screenshots to the `ocr` entry model, against the
FastAPI + uvicorn service it replaces (same pipeline, same PP-OCRv4 models), and the in-process limit.

Images travel as base64 text to every target, as web clients send them: in Triton's `IMAGE` BYTES
element (the `ocr` model takes raw bytes or base64 text) and in the baseline's JSON body, so both
sides decode the same base64.
"""

from __future__ import annotations

import base64
from pathlib import Path

from perf.engine.inputs import InputSet, input_set
from perf.engine.tables import limit_section
from perf.engine.workload import HAND_ROLLED, Workload
from perf.workloads import ocr_limit
from samples.images import mixed_images
from samples.renderings import corpus

NETWORKS = ("ocr_det", "ocr_cls", "ocr_rec")


def spec_images(spec_input: dict) -> list[bytes]:
    """Generated pages and screenshots (samples.images.mixed_images, `count`), or pages rendered by
    headless chromium (`"source": "rendered"`: samples.renderings, `per_kind` of each of 9 kinds)."""
    if spec_input.get("source") == "rendered":
        return [page.data for page in corpus(spec_input["per_kind"], spec_input["seed"])]
    return mixed_images(spec_input["count"], spec_input["seed"])


def ocr_inputs(spec_input: dict) -> InputSet:
    """A spec's images as base64, in every form a load generator sends them."""
    images = spec_images(spec_input)
    encoded = [base64.b64encode(data).decode("ascii") for data in images]
    return input_set(spec_input["name"], images, 1.0, "IMAGE", [{"image": e} for e in encoded])


class Ocr(Workload):
    name, title = "ocr", "OCR"
    models = ("ocr", *NETWORKS)
    entry, workers, artifacts = "ocr", "ocr_det", "ocr"
    needs = ("det/model.onnx", "cls/model.onnx", "rec/model.onnx")
    request = item = "image"
    baselines = {"uvicorn": HAND_ROLLED["uvicorn"]}
    endpoint = "predict"
    door_route = "v1/ocr"
    goals = {
        "limit": {"share": 0.9, "from_clients": 8},
        "versus": [{"over": "baselines", "p99": "no_worse", "per_setting": True}],
        "no_failures": {"everywhere": True},
    }
    model_note = (
        "PP-OCRv4 detector and recogniser and the mobile angle classifier from rapidocr-onnxruntime 1.4.4, exported by export.ocr"
    )
    load_note = (
        'an image per request as base64 text: in `IMAGE` to Triton, `{"image": "<base64>"}` to the door and the baseline, '
        "so that every target decodes the same base64. Same images, the same pipeline "
        "(ocr, with the committed `ocr` parameters) and the same three ONNX models in every target."
    )
    workers_note = "The kit's count is the instances of `ocr_det` (and of `ocr_rec`, which each variant gives as many)."
    timed = (("ocr",), *((network,) for network in NETWORKS))
    time_note = (
        "`ocr` decodes, pre- and post-processes and waits on its BLS calls to the three networks, whose requests are its "
        "crops; with `engines=in_process` it runs the networks itself, and only its columns are filled."
    )

    def label(self, models: dict) -> str:
        """Instances x threads of each network, then the entry model's instances and queue timeout."""
        nets = " ".join(
            f"{m[4:]} {models[m].get('instances', 1)}x{models[m].get('threads', 1)}" for m in ("ocr_det", "ocr_rec", "ocr_cls")
        )
        entry = models["ocr"]
        timeout = (
            f" queue-timeout={entry['default_timeout_microseconds'] / 1e6:g}s" if "default_timeout_microseconds" in entry else ""
        )
        changed = "".join(f" {key}={value}" for key, value in sorted(entry.get("parameters", {}).items()))
        return f"{nets} entry={entry.get('instances', 1)}{timeout}{changed}"

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        return {s["name"]: ocr_inputs(s) for s in spec["inputs"]}

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict:
        """In images/s: the kit's pipeline in-process on the limit set's images."""
        print(f"limit: the OCR pipeline in-process on {model_dir.name}", flush=True)
        lim = spec["limit"]
        result = ocr_limit.measure(model_dir, inputs[lim["input"]].items[: lim.get("images")], lim.get("warmup", 2))
        print(f"  best: {result['best']['layout']}: {result['best']['images_per_s']:.2f} images/s", flush=True)
        return result

    def baseline_environment(self, family: str, setting: dict, model_dir: Path, work: Path) -> dict[str, str]:
        return {"BASELINE_MODEL": "ocr", "OCR_MODEL_DIR": str(model_dir.resolve())}

    def inputs_line(self, spec: dict) -> str:
        return "; ".join(map(input_line, spec["inputs"]))

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        lim = results.get("limit")
        return limit_section(lim, "image", LIMIT_NOTE, f", over {lim['images']} images") if lim else []


def input_line(spec_input: dict) -> str:
    if spec_input.get("source") == "rendered":
        return (
            f"`{spec_input['name']}`: {9 * spec_input['per_kind']} pages rendered by headless chromium (samples.renderings, "
            f"seed {spec_input['seed']}): articles light and dark, notices, receipts, invoice tables, mixed Chinese/English/"
            "digits and health-code screens, 390 px phones at device pixel ratio 3 and desktops up to 1440 px, a third JPEG"
        )
    return (
        f"`{spec_input['name']}`: {spec_input['count']} generated PNG images (samples.images.mixed_images, seed "
        f"{spec_input['seed']}): documents of printed lines 640-1200 px wide and health-code screenshots 540-1080 px wide, "
        "alternating"
    )


LIMIT_NOTE = (
    "The kit's pipeline in-process on the same encoded images (decoding, pre- and post-processing, the det/cls/rec ONNX Runtime "
    "sessions; perf/baselines/ocr_model.py), one image after another per process, no server. Layouts: one process whose "
    "sessions use all cores, or one 1-thread process per core, each taking the next image.\n"
)
OCR = Ocr()
