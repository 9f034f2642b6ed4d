"""Parameters the repository builder computes from other configs and from the exported files.

Five rules, each keyed by a parameter of the committed config, not by model name:

- `parameters_from: MODEL`: every parameter of MODEL's committed config (its profile's applied) that
  this config does not set (health_code reads text with `ocr`'s settings, radar_texts RADAR's from
  the `radar` ensemble, from the one source), but MODEL's `door_route`: the door serves MODEL, not the
  model behind it. The rules below then apply to what it inherited too, from this model's own files,
  so the order in which models are built does not matter.
- `bucket_count: N`: `buckets`, the N length buckets that waste the least padding on the token
  lengths the export measured (token_lengths.json in the version folder), for this config's
  `max_chars`; the export must have measured them at the same `max_chars`.
- `classifier: MODEL`: `max_batch`, MODEL's max_batch_size, so that one group of chunks always
  fits one request to it; with `batches_in_flight: N` too, `chunks_in_flight`: N x MODEL's instances x
  its max_batch_size, the chunks an entry keeps in flight (so it follows the classifier's layout).
- `canary_from: FILE`: `canary`, the `canary` section of the export's FILE (export.json) as compact
  JSON: the golden set the front door runs through the served model (kit.control.canary), carried by
  the served config so that it reaches a door in another container. Nothing when the export has no
  such section. Each text must fit this config's `max_chars`: its source score is one chunk's.

- `torch_model` (the PyTorch runner's) on a model that a text model names as its `classifier`: `warm_lengths`, that
  text model's buckets (as above, from the token lengths in this model's own files), the lengths its runs take, so
  that the runner warms each of them at load.
- `pipeline_module` and `networks` (a pipeline entry's, kit.control.pipeline_task): `network_rows`, each network
  model's max_batch_size as its profile placed it, the most rows one call to it may carry; a network that is not a
  model of the repository is refused here.

One check across configs (check_queue_bounds): a batching model whose profile took Triton's queue policy
away (`queue_policy: false`, kit.control.profiles) must be the `classifier` of a model with `batches_in_flight`,
or the `backbone` of one, that has a bounded queue of its own, so that what waits for it is still bounded, by
that caller's window or executions.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.canary import CanaryError, golden_set
from kit.control.configs import RepositoryError, parameters
from kit.control.specs import DOOR_ANSWER, DOOR_DESCRIPTION, DOOR_ROUTE, DOOR_SCHEMA
from kit.pipelines.text.pipeline import length_buckets

TOKEN_LENGTHS = "token_lengths.json"
# Computed here for each model, never inherited.
DERIVED = ("buckets", "max_batch", "chunks_in_flight", "canary", "network_rows", "warm_lengths")
# The door serves the entry, not the models behind it: how it does is never inherited either.
ENTRY_ONLY = (DOOR_ROUTE, DOOR_ANSWER, DOOR_DESCRIPTION, DOOR_SCHEMA)


def effective(config: mc.ModelConfig, configs: dict[str, mc.ModelConfig]) -> dict[str, str]:
    """The config's own parameters and those it inherits."""
    own = parameters(config)
    return own | (inherited(config, configs) if "parameters_from" in own else {})


def inherited(config: mc.ModelConfig, configs: dict[str, mc.ModelConfig]) -> dict[str, str]:
    own = parameters(config)
    source = configs.get(own["parameters_from"])
    if source is None:
        raise RepositoryError(f"{config.name}: parameters_from names {own['parameters_from']!r}, which is not in the repository")
    return {key: value for key, value in parameters(source).items() if key not in own}


def buckets(config: mc.ModelConfig, own: dict[str, str], files: dict[str, Path]) -> dict[str, str]:
    if TOKEN_LENGTHS not in files:
        raise RepositoryError(f"{config.name}: bucket_count needs the export's {TOKEN_LENGTHS} (run `make export`)")
    sample = json.loads(files[TOKEN_LENGTHS].read_text())
    if int(own["max_chars"]) != sample["max_chars"]:
        raise RepositoryError(
            f"{config.name}: max_chars {own['max_chars']} differs from the {sample['max_chars']} the export measured "
            f"token lengths at; re-export with --max-chars {own['max_chars']}"
        )
    chosen = length_buckets(sample["lengths"], int(own["bucket_count"]), sample["max_tokens"])
    return {"buckets": ",".join(map(str, chosen))}


def canary(config: mc.ModelConfig, own: dict[str, str], files: dict[str, Path]) -> dict[str, str]:
    name = own["canary_from"]
    if name not in files:
        raise RepositoryError(f"{config.name}: canary_from needs the export's {name} (run `make export`)")
    section = json.loads(files[name].read_text()).get("canary")
    if section is None:
        return {}
    try:
        golden = golden_set(section)
    except CanaryError as exc:
        raise RepositoryError(f"{config.name}: {name}: {exc}") from None
    longest = max(len(text) for text in golden.texts)
    if "max_chars" in own and longest > int(own["max_chars"]):
        raise RepositoryError(
            f"{config.name}: a canary text of {name} has {longest} characters, over max_chars {own['max_chars']}, so it "
            f"would be served as several chunks; re-export with --max-chars {own['max_chars']}"
        )
    return {"canary": json.dumps(section, separators=(",", ":"))}


def instance_count(config: mc.ModelConfig) -> int:
    """How many instances Triton runs of `config` (a group naming GPUs has `count` on each; none: one)."""
    return sum(group.count * max(1, len(group.gpus)) for group in config.instance_group) or 1


def derived_parameters(config: mc.ModelConfig, configs: dict[str, mc.ModelConfig], files: dict[str, Path]) -> dict[str, str]:
    """What to add to `config`'s parameters; `files`: the model's artifacts by file name."""
    given, own = parameters(config), effective(config, configs)
    derived = {key: value for key, value in own.items() if key not in given and key not in DERIVED + ENTRY_ONLY}
    if "bucket_count" in own:
        derived.update(buckets(config, own, files))
    if "classifier" in own:
        classifier = configs.get(own["classifier"])
        if classifier is None:
            raise RepositoryError(f"{config.name}: classifier {own['classifier']!r} is not in the repository")
        derived["max_batch"] = str(classifier.max_batch_size)
        if "batches_in_flight" in own:
            rounds = int(own["batches_in_flight"]) * instance_count(classifier) * classifier.max_batch_size
            derived["chunks_in_flight"] = str(rounds)
    if "canary_from" in own:
        derived.update(canary(config, own, files))
    if "pipeline_module" in own and "networks" in own:
        derived["network_rows"] = network_rows(config, own, configs)
    if "torch_model" in own:
        derived.update(caller_buckets(config, configs, files))
    return derived


def caller_buckets(config: mc.ModelConfig, configs: dict[str, mc.ModelConfig], files: dict[str, Path]) -> dict[str, str]:
    """`warm_lengths`: the buckets of the text model that names `config` as its classifier, if one does."""
    for caller in configs.values():
        own = effective(caller, configs)
        if own.get("classifier") == config.name and "bucket_count" in own:
            return {"warm_lengths": buckets(config, own, files)["buckets"]}
    return {}


def network_rows(config: mc.ModelConfig, own: dict[str, str], configs: dict[str, mc.ModelConfig]) -> str:
    rows = {}
    for network, served in json.loads(own["networks"]).items():
        model = configs.get(served["model"])
        if model is None:
            raise RepositoryError(
                f"{config.name}: its network {network} is the model {served['model']!r}, which is not in the repository; "
                "build the spec that brings it too"
            )
        rows[network] = model.max_batch_size
    return json.dumps(rows, separators=(",", ":"))


def bounded(config: mc.ModelConfig) -> bool:
    return config.dynamic_batching.default_queue_policy.max_queue_size > 0


def check_queue_bounds(configs: dict[str, mc.ModelConfig]) -> None:
    """Every batching model's queue is bounded: by its own queue policy, or by the one model that calls it, itself
    bounded: a texts model keeps at most its window (`batches_in_flight`) of chunks in flight, and an image entry
    awaits its `backbone` calls within its execution, so at most its instances x max_batch_size of them wait."""
    callers = set()
    for config in configs.values():
        if config.platform == "ensemble" or not bounded(config):
            continue
        own = effective(config, configs)
        if "classifier" in own and "batches_in_flight" in own:
            callers.add(own["classifier"])
        if "backbone" in own:
            callers.add(own["backbone"])
    for name, config in configs.items():
        if config.HasField("dynamic_batching") and not bounded(config) and name not in callers:
            raise RepositoryError(
                f"{name}: its queue has no bound: only a model that a bounded texts model (batches_in_flight) or image "
                "entry (backbone) calls may go without Triton's queue policy; drop `queue_policy: false` from its profile"
            )


def check_one_canary(configs: dict[str, mc.ModelConfig]) -> None:
    """At most one model asks for the door's canary (`canary_from`): the door runs one golden set (door.contract)."""
    asking = sorted(name for name, config in configs.items() if "canary_from" in config.parameters)
    if len(asking) > 1:
        raise RepositoryError(
            f"{', '.join(asking)}: each asks for the door's canary (canary_from), which runs one model's golden set; "
            "set `canary` on one spec"
        )
