"""Profile settings beyond placement (the committed CPU profile took its from a layout search): batcher delay,
preferred batch sizes, parameters such as RADAR's bucket count."""

import pytest

from kit.control.configs import RepositoryError
from kit.control.repository import plan
from tests.profiles import profile_data, variant


def spec_with(**classifier) -> dict:
    """The CPU profile with RADAR's models placed by their own entries alone, its text roles left empty."""
    spec = profile_data("cpu")
    spec["roles"] = {role: value for role, value in spec["roles"].items() if not role.startswith("text-")}
    spec["models"]["radar_classifier"] = {"instances": 1, "threads": 2, **classifier}
    spec["models"]["radar"] = {"parameters": {"bucket_count": "3"}}
    spec["models"]["radar_texts"] = {"instances": 2}
    return spec


@pytest.fixture
def configs_of(tmp_path):
    """The written configs of a build of the CPU profile `spec`."""

    def configs(spec: dict) -> dict:
        return {name: model.written() for name, model in plan(variant(tmp_path, spec), specs={}).items()}

    return configs


def test_profile_sets_the_batchers_delay_and_preferred_sizes(configs_of):
    configs = configs_of(spec_with(max_queue_delay_microseconds=50000, preferred_batch_size=[4, 8]))
    batching = configs["radar_classifier"].dynamic_batching
    assert batching.max_queue_delay_microseconds == 50000
    assert list(batching.preferred_batch_size) == [4, 8]
    assert configs["radar_classifier"].instance_group[0].count == 1


def test_bucket_count_parameter_chooses_that_many_buckets(configs_of):
    configs = configs_of(spec_with())
    config = configs["radar"]
    assert config.parameters["bucket_count"].string_value == "3"
    buckets = config.parameters["buckets"].string_value.split(",")
    assert len(buckets) <= 3 and int(buckets[-1]) == 512
    # the model that does the work holds the ensemble's settings, the door reads the ensemble's: the same
    assert configs["radar_texts"].parameters["buckets"].string_value == config.parameters["buckets"].string_value


def test_ragged_batch_lets_every_classifier_input_take_mixed_lengths(configs_of):
    configs = configs_of(spec_with(ragged_batch=True))
    assert all(tensor.allow_ragged_batch for tensor in configs["radar_classifier"].input)
    assert not any(tensor.allow_ragged_batch for tensor in configs_of(spec_with())["radar_classifier"].input)


def test_ragged_batch_is_refused_for_a_model_that_does_not_batch_itself(configs_of):
    spec = spec_with()
    spec["models"]["ocr"]["ragged_batch"] = True
    with pytest.raises(RepositoryError, match="ocr: batching settings need the config.s dynamic_batching"):
        configs_of(spec)


def test_an_ensemble_takes_parameters_alone_its_steps_models_take_the_rest(configs_of):
    spec = spec_with()
    spec["models"]["radar"]["instances"] = 8
    with pytest.raises(RepositoryError, match=r"radar: unknown ensemble settings \['instances'\] \(known: \['parameters'\]\)"):
        configs_of(spec)


def test_a_parameter_the_models_settings_do_not_hold_is_refused_naming_it(configs_of):
    spec = spec_with()
    spec["models"]["radar_texts"]["parameters"] = {"batches_in_flite": "2"}
    with pytest.raises(RepositoryError, match=r"radar_texts: TextsSettings: unknown parameters \['batches_in_flite'\]"):
        configs_of(spec)


def test_max_batch_size_caps_the_classifier_and_radar_splits_its_chunks_to_fit(configs_of):
    configs = configs_of(spec_with(max_batch_size=8, preferred_batch_size=[8]))
    assert configs["radar_classifier"].max_batch_size == 8
    assert configs["radar"].parameters["max_batch"].string_value == "8"
    assert configs["radar_texts"].parameters["max_batch"].string_value == "8"


def test_the_chunks_radar_texts_keeps_in_flight_follow_the_classifiers_instances_and_batch(configs_of):
    for instances, max_batch in ((1, 8), (3, 16)):
        spec = spec_with(max_batch_size=max_batch, preferred_batch_size=[max_batch])
        spec["models"]["radar_classifier"]["instances"] = instances
        spec["models"]["radar_texts"]["parameters"] = {"batches_in_flight": "2"}
        configs = configs_of(spec)
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
def test_a_batch_cap_the_canonical_config_cannot_take_is_refused(configs_of, setting, message):
    with pytest.raises(RepositoryError, match=f"radar_classifier: {message}"):
        configs_of(spec_with(**setting))


def test_a_roles_batch_cap_keeps_the_preferred_sizes_it_admits_and_an_entry_by_name_is_held_to_them(configs_of):
    spec = spec_with()
    spec["roles"]["text-graph"] = {"max_batch_size": 16}
    spec["models"]["radar_classifier"] = {"instances": 1, "threads": 2}
    assert list(configs_of(spec)["radar_classifier"].dynamic_batching.preferred_batch_size) == [8, 16]
