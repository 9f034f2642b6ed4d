"""The PyTorch runner on the CPU in FP32 against the exported ONNX models, on the tiny stand-ins.

The runner serves the checkpoint the export saved beside model.onnx, so on the same inputs it must
give the ONNX model's outputs. FP16 and CUDA graphs need a GPU: they are not tested here (FP16 on
the CPU is refused, CUDA graphs do nothing there), and docs/GPU.md lists them as not yet measured.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from transformers import AutoTokenizer

from export import resnet, text_model, text_samples
from export.standins import make_standin
from kit.pipelines.batching.merge import CostModel
from kit.runners.batched import run_batched
from kit.runners.torch import InputSpec, TorchModel, TorchOptions, TorchRunnerError, Trace, rung, warm_shapes
from tests.export.test_radar_export import MIXED_TEXTS


@pytest.fixture(scope="module")
def radar_export(tmp_path_factory):
    standin = tmp_path_factory.mktemp("radar-tiny")
    make_standin("tiny", standin, seed=0)
    out = tmp_path_factory.mktemp("radar-onnx")
    return out, text_model.export(str(standin), out)


@pytest.fixture(scope="module")
def resnet_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet-onnx")
    return out, resnet.export(out, size="tiny", seed=1)


@pytest.fixture(scope="module")
def classifier(radar_export):
    return TorchModel.from_checkpoint(radar_export[0] / "checkpoint", ["logits"], TorchOptions(dtype="fp32", device="cpu"))


def encode(tokenizer, texts: list[str]) -> dict[str, np.ndarray]:
    encoded = tokenizer(texts, padding=True, return_tensors="np")
    return {name: encoded[name].astype(np.int64) for name in text_samples.INPUT_NAMES}


def onnx_run(path, output: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run([output], inputs)[0]


def test_export_saves_the_model_and_tokenizer_it_exported(radar_export, resnet_export):
    for out, meta in (radar_export, resnet_export):
        assert meta["checkpoint"] == "checkpoint"
        assert json.loads((out / "export.json").read_text())["checkpoint"] == "checkpoint"
        assert (out / "checkpoint" / "config.json").is_file() and (out / "checkpoint" / "model.safetensors").is_file()
    assert (radar_export[0] / "checkpoint" / "tokenizer.json").is_file()


def test_runner_gives_the_onnx_logits_on_padded_batches_of_mixed_lengths(radar_export, classifier):
    out, meta = radar_export
    tokenizer = AutoTokenizer.from_pretrained(out / "checkpoint")
    batches = [encode(tokenizer, texts) for texts in (MIXED_TEXTS, MIXED_TEXTS[:2], MIXED_TEXTS[3:4])]
    batches += text_samples.sample_batches(tokenizer, meta["max_tokens"])  # the export's own, up to 512 tokens
    for batch in batches:
        assert len(batch["input_ids"]) == 1 or (batch["attention_mask"] == 0).any()
        got = classifier(batch)["logits"]
        assert got.dtype == np.float32 and got.shape == (len(batch["input_ids"]), 2)
        assert np.abs(got - onnx_run(out / "model.onnx", "logits", batch)).max() <= meta["atol"]


def test_runner_gives_the_onnx_probs_on_a_padded_mixed_shape_batch(resnet_export):
    out, meta = resnet_export
    model = TorchModel.from_checkpoint(out / "checkpoint", ["probs"], TorchOptions())
    rng = np.random.default_rng(7)
    images = [rng.standard_normal((3, h, w), dtype=np.float32) for h, w in [(31, 70), (96, 96), (65, 33), (1, 1)]]
    batch = resnet.pad_batch(images)
    got = model(batch)["probs"]
    assert got.dtype == np.float32 and got.shape == (len(images), 1000)
    assert np.abs(got - onnx_run(out / "model.onnx", "probs", batch)).max() <= meta["atol"]


def test_run_batched_through_the_runner_gives_each_request_its_rows_alone(radar_export, classifier):
    tokenizer = AutoTokenizer.from_pretrained(radar_export[0] / "checkpoint")
    groups = [MIXED_TEXTS[:2], MIXED_TEXTS[2:3], MIXED_TEXTS[3:5], MIXED_TEXTS[:1], MIXED_TEXTS[1:4]]
    requests = [encode(tokenizer, texts) for texts in groups]
    assert len({r["input_ids"].shape[1] for r in requests}) < len(requests)  # some share a shape, so they merge
    for inputs, result in zip(requests, run_batched(classifier, requests)):
        alone = classifier(inputs)["logits"]
        assert result["logits"].shape == alone.shape
        np.testing.assert_allclose(result["logits"], alone, atol=1e-5)


def test_a_request_the_gpu_would_fail_on_fails_alone_before_the_model(radar_export, classifier):
    tokenizer = AutoTokenizer.from_pretrained(radar_export[0] / "checkpoint")
    requests = [encode(tokenizer, MIXED_TEXTS[:1]) for _ in range(3)]
    requests[1] = {**requests[1], "input_ids": np.full_like(requests[1]["input_ids"], 10**9)}
    too_long = np.ones((1, 513), dtype=np.int64)
    requests.append({"input_ids": too_long, "attention_mask": too_long})
    results = run_batched(classifier, requests)
    assert "token ids must lie in" in str(results[1])
    assert "513 tokens exceed the model's 512 positions" in str(results[3])
    for i in (0, 2):
        np.testing.assert_allclose(results[i]["logits"], classifier(requests[i])["logits"], atol=1e-5)


def test_image_sizes_outside_the_padded_batch_are_refused(resnet_export):
    model = TorchModel.from_checkpoint(resnet_export[0] / "checkpoint", ["probs"], TorchOptions())
    batch = resnet.pad_batch([np.zeros((3, 8, 8), dtype=np.float32)])
    for sizes in ([[0, 8]], [[8, 9]]):
        with pytest.raises(ValueError, match="image_sizes must lie within"):
            model({**batch, "image_sizes": np.array(sizes, dtype=np.int64)})


def test_fp16_on_the_cpu_is_refused_before_loading_weights(tmp_path):
    with pytest.raises(TorchRunnerError, match="fp16 on the CPU is refused"):
        TorchModel.from_checkpoint(tmp_path / "not-loaded", ["logits"], TorchOptions(dtype="fp16", device="cpu"))


def test_cuda_graphs_do_nothing_on_the_cpu(radar_export):
    options = TorchOptions(device="cpu", cuda_graphs=True)
    model = TorchModel.from_checkpoint(radar_export[0] / "checkpoint", ["logits"], options)
    assert model.graphs is None


TOKENS = [InputSpec("input_ids", np.dtype(np.int64), (-1,)), InputSpec("attention_mask", np.dtype(np.int64), (-1,))]


def test_the_warm_set_is_every_ladder_size_by_every_length_and_nothing_for_free_axes_without_lengths():
    shapes = warm_shapes(TOKENS, [1, 4, 8], [16, 48])
    assert sorted(s["input_ids"].shape for s in shapes) == [(1, 16), (1, 48), (4, 16), (4, 48), (8, 16), (8, 48)]
    assert all(s["attention_mask"].shape == s["input_ids"].shape for s in shapes)
    image = [InputSpec("pixel_values", np.dtype(np.float32), (3, 8, 8))]
    assert [s["pixel_values"].shape for s in warm_shapes(image, [1, 2], [])] == [(1, 3, 8, 8), (2, 3, 8, 8)]
    assert warm_shapes([InputSpec("pixel_values", np.dtype(np.float32), (3, -1, -1))], [1, 2], []) == []


def test_a_laddered_runner_pads_rows_up_and_answers_each_row_as_it_would_alone(radar_export):
    out, _ = radar_export
    tokenizer = AutoTokenizer.from_pretrained(out / "checkpoint")
    runs = []
    options = TorchOptions(ladder=(1, 2, 4, 8))
    model = TorchModel.from_checkpoint(out / "checkpoint", ["logits"], options, runs.append)
    plain = TorchModel.from_checkpoint(out / "checkpoint", ["logits"], TorchOptions())
    batch = encode(tokenizer, MIXED_TEXTS[:3])
    got = model(batch)["logits"]
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got, plain(batch)["logits"], atol=1e-5)
    (run,) = runs
    assert (run.rows, run.padded_rows, run.shape) == (3, 4, f"4x{batch['input_ids'].shape[1]}")
    assert not run.warmed and not run.graph
    assert min(run.tensors_s, run.h2d_s, run.forward_s, run.d2h_s) >= 0
    assert rung(9, options.ladder) == 9 and rung(5, options.ladder) == 8


def test_warming_runs_every_shape_once_counts_it_warmed_and_times_it(radar_export):
    out, _ = radar_export
    runs = []
    model = TorchModel.from_checkpoint(out / "checkpoint", ["logits"], TorchOptions(ladder=(1, 2, 4)), runs.append)
    warmup = model.warm(warm_shapes(TOKENS, [1, 2, 4], [8, 16]))
    assert (warmup.shapes, warmup.graphs) == (6, 0)
    assert sorted((rows, elements) for rows, elements, _ in warmup.costs) == [(r, n) for r in (1, 2, 4) for n in (8, 16)]
    assert all(seconds > 0 for *_, seconds in warmup.costs) and not runs  # warm-up runs are not served runs
    CostModel.fit(warmup.costs)  # what a measured merge plans with
    ones = np.ones((3, 16), dtype=np.int64)
    model({"input_ids": ones, "attention_mask": ones})
    model({"input_ids": ones[:, :12], "attention_mask": ones[:, :12]})
    assert [(r.shape, r.warmed) for r in runs] == [("4x16", True), ("4x12", False)]


def test_a_trace_of_a_few_executions_is_written_gzipped_once_they_are_done(tmp_path, radar_export):
    out, _ = radar_export
    model = TorchModel.from_checkpoint(out / "checkpoint", ["logits"], TorchOptions())
    trace = Trace(tmp_path / "traces" / "classifier.trace.json.gz", executions=2, cuda=False)
    ones = np.ones((2, 8), dtype=np.int64)
    model({"input_ids": ones, "attention_mask": ones})
    assert not trace.step() and not (tmp_path / "traces").exists()
    model({"input_ids": ones, "attention_mask": ones})
    assert trace.step()
    events = json.loads(gzip.decompress((tmp_path / "traces" / "classifier.trace.json.gz").read_bytes()))["traceEvents"]
    assert any("aten::" in str(event.get("name")) for event in events)


def test_a_missing_checkpoint_names_the_export_that_saves_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="the exports save one"):
        TorchModel.from_checkpoint(tmp_path, ["logits"], TorchOptions())


def test_no_checkpoint_removes_the_one_an_earlier_export_left(tmp_path):
    standin = tmp_path / "standin"
    make_standin("tiny", standin, seed=0)
    (tmp_path / "out" / "checkpoint").mkdir(parents=True)
    assert text_model.main(["--model", str(standin), "--out", str(tmp_path / "out"), "--no-checkpoint"]) == 0
    assert not (tmp_path / "out" / "checkpoint").exists()
    assert json.loads((tmp_path / "out" / "export.json").read_text())["checkpoint"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (TorchOptions(device="gpu"), "is not cpu, cuda or cuda:N"),
        (TorchOptions(dtype="bf16"), "dtype 'bf16' is not one of"),
        (TorchOptions(graph_memory_share=0), "graph_memory_share 0 is not a share"),
        (TorchOptions(ladder=(4, 2)), r"ladder \[4, 2\] is not rising"),
    ],
)
def test_options_that_cannot_run_are_refused_with_a_reason(options, message):
    with pytest.raises(TorchRunnerError, match=message):
        options.torch_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this PyTorch sees a GPU")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(TorchRunnerError, match="sees no CUDA device"):
        TorchOptions(dtype="fp16", device="cuda:0").torch_device()
