"""Build a runnable Triton model repository from the model specs and a deployment profile.

Every model comes from a spec: the kit's own (`model_repository/*.toml`, their exports in the artifacts folder) and
the user's (`models/*.toml`, kit.control.specs). Each spec's task plans its models and places them with the profile
(kit.control.tasks, kit.control.profiles); the builder then checks what holds across models (each name and route
once, every queue bounded, one canary, every file there) and writes each model's folder: its config with its typed
settings in its parameters, its model.py, its files linked.

    python -m kit.control.repository build --profile cpu --out build/repository/cpu
    python -m kit.control.repository trt-shapes radar_classifier    # export.tensorrt's --profile-shapes, from gpu
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import TextSettings
from kit.control.configs import ARTIFACTS, SOURCE, RepositoryError, render_config
from kit.control.container import shape_profiles, trt_shape_string
from kit.control.profiles import Profile, load_profile
from kit.control.served import ServedModel
from kit.control.specs import MODELS, ModelSpec, check_routes, read_spec, read_specs
from kit.control.tasks import task_of

FIRST_VERSION = 1  # a build's; kit.server.deploy adds the next ones


def plan(
    profile: Profile | str | Path,
    specs: Mapping[str, ModelSpec] | None = None,
    artifacts: Path = ARTIFACTS,
    source: Path = SOURCE,
    models: Iterable[str] | None = None,
) -> dict[str, ServedModel]:
    """Every model a build of `profile` serves (of `models` only, where given: a new version of them,
    kit.server.deploy): the kit's specs and the user's (models/ unless `specs` are given), planned and placed by
    their tasks, checked across models, each ensemble pinned to the build's version of its steps."""
    profile = profile if isinstance(profile, Profile) else load_profile(profile, source)
    shipped, users = read_specs(source, artifacts=artifacts), read_specs() if specs is None else dict(specs)
    for name in sorted(set(shipped) & set(users)):
        raise RepositoryError(f"{users[name].path}: {name!r} is a model the kit ships; name the spec otherwise")
    check_routes(shipped | users)
    every = shipped | users
    brings = {name: set(task_of(spec).names(spec).values()) for name, spec in every.items()}
    wanted = set().union(*brings.values()) if models is None else set(models)
    planned: dict[str, ServedModel] = {}
    owners: dict[str, ModelSpec] = {}
    todo = [spec for spec in every.values() if wanted & brings[spec.name]]  # a partial build plans what it needs
    while todo:
        for spec in todo:
            for model in task_of(spec).plan(spec, profile):
                check_owner(spec, model.name, owners.get(model.name))
                planned[model.name], owners[model.name] = model, spec
        missing = {called for model in planned.values() for called in model.calls} - set(planned)
        done = {owner.name for owner in owners.values()}
        todo = [spec for spec in every.values() if spec.name not in done and missing & brings[spec.name]]
    check_calls(planned)
    check_one_canary(planned)
    chosen = reached(wanted & set(planned), planned)
    for model in chosen.values():
        check_files(model)
        pin_steps(model.config, FIRST_VERSION, planned)
    return chosen if models is None else {name: chosen[name] for name in sorted(chosen, key=list(planned).index)}


def check_owner(spec: ModelSpec, name: str, other: ModelSpec | None) -> None:
    """A model's name belongs to one spec."""
    if other is not None and other.shipped:
        raise RepositoryError(f"{spec.path}: {name!r} is a model the kit ships; name the spec otherwise")
    if other is not None:
        raise RepositoryError(f"{spec.path}: its model {name!r} is also {other.path}'s; name one of them otherwise")


def reached(names: set[str], planned: Mapping[str, ServedModel]) -> dict[str, ServedModel]:
    """The models `names` and every model they call or run as an ensemble's steps, in turn, in planning order."""
    found, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in found or name not in planned:
            continue
        found.add(name)
        todo += [*planned[name].calls, *(step.model_name for step in planned[name].config.ensemble_scheduling.step)]
    return {name: model for name, model in planned.items() if name in found}


def servable_specs(folder: Path, profile: Profile | str) -> tuple[dict[str, ModelSpec], list[str]]:
    """The specs in `folder` whose models can be planned for `profile`, and what is wrong with each of the others: a
    server starts with the first and reports the second, so that one bad spec does not stop the other models."""
    profile = profile if isinstance(profile, Profile) else load_profile(profile)
    specs, refused = {}, []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            spec = read_spec(path)
            task_of(spec).plan(spec, profile)
        except RepositoryError as exc:
            refused.append(str(exc))
            continue
        specs[spec.name] = spec
    check_routes(specs)
    return specs, refused


def check_files(model: ServedModel) -> None:
    for name, path in model.files.items():
        if not path.exists():
            raise RepositoryError(f"{model.name} needs {path} (as {name}); run `make export` first")


def pin_steps(config: mc.ModelConfig, version: int, models: Mapping[str, object]) -> None:
    """An ensemble's steps call their models' `version`: ensemble N runs the models of version N, so that a new
    version is checked before any client's request reaches it (kit.server.deploy)."""
    for step in config.ensemble_scheduling.step:
        if step.model_name not in models:
            raise RepositoryError(f"{config.name}: its ensemble steps name {step.model_name!r}, which is not in the repository")
        step.model_version = version


def bounded(config: mc.ModelConfig) -> bool:
    return config.dynamic_batching.default_queue_policy.max_queue_size > 0


def check_calls(models: Mapping[str, ServedModel]) -> None:
    """Every model a model calls is in the build, and every batching model's queue is bounded: by its own queue policy,
    or by its callers', each bounded itself (a texts model keeps at most its window of chunks in flight, an image
    entry awaits its backbone's calls within its executions, a pipeline entry keeps its requests in flight)."""
    for model in models.values():
        for called in model.calls:
            if called not in models:
                raise RepositoryError(
                    f"{model.name}: it calls {called!r}, which is not in the repository; build the spec that brings it too"
                )
    for model in models.values():
        config = model.config
        if not config.HasField("dynamic_batching") or bounded(config):
            continue
        callers = [m for m in models.values() if model.name in m.calls]
        if not callers or not all(bounded(caller.config) for caller in callers):
            raise RepositoryError(
                f"{model.name}: its queue has no bound: only a model that bounded models call (a texts model's window, an "
                "image entry's executions) may go without Triton's queue policy; drop `queue_policy: false` from its "
                "profile"
            )


def check_one_canary(models: Mapping[str, ServedModel]) -> None:
    """At most one model asks for the door's canary: the door runs one golden set (door.contract)."""
    asking = sorted(m.name for m in models.values() if type(m.settings) is TextSettings and m.settings.canary_from)
    if len(asking) > 1:
        raise RepositoryError(
            f"{', '.join(asking)}: each asks for the door's canary (canary_from), which runs one model's golden set; "
            "set `canary` on one spec"
        )


def write_version(folder: Path, version: int, model: ServedModel) -> None:
    """One model's version folder: its files linked (a name may be a path inside it), its model.py copied."""
    version_dir = folder / str(version)
    version_dir.mkdir(parents=True)
    for name, path in model.files.items():
        (version_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (version_dir / name).symlink_to(path.resolve())
    if model.adapter is not None:
        shutil.copy2(model.adapter, version_dir / "model.py")


def build(
    profile: Profile | str | Path,
    out: Path,
    artifacts: Path = ARTIFACTS,
    source: Path = SOURCE,
    specs: Mapping[str, ModelSpec] | None = None,
    models: Iterable[str] | None = None,
) -> dict[str, ServedModel]:
    """Write a fresh repository for `profile`, with the models specified in `specs` (models/ unless given), of
    `models` only where given, into `out`, and return its models."""
    models = plan(profile, specs, artifacts, source, models)
    if out.exists():
        shutil.rmtree(out)
    for model in models.values():
        write_version(out / model.name, FIRST_VERSION, model)
        (out / model.name / "config.pbtxt").write_text(render_config(model.written()))
    return models


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a runnable repository for a profile")
    b.add_argument("--profile", default="cpu", help="a profile of model_repository/profiles, or a profile file")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--artifacts", type=Path, default=ARTIFACTS)
    b.add_argument("--models", type=Path, default=MODELS, help="the folder of model specs (docs/MODELS.md)")
    t = sub.add_parser("trt-shapes", help="export.tensorrt's --profile-shapes arguments for a model, from a profile")
    t.add_argument("model")
    t.add_argument("--profile", default="gpu")
    args = parser.parse_args(argv)
    try:
        if args.command == "trt-shapes":
            profile = load_profile(args.profile)
            model = plan(profile, specs={}, models=[args.model])[args.model]
            shapes = shape_profiles(model.config, profile.models.get(args.model, {}))
            if not shapes:
                raise RepositoryError(f"{args.model} has dynamic dims and no `shapes` in the {args.profile} profile")
            print(" ".join(f"--profile-shapes {' '.join(trt_shape_string(p, i) for i in range(3))}" for p in shapes))
            return 0
        models = build(args.profile, args.out, args.artifacts, specs=read_specs(args.models))
    except RepositoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, model in models.items():
        config = model.config
        groups = ", ".join(f"{g.count}x {mc.ModelInstanceGroup.Kind.Name(g.kind)}" for g in config.instance_group)
        print(f"  {name:<20} backend={config.backend:<12} max_batch={config.max_batch_size:<3} instances={groups}")
    print(f"built {args.profile} repository in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
