"""Profile settings beyond placement, which the layout search (perf.tune) writes: batcher delay,
preferred batch sizes, parameters such as RADAR's bucket count."""

import pytest

from kit.control.configs import RepositoryError
from kit.control.profiles import load_profile
from kit.control.repository import profile_configs, resolved


def spec_with(**classifier) -> dict:
    spec = load_profile("cpu")
    spec["models"]["radar_classifier"] = {"instances": 1, "threads": 2, **classifier}
    spec["models"]["radar"] = {"parameters": {"bucket_count": "3"}}
    spec["models"]["radar_texts"] = {"instances": 2}
    return spec


def test_profile_sets_the_batchers_delay_and_preferred_sizes():
    configs = profile_configs("cpu", spec=spec_with(max_queue_delay_microseconds=50000, preferred_batch_size=[4, 8]))
    batching = configs["radar_classifier"].dynamic_batching
    assert batching.max_queue_delay_microseconds == 50000
    assert list(batching.preferred_batch_size) == [4, 8]
    assert configs["radar_classifier"].instance_group[0].count == 1


def test_bucket_count_parameter_chooses_that_many_buckets(radar_artifacts):
    configs = resolved("cpu", radar_artifacts.parent, spec=spec_with())[0]
    config = configs["radar"]
    assert config.parameters["bucket_count"].string_value == "3"
    buckets = config.parameters["buckets"].string_value.split(",")
    assert len(buckets) <= 3 and int(buckets[-1]) == 512
    # the model that does the work inherits the ensemble's parameters, the door reads the ensemble's: the same
    assert configs["radar_texts"].parameters["buckets"].string_value == config.parameters["buckets"].string_value


def test_ragged_batch_lets_every_classifier_input_take_mixed_lengths():
    configs = profile_configs("cpu", spec=spec_with(ragged_batch=True))
    assert all(tensor.allow_ragged_batch for tensor in configs["radar_classifier"].input)
    assert not any(tensor.allow_ragged_batch for tensor in profile_configs("cpu", spec=spec_with())["radar_classifier"].input)


def test_ragged_batch_is_refused_for_a_model_that_does_not_batch_itself():
    spec = spec_with()
    spec["models"]["ocr"]["ragged_batch"] = True
    with pytest.raises(RepositoryError, match="ocr: batching settings need the config.s dynamic_batching"):
        profile_configs("cpu", spec=spec)


def test_an_ensemble_takes_parameters_alone_its_steps_models_take_the_rest():
    spec = spec_with()
    spec["models"]["radar"]["instances"] = 8
    with pytest.raises(RepositoryError, match=r"radar: unknown ensemble settings \['instances'\] \(known: \['parameters'\]\)"):
        profile_configs("cpu", spec=spec)


def test_max_batch_size_caps_the_classifier_and_radar_splits_its_chunks_to_fit(radar_artifacts):
    configs = resolved("cpu", radar_artifacts.parent, spec=spec_with(max_batch_size=8, preferred_batch_size=[8]))[0]
    assert configs["radar_classifier"].max_batch_size == 8
    assert configs["radar"].parameters["max_batch"].string_value == "8"
    assert configs["radar_texts"].parameters["max_batch"].string_value == "8"


def test_the_chunks_radar_texts_keeps_in_flight_follow_the_classifiers_instances_and_batch(radar_artifacts):
    for instances, max_batch in ((1, 8), (3, 16)):
        spec = spec_with(max_batch_size=max_batch, preferred_batch_size=[max_batch])
        spec["models"]["radar_classifier"]["instances"] = instances
        spec["models"]["radar_texts"]["parameters"] = {"batches_in_flight": "2"}
        configs = resolved("cpu", radar_artifacts.parent, spec=spec)[0]
        assert configs["radar_texts"].parameters["chunks_in_flight"].string_value == str(2 * instances * max_batch)
        assert "chunks_in_flight" not in configs["radar"].parameters, "the ensemble hands off nothing"


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"max_batch_size": 256}, "max_batch_size 256 is outside 1 .. 128"),
        ({"max_batch_size": 0}, "max_batch_size 0 is outside 1 .. 128"),
        ({"max_batch_size": 8}, r"preferred batch sizes \[16, 32\] exceed max_batch_size 8"),
    ],
)
def test_a_batch_cap_the_committed_config_cannot_take_is_refused(setting, message):
    with pytest.raises(RepositoryError, match=f"radar_classifier: {message}"):
        profile_configs("cpu", spec=spec_with(**setting))
