"""The PyTorch runner on the CPU in FP32 against the exported ONNX models, on the tiny stand-ins.

The runner serves the checkpoint the export saved beside model.onnx, so on the same inputs it must
give the ONNX model's outputs. FP16 and CUDA graphs need a GPU: they are not tested here (FP16 on
the CPU is refused, CUDA graphs do nothing there), and docs/GPU.md lists them as not yet measured.
"""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from transformers import AutoTokenizer

from export import resnet, text_model
from export.standins import make_standin
from kit.runners.batched import run_batched
from kit.runners.torch import TorchModel, TorchOptions, TorchRunnerError
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
    return {name: encoded[name].astype(np.int64) for name in text_model.INPUT_NAMES}


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
    batches += text_model.sample_batches(tokenizer, meta["max_tokens"])  # the export's own, up to 512 tokens
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
    options = TorchOptions(device="cpu", cuda_graphs=8)
    model = TorchModel.from_checkpoint(radar_export[0] / "checkpoint", ["logits"], options)
    assert model.forward is model.module


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
        (TorchOptions(cuda_graphs=-1), "must be a count of shapes"),
    ],
)
def test_options_that_cannot_run_are_refused_with_a_reason(options, message):
    with pytest.raises(TorchRunnerError, match=message):
        options.torch_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this PyTorch sees a GPU")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(TorchRunnerError, match="sees no CUDA device"):
        TorchOptions(dtype="fp16", device="cuda:0").torch_device()
