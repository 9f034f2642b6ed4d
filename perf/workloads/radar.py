"""RADAR text detection as a workload: texts of the field report's lengths to the `radar` entry model,
against the Flask, gunicorn, FastAPI and asyncio-batcher services it replaces, and the offline limit.

Padding is compute: every target of a run pads chunks to the buckets the kit serves with (the
deployment profile's, read from the built config), so that the kit, the baselines and the limit
do the same work per chunk and differ only in how they serve it. So is precision: the baselines and
the limit run the network that the kit variant's `radar_classifier` serves, on the same runner: the
ONNX file (its `onnx_model` parameter, which the profile setting `graph` picks; a baseline's or the
limit's `graph` names one), or, where the profile serves the PyTorch runner (gpu-embedded), the
checkpoint in the same dtype on the same device.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kit.adapters.artifacts import text_pipeline
from kit.adapters.settings import TextSettings, TorchRunnerSettings
from kit.control.configs import parameters, template
from kit.pipelines.text.pipeline import TextPipeline
from perf.baselines.radar_model import TORCH_SHAPES
from perf.engine import tables
from perf.engine.inputs import InputSet, bytes_tensor, input_set
from perf.engine.load import served_answers
from perf.engine.targets import variant_models
from perf.engine.workload import HAND_ROLLED, Baseline, Workload
from perf.sim.device import SIM
from perf.workloads import radar_limit
from samples.texts import sample_texts

# What of the PyTorch runner a kit variant may turn off, by its profile key, as its label names it.
RUNNER_PARTS = (("batch_ladder", "ladder"), ("warm_up", "warm-up"), ("cuda_graphs", "graphs"))


def kit_runner(classifier: dict[str, str]) -> dict:
    """The PyTorch runner as a kit variant's classifier runs it (its parameters): precision, device, ladder, the
    lengths it warms, CUDA graphs."""
    r = TorchRunnerSettings.from_parameters(classifier)
    lengths = r.warm_lengths if r.warm_up else ()
    return {"dtype": r.dtype, "device": r.device, "ladder": r.batch_ladder, "lengths": lengths, "graphs": r.cuda_graphs}


def radar_inputs(spec_input: dict, pipeline: TextPipeline) -> InputSet:
    """A spec's texts (samples.texts), in every form a load generator sends them, knowing their chunks per text."""
    s = spec_input
    texts = sample_texts(s["count"], s["min_chars"], s["max_chars"], seed=s["seed"])
    per_text = radar_limit.chunks_per_text(pipeline, texts)
    return input_set(s["name"], texts, per_text, "TEXT", [{"text": t} for t in texts])


class Radar(Workload):
    name, title = "radar", "RADAR"
    models = ("radar", "radar_texts", "radar_classifier")
    entry, texts, workers, artifacts = "radar", "radar_texts", "radar_classifier", "radar"
    needs = ("export.json", "tokenizer.json")
    answers = ("SCORE", "CHUNK_SCORES")  # the entry's text and chunk outputs: one label's (RADAR's AI-generated one)
    request, item = "text", "chunk"
    baselines = HAND_ROLLED | {"gunicorn": Baseline("gunicorn", "perf.baselines.flask_app:app", "gunicorn gthread")}
    endpoint = "predict"
    door_route = "v1/radar"
    goals = {
        "limit": {"share": 0.9, "clients": [16, 64]},
        "versus": [{"over": "baselines", "p99": "no_worse"}],
        "no_failures": {"clients": [256]},
    }
    model_note = "the exported RADAR classifier"
    load_note = (
        'a text per request: its `TEXT` tensor to Triton, `{"text": ...}` to the door and the baselines. Same texts, same '
        "chunking and length buckets (the profile's bucket count, unless a kit variant's label says otherwise), the same "
        "network on the same runner; a chunk is counted as requests/s x the mean chunks per text of the input set."
    )
    workers_note = "The kit's count is `radar_classifier`'s instances."

    @property
    def timed(self) -> tuple[tuple[str, ...], ...]:
        return (self.texts, self.entry), (self.workers,)

    @property
    def time_note(self) -> str:
        return (
            f"`{self.texts}` takes the text behind the `{self.entry}` ensemble (`{self.entry}` itself in runs from before "
            f"it): its compute lasts until the text's chunks fit the window of chunks in flight; `{self.workers}` runs the "
            "chunks, an execution's requests its batch."
        )

    def served(self, model_dir: Path, work: Path, setting: dict | None = None) -> tuple[dict, dict]:
        """What a kit variant (the deployment's profile unless `setting` overrides it) serves from `model_dir`, as the
        builder plans it: the `radar` parameters and the classifier's (its runner's)."""
        models = variant_models(self, setting or {}, model_dir, work)
        runner = models[self.workers]
        defaults = runner.settings.to_parameters(defaults=True) if runner.settings is not None else {}
        return parameters(models[self.entry].written()), defaults | parameters(runner.written())

    def settings(self, model_dir: Path, work: Path, setting: dict | None = None) -> TextSettings:
        """RADAR's settings as a kit variant serves them from `model_dir`."""
        return variant_models(self, setting or {}, model_dir, work)[self.entry].settings

    def graph_variant(self, setting: dict) -> dict:
        """The kit variant whose graph a baseline's or the limit's setting names (`graph`); none: the committed one."""
        return {self.workers: {"graph": setting["graph"]}} if "graph" in setting else {}

    def label(self, models: dict) -> str:
        """Classifier instances x threads, queue delay, batch cap, bucket count, entry instances x texts per execution
        and the classifier rounds it keeps in flight, ragged batches, graph, the table pricing merged lengths, queue
        timeout, the classifier calls the entry keeps waiting where set, what of the PyTorch runner it turns off (ladder,
        warm-up, CUDA graphs), the executions it traces."""
        clf, entry = models[self.workers], models.get(self.texts, {})
        radar = models.get(self.entry, {})
        buckets = radar.get("parameters", {}).get("bucket_count") or radar.get("served", {}).get("bucket_count")
        texts = entry.get("max_batch_size") or template("text/texts", self.texts).max_batch_size
        rounds = entry.get("parameters", {}).get("batches_in_flight") or entry.get("served", {}).get("batches_in_flight")
        ragged = " ragged" if clf.get("ragged_batch") else ""
        cap = f" max-batch={clf['max_batch_size']}" if "max_batch_size" in clf else ""
        graph = f" graph={clf['graph']}" if "graph" in clf else ""
        merge = clf.get("merge") or clf.get("parameters", {}).get("merge")  # the torch runner's, or a custom one's
        graph += f" merge={merge['table'] if isinstance(merge, dict) else merge}" if merge else ""
        timeout = (
            f" queue-timeout={entry['default_timeout_microseconds'] / 1e6:g}s" if "default_timeout_microseconds" in entry else ""
        )
        calls = entry.get("parameters", {}).get("call_threads")
        timeout += f" call-threads={calls}" if calls else ""
        timeout += "".join(f" no-{name}" for key, name in RUNNER_PARTS if clf.get(key, True) in ([], False))
        timeout += f" traced={clf['profile_executions']}" if clf.get("profile_executions") else ""
        return (
            f"{clf.get('instances', 1)}x{clf.get('threads', 1)} delay={clf.get('max_queue_delay_microseconds', 'src')}us{cap} "
            f"buckets={buckets} entry={entry.get('instances', 1)}x{texts} in-flight={rounds}{ragged}{graph}{timeout}"
        )

    def pipeline(self, spec: dict, model_dir: Path, work: Path) -> TextPipeline:
        """RADAR's pipeline as the kit variant the spec's `limit` names (default: the deployment's) serves it."""
        params, _ = self.served(model_dir, work / "kit-settings", self.graph_variant(spec.get("limit", {})))
        return text_pipeline(model_dir, TextSettings.from_parameters(params))

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        pipeline = self.pipeline(spec, model_dir, work)
        return {s["name"]: radar_inputs(s, pipeline) for s in spec["inputs"]}

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict:
        """The limit in chunks/s on the network the spec's `limit` names (default: the kit's), on its runner."""
        lim = spec["limit"]
        params, clf = self.served(model_dir, work / "kit-settings", self.graph_variant(lim))
        settings = TextSettings.from_parameters(params)
        pipeline = text_pipeline(model_dir, settings)
        texts = inputs[lim["input"]].items
        if "sim_table" in clf:
            print(f"limit: the simulated device of {clf['sim_table']}, from its table", flush=True)
            table = SIM / clf["sim_table"]
            result = radar_limit.measure_sim(
                table, clf["curve"], clf.get("precision", "fp16"), pipeline, texts, lim["batch_sizes"]
            )
        elif "torch_model" in clf:
            runner = f"{model_dir.name}/{clf['torch_model']} ({clf['dtype']}, {clf['device']})"
            print(f"limit: the PyTorch runner on {runner}, eager and as the kit runs it", flush=True)
            result = radar_limit.measure_torch(model_dir, pipeline, texts, lim, kit_runner(clf))
        else:
            graph = clf["onnx_model"]
            print(f"limit: offline ONNX Runtime on {model_dir.name}/{graph}", flush=True)
            result = radar_limit.measure(model_dir / graph, pipeline, texts, lim.get("chunks"), lim["batch_sizes"])
        result["bucket_count"] = settings.bucket_count
        best = result["best"]
        print(f"  best: {best['layout']} batch {best['batch']}: {best['chunks_per_s']:.2f} chunks/s", flush=True)
        return result

    def baseline_environment(self, family: str, setting: dict, model_dir: Path, work: Path) -> dict[str, str]:
        """The model folder, the kit's settings as parameters (TextSettings.from_parameters rebuilds them) and the
        network the kit serves: its graph, or its checkpoint on the PyTorch runner in the same dtype and device. A
        setting's `bucket_count` pads to that many buckets instead, its `graph` runs that file."""
        variant = {}
        if "bucket_count" in setting:
            variant[self.entry] = {"parameters": {"bucket_count": str(setting["bucket_count"])}}
        params, clf = self.served(model_dir, work / "kit-settings", variant | self.graph_variant(setting))
        env = {"BASELINE_MODEL": "radar", "RADAR_MODEL_DIR": str(model_dir.resolve()), "RADAR_SETTINGS": json.dumps(params)}
        if "sim_table" in clf:
            table = str(SIM / clf["sim_table"])
            env |= {"RADAR_RUNNER": "sim", "RADAR_SIM_TABLE": table, "RADAR_SIM_CURVE": clf["curve"]}
            env["RADAR_SIM_PRECISION"] = clf.get("precision", "fp16")
        elif "torch_model" in clf:
            env |= {"RADAR_RUNNER": "torch", "RADAR_TORCH_DTYPE": clf["dtype"], "RADAR_TORCH_DEVICE": clf["device"]}
        else:
            env["RADAR_GRAPH"] = clf["onnx_model"]
        if setting.get("runner") == "kit":  # the kit classifier's ladder, warm-up and CUDA graphs
            if family != "batcher" or "torch_model" not in clf:
                raise ValueError(f"{family}: runner kit is the PyTorch runner of a design that runs one batch at a time")
            runner = kit_runner(clf)
            env |= {"RADAR_TORCH_GRAPHS": str(int(runner["graphs"]))}
            env |= {name: ",".join(map(str, runner[key])) for name, key in zip(TORCH_SHAPES, ("ladder", "lengths"))}
        if family == "batcher":
            env |= {"BATCH_SIZE_MAX": str(setting["batch_size_max"]), "BATCH_TIMEOUT": str(setting["batch_timeout_ms"] / 1000)}
        return env

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """Scores served for the first texts of the sweep's input against the same pipeline in-process on the FP32
        reference: the checkpoint on the PyTorch runner on the CPU where the kit serves that runner, else the ONNX
        graph as exported (model.onnx)."""
        count = spec["accuracy"].get("requests", 8)
        texts = inputs[spec["sweep"]["input"]].items[:count]
        params, clf = self.served(model_dir, target.workdir / "accuracy")
        pipeline = text_pipeline(model_dir, TextSettings.from_parameters(params))
        reference, logits = radar_limit.reference_logits(model_dir, clf)
        diffs, (text_output, chunk_output) = [], self.answers
        for text, answer in zip(texts, served_answers(target, self.entry, (bytes_tensor("TEXT", t) for t in texts))):
            plan = pipeline.plan(text)
            expected = pipeline.finish(plan, [logits(g.input_ids, g.attention_mask) for g in plan.groups])
            if text_output == "SCORE":
                served = {"SCORE": np.array([expected.score]), "CHUNK_SCORES": expected.chunk_scores}
            else:  # every label's probabilities, or an embedding
                served = {text_output: expected.values, chunk_output: expected.chunk_values}
            diffs += [float(np.abs(answer.as_numpy(name).reshape(want.shape) - want).max()) for name, want in served.items()]
        return {"requests": len(texts), "max_abs_diff": max(diffs), "reference": reference, "compared": " and ".join(served)}

    def inputs_line(self, spec: dict) -> str:
        return "; ".join(
            f"`{i['name']}`: {i['count']} texts of {i['min_chars']}-{i['max_chars']} characters (samples.texts, seed {i['seed']})"
            for i in spec["inputs"]
        )

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        return limit_section(results["limit"], ceiling=results["spec"]["limit"].get("ceiling")) if results.get("limit") else []


def limit_section(lim: dict, ceiling: dict | None = None) -> list[str]:
    """The limit's layouts and its best; where FLOPs per chunk were counted, the best against the spec's `ceiling` (a
    device's peak {"tflops", "of"})."""
    per_text = f"{lim['texts_per_s']:.2f} texts/s at {lim['chunks_per_text']:.2f} chunks per text"
    buckets = f", padded to {lim['bucket_count']} length buckets as every target of the run" if "bucket_count" in lim else ""
    graph = f", on `{lim['graph']}`" if "graph" in lim else ""
    out = tables.limit_section(lim, "chunk", best_after=f" ({per_text}), over {lim['chunks']} chunks{buckets}{graph}")
    return out + (ceiling_lines(lim, ceiling) if "flops_per_chunk" in lim else [])


def ceiling_lines(lim: dict, ceiling: dict | None) -> list[str]:
    """The PyTorch limit's two ways side by side, the kit's warm-up in it, and the best limit in FLOP/s (arithmetic:
    FLOPs per chunk from the model's config at the chunks' padded lengths) against a device's peak (a datasheet's)."""
    best, flops, out = lim["best"]["chunks_per_s"], lim["flops_per_chunk"], []
    eager = {r["batch"]: r["chunks_per_s"] for r in lim["layouts"] if r.get("way") == "eager"}
    if eager:
        gains = ", ".join(f"{best / rate:.2f} x eager at batch {b} ({rate:.0f} chunks/s)" for b, rate in eager.items())
        out.append(f"The best is {gains}.")
    if lim.get("warmup"):
        w = lim["warmup"]
        memory = f" ({w['graph_bytes'] / 2**20:.0f} MiB of a {w['budget_bytes'] / 2**20:.0f} MiB budget)" if w["graphs"] else ""
        out.append(f"The kit's way warmed {w['shapes']} shapes in {w['seconds']:.1f} s, {w['graphs']} as CUDA graphs{memory}.")
    out.append(
        f"A chunk costs {flops / 1e9:.1f} GFLOP on average (counted, not measured: the model's config at these chunks' "
        f"padded lengths, {lim['mean_tokens']:.0f} tokens on average), so the best limit does {best * flops / 1e12:.1f} TFLOP/s."
    )
    if ceiling:
        top = ceiling["tflops"] * 1e12 / flops
        out.append(
            f"Against {ceiling['of']}, {ceiling['tflops']:g} TFLOP/s (a datasheet's figure), these chunks could run at "
            f"{top:,.0f} chunks/s: the best limit is {best / top:.0%} of that ceiling."
        )
    return [" ".join(out), ""]


RADAR = Radar()
