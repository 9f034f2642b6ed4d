"""Every target of a RADAR benchmark pads chunks to the same length buckets as the kit.

Padding is compute: a kit on 3 buckets did ~21% more work per chunk than baselines on 5, which the
earlier report read as server overhead. These tests keep the baselines and the limit on the kit's
bucket count, whatever the profile (or `make tune`) sets."""

from pathlib import Path

from kit.repository import derived_parameters, load_profile, profile_configs
from kit.text.corpus import sample_texts
from perf.limit import chunk_rows
from perf.targets import make_target, radar_bucket_count


def test_bucket_count_is_the_cpu_profiles_and_a_variant_can_override_it():
    profile = load_profile("cpu")
    configs = profile_configs("cpu")
    assert radar_bucket_count() == int(configs["radar"].parameters["bucket_count"].string_value)
    profile["models"]["radar"] = {"parameters": {"bucket_count": "3"}}
    assert radar_bucket_count(profile["models"]) == 3
    assert radar_bucket_count({"radar": {}}) == 5  # no parameter: kit.text.radar's default


def test_baselines_get_the_kits_bucket_count(tmp_path):
    flask = make_target("flask", {}, tmp_path, tmp_path)
    assert flask.environment()["RADAR_BUCKET_COUNT"] == str(radar_bucket_count())
    pinned = make_target("gunicorn", {"workers": 1, "threads": 2, "bucket_count": 3}, tmp_path, tmp_path)
    assert pinned.environment()["RADAR_BUCKET_COUNT"] == "3"


def test_kit_label_names_the_bucket_count_it_serves_with(tmp_path):
    kit = make_target("kit", {"radar": {"parameters": {"bucket_count": "16"}}}, tmp_path, tmp_path)
    assert "buckets=16" in kit.label
    assert f"buckets={radar_bucket_count()}" in make_target("kit", {}, tmp_path, tmp_path).label


def test_limit_pads_every_chunk_to_the_buckets_the_served_model_uses(radar_artifacts: Path):
    texts = sample_texts(12, 100, 800, seed=3)
    for count in (3, 8):
        config = profile_configs("cpu", spec={"models": {"radar": {"parameters": {"bucket_count": str(count)}}}})["radar"]
        buckets = {int(b) for b in derived_parameters("radar", radar_artifacts, config)["buckets"].split(",")}
        rows = chunk_rows(radar_artifacts, texts, None, count)
        assert rows and {len(ids) for ids, _ in rows} <= buckets
        assert all(mask.sum() >= 1 and mask[: mask.sum()].all() for _, mask in rows)  # right-padded real tokens
