"""The simulated accelerator (perf.sim.device): its time per batch follows the device table it was given, one
batch at a time per instance, and its answers are the same function of each item however it is batched or padded."""

import json
import threading
import time

import numpy as np
import pytest

from perf.sim.device import COUNTERS_ENV, SIM, Curve, SimulatedModel, SimulationError, busy_seconds

TABLE = SIM / "h100.json"
ROWS = json.loads(TABLE.read_text())


def measured(model: str, batch: int, work: int) -> dict:
    return next(
        r
        for r in ROWS["throughput"]
        if r["model"] == model and r["precision"] == "fp16" and r["batch"] == batch and r.get("tokens") == work
    )


def test_a_measured_batch_takes_its_measured_wall_time():
    curve = Curve.from_table(ROWS, "radar", "fp16")
    for batch, tokens in ((1, 48), (16, 104), (64, 512)):
        assert curve.seconds(batch, tokens) == pytest.approx(measured("radar", batch, tokens)["median_ms"] / 1000)


def test_between_measured_points_time_is_interpolated_and_more_work_takes_longer():
    curve = Curve.from_table(ROWS, "radar", "fp16")
    low, high = measured("radar", 8, 224)["median_ms"], measured("radar", 16, 224)["median_ms"]
    assert min(low, high) / 1000 <= curve.seconds(12, 224) <= max(low, high) / 1000
    assert curve.seconds(64, 600) > curve.seconds(64, 512)  # the device part scales with tokens past the table
    assert curve.seconds(128, 72) > curve.seconds(64, 72)  # and with items past the largest measured batch


def test_an_unknown_model_or_precision_is_refused_with_what_the_table_has():
    with pytest.raises(SimulationError, match=r"no 'bert' rows at fp16 .*'radar'"):
        Curve.from_table(ROWS, "bert", "fp16")


def tokens(rows: list[list[int]], length: int) -> dict[str, np.ndarray]:
    ids = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return {"input_ids": ids, "attention_mask": mask}


def test_answers_are_a_function_of_each_item_not_of_its_padding_or_batch(monkeypatch):
    monkeypatch.delenv(COUNTERS_ENV, raising=False)
    model = SimulatedModel(TABLE, "radar", "fp16", {"logits": 2})
    a, b = [5, 900, 31, 7], [44, 2, 1000, 8, 9, 3]
    together = model(tokens([a, b], 16))["logits"]
    assert np.allclose(together[0], model(tokens([a], 4))["logits"][0])
    assert np.allclose(together[1], model(tokens([b], 6))["logits"][0])
    assert not np.allclose(together[0], together[1]) and np.allclose(together.sum(axis=1), 1)
    images = SimulatedModel(TABLE, "resnet50", "fp16", {"probs": 1000})
    pixels = np.random.default_rng(0).standard_normal((1, 3, 20, 30)).astype(np.float32)
    padded = np.zeros((1, 3, 40, 40), dtype=np.float32)
    padded[:, :, :20, :30] = pixels
    alone = images({"pixel_values": pixels, "image_sizes": np.array([[20, 30]])})["probs"]
    assert np.allclose(alone, images({"pixel_values": padded, "image_sizes": np.array([[20, 30]])})["probs"])


def test_an_instance_runs_one_batch_at_a_time_and_counts_its_busy_time(tmp_path, monkeypatch):
    monkeypatch.setenv(COUNTERS_ENV, str(tmp_path / "counters"))
    model = SimulatedModel(TABLE, "radar", "fp16", {"logits": 2})
    one = model.curve.seconds(1, 4)
    threads = [threading.Thread(target=model, args=(tokens([[1, 2, 3]], 4),)) for _ in range(3)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.perf_counter() - start >= 3 * one * 0.95  # serialized, as a CUDA stream would run them
    assert busy_seconds(tmp_path / "counters") == pytest.approx(3 * one, rel=0.01)
