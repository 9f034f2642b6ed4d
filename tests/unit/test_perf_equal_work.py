"""Every target of a RADAR benchmark pads chunks to the same length buckets as the kit.

Padding is compute: a kit on 3 buckets did more work per chunk than baselines on 5, which an
earlier report read as server overhead. These tests keep the baselines and the limit on the
buckets of the kit variant they are compared with, whatever the profile sets."""

import json
from pathlib import Path

import pytest

from kit.adapters.artifacts import text_pipeline
from kit.adapters.settings import TextSettings
from kit.control.configs import parameters
from kit.control.profiles import load_profile
from perf.engine.sweep import check_distinct
from perf.engine.targets import make_target
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import chunk_rows
from samples.texts import sample_texts
from tests.profiles import configs


def test_settings_are_the_built_configs_and_a_variant_can_override_the_bucket_count(radar_artifacts: Path, tmp_path):
    built = configs("cpu")
    assert RADAR.settings(radar_artifacts, tmp_path / "cpu") == TextSettings.from_parameters(parameters(built["radar"]))
    three = RADAR.settings(radar_artifacts, tmp_path / "three", {"radar": {"parameters": {"bucket_count": "3"}}})
    assert three.bucket_count == 3 and len(three.buckets) <= 3


def test_baselines_get_the_kits_settings(radar_artifacts: Path, tmp_path):
    flask = make_target(RADAR, "flask", {}, radar_artifacts, tmp_path)
    sent = TextSettings.from_parameters(json.loads(flask.environment()["RADAR_SETTINGS"]))
    assert sent == RADAR.settings(radar_artifacts, tmp_path / "kit")
    pinned = make_target(RADAR, "gunicorn", {"workers": 1, "threads": 2, "bucket_count": 3}, radar_artifacts, tmp_path)
    assert TextSettings.from_parameters(json.loads(pinned.environment()["RADAR_SETTINGS"])).bucket_count == 3


def test_kit_label_names_the_bucket_count_and_queue_timeout_it_serves_with(radar_artifacts: Path, tmp_path):
    variant = {"radar": {"parameters": {"bucket_count": "16"}}, "radar_texts": {"default_timeout_microseconds": 600_000_000}}
    assert "buckets=16" in make_target(RADAR, "kit", variant, radar_artifacts, tmp_path).label
    assert make_target(RADAR, "kit", variant, radar_artifacts, tmp_path).label.endswith(" queue-timeout=600s")
    committed = load_profile("cpu").roles["text-entry"]["parameters"]["bucket_count"]
    assert f"buckets={committed} " in make_target(RADAR, "kit", {}, radar_artifacts, tmp_path).label


def test_settings_that_serve_the_same_layout_are_refused_before_anything_starts(radar_artifacts: Path, tmp_path):
    same = [
        make_target(RADAR, "kit", setting, radar_artifacts, tmp_path)
        for setting in ({}, {"radar_classifier": {"preferred_batch_size": [4]}})
    ]
    with pytest.raises(ValueError, match="same layout"):
        check_distinct(same)
    unqueued = make_target(RADAR, "kit", {"radar_classifier": {"queue_policy": False}}, radar_artifacts, tmp_path)
    assert unqueued.label.endswith(" no-queue-policy")
    check_distinct([same[0], unqueued])


def test_limit_pads_every_chunk_to_the_buckets_the_served_model_uses(radar_artifacts: Path, tmp_path):
    texts = sample_texts(12, 100, 800, seed=3)
    for count in (3, 8):
        settings = RADAR.settings(radar_artifacts, tmp_path / str(count), {"radar": {"parameters": {"bucket_count": str(count)}}})
        rows = chunk_rows(text_pipeline(radar_artifacts, settings), texts)
        assert rows and {len(ids) for ids, _ in rows} <= set(settings.buckets)
        assert all(mask.sum() >= 1 and mask[: mask.sum()].all() for _, mask in rows)  # right-padded real tokens
