"""Profile settings beyond placement, which the layout search (perf.tune) writes: batcher delay,
preferred batch sizes, parameters such as RADAR's bucket count."""

from kit.repository import derived_parameters, load_profile, profile_configs


def spec_with(**classifier) -> dict:
    spec = load_profile("cpu")
    spec["models"]["radar_classifier"] = {"instances": 1, "threads": 2, **classifier}
    spec["models"]["radar"] = {"instances": 2, "parameters": {"bucket_count": "3"}}
    return spec


def test_profile_sets_the_batchers_delay_and_preferred_sizes():
    configs = profile_configs("cpu", spec=spec_with(max_queue_delay_microseconds=50000, preferred_batch_size=[4, 8]))
    batching = configs["radar_classifier"].dynamic_batching
    assert batching.max_queue_delay_microseconds == 50000
    assert list(batching.preferred_batch_size) == [4, 8]
    assert configs["radar_classifier"].instance_group[0].count == 1


def test_bucket_count_parameter_chooses_that_many_buckets(radar_artifacts):
    config = profile_configs("cpu", spec=spec_with())["radar"]
    assert config.parameters["bucket_count"].string_value == "3"
    buckets = derived_parameters("radar", radar_artifacts, config)["buckets"].split(",")
    assert len(buckets) <= 3 and int(buckets[-1]) == 512
