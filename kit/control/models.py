"""`kit add`: the one command that brings a model to the kit. It checks the model as the build will
serve it (its task's configs, and the task's own check: for a graph, batched rows against single
rows; for a checkpoint, its export checked against PyTorch) and only then writes its spec,
`models/<name>.toml` (kit.control.specs). `make serve` then serves it beside the shipped models;
docs/MODELS.md walks through it.

    kit add NAME --task onnx --from FILE [--max-batch-size N] [--route /v1/...] [--models DIR]
    kit add NAME --task text-classification --from CHECKPOINT_DIR_OR_HUB_ID [--max-chars N] [...]
    kit add NAME --task feature-extraction --from CHECKPOINT_DIR_OR_HUB_ID [--pooling mean|cls] [--normalize] [...]
    kit add NAME --task text-ranking --from CHECKPOINT_DIR_OR_HUB_ID [--aggregation max|mean] [--max-chars N] [...]
    kit add NAME --task token-classification --from CHECKPOINT_DIR_OR_HUB_ID [--stride N] [...]
    kit add NAME --task image-classification --from CHECKPOINT_DIR_OR_HUB_ID [--input image|pixels] [--route /v1/...]
    kit add NAME --task pipeline --from MODULE.py [--max-batch-size N] [--route /v1/...]
    kit list [--models DIR]
    kit export [--models DIR]      # what `make export` runs: each checkpoint spec's export, where it is stale
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kit.control.configs import REPO_ROOT, SOURCE, RepositoryError
from kit.control.exports import export, export_dir, exported
from kit.control.specs import (
    AGGREGATIONS,
    HUB_ID,
    IMAGE_INPUTS,
    MERGE_POLICIES,
    MODELS,
    NAME,
    POOLINGS,
    check_routes,
    read_spec,
    read_specs,
    readable_specs,
    spec_text,
)
from kit.control.tasks import TASKS, entry_config, shipped_models, shipped_specs, task_of


def source_text(source: Path, folder: Path) -> str:
    """The spec's `source`: relative to the specs' folder where the file is inside the project, else absolute; a hub
    id (organisation/model) that names no file here, as it is."""
    if HUB_ID.match(str(source)) and not source.exists():
        return str(source)
    source = source.expanduser().resolve()
    if source.is_relative_to(REPO_ROOT):
        return os.path.relpath(source, folder.resolve())
    return str(source)


def add(name: str, task: str, source: Path, folder: Path, settings: dict, replace: bool = False) -> Path:
    """Checks the model and writes its spec; returns the spec's path. RepositoryError says what does not fit."""
    if not NAME.match(name):
        raise RepositoryError(f"the name {name!r} must be lower-case letters, digits and _, starting with a letter")
    if name in shipped_models(SOURCE):
        raise RepositoryError(f"{name!r} is a model the kit ships; choose another name")
    path = folder / f"{name}.toml"
    if path.exists() and not replace:
        raise RepositoryError(f"{path} exists; pass --replace to write it again")
    text = spec_text(task, source_text(source, folder), settings)
    spec = read_spec(path, text)
    check_routes({**readable_specs(folder), name: spec})  # a broken spec beside it is its own matter
    checked = task_of(spec).check(spec)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(checked)
    return path


def parameter_table(pairs: list[str], option: str = "--parameter") -> dict[str, str]:
    table = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.isidentifier():
            raise SystemExit(f"error: {option} {pair!r} is not KEY=VALUE")
        table[key] = value
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add", help="check a model and write its spec")
    a.add_argument("name", help="the model's name in Triton (lower-case letters, digits, _)")
    a.add_argument("--task", required=True, choices=sorted(TASKS))
    a.add_argument(
        "--from",
        dest="source",
        type=Path,
        required=True,
        help="onnx: a .onnx graph; text-classification, feature-extraction, text-ranking, token-classification, "
        "image-classification: a checkpoint "
        "folder or a hub id; pipeline: the Python module of your own pre- and post-processing (docs/MODELS.md)",
    )
    a.add_argument("--max-batch-size", type=int, help="the model's batch cap; 0 serves it unbatched (onnx)")
    a.add_argument("--max-chars", type=int, help="text tasks: chunk size in characters (default: the token limit)")
    a.add_argument("--pooling", choices=POOLINGS, help="feature-extraction (default: as the checkpoint says, else mean)")
    a.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        help="feature-extraction: L2-normalise embeddings (default: as the checkpoint says, else not)",
    )
    a.add_argument(
        "--input",
        choices=IMAGE_INPUTS,
        help="image-classification: an encoded image file (default), or normalised pixels of any size (a ResNet checkpoint)",
    )
    a.add_argument("--merge-policy", choices=MERGE_POLICIES, help="image-classification of pixels (default: cost)")
    a.add_argument(
        "--aggregation", choices=AGGREGATIONS, help="text-ranking: a long document's score of its chunks' (default max)"
    )
    a.add_argument(
        "--stride",
        type=int,
        help="token-classification: tokens two windows of a long text share (default: a quarter of the limit)",
    )
    a.add_argument("--score-label", help="text-classification: answer this label's probability alone (default: every label's)")
    a.add_argument(
        "--parameter",
        action="append",
        metavar="KEY=VALUE",
        help="pipeline: a setting of the module's SETTINGS (repeat for each); the spec's `parameters`",
    )
    a.add_argument(
        "--network",
        action="append",
        metavar="NETWORK=MODEL",
        help="pipeline: serve a network of the module as a model the repository has already (a committed one, an onnx "
        "spec's, another pipeline's NAME_network), so that their calls share its batcher (repeat for each); the spec's "
        "`networks`",
    )
    a.add_argument("--route", help="the door's path (default /v1/<name>)")
    a.add_argument("--replace", action="store_true", help="write over an existing spec of that name")
    a.add_argument("--models", type=Path, default=MODELS, help="the folder of model specs")
    ls = sub.add_parser("list", help="the specs, the kit's own among them, and what the build derives from each")
    ls.add_argument("--models", type=Path, default=MODELS)
    ex = sub.add_parser("export", help="export every checkpoint spec whose export is missing or stale")
    ex.add_argument("--models", type=Path, default=MODELS)
    args = parser.parse_args(argv)
    try:
        if args.command == "add":
            given = {"max_batch_size": args.max_batch_size, "max_chars": args.max_chars, "route": args.route}
            given["score_label"] = args.score_label
            given |= {"pooling": args.pooling, "normalize": args.normalize, "aggregation": args.aggregation}
            given |= {"input": args.input, "merge_policy": args.merge_policy, "stride": args.stride}
            given["parameters"] = parameter_table(args.parameter) if args.parameter else None
            given["networks"] = parameter_table(args.network, "--network") if args.network else None
            settings = {key: value for key, value in given.items() if value is not None}
            path = add(args.name, args.task, args.source, args.models, settings, args.replace)
            print(f"wrote {path}; `make serve` serves it at {read_spec(path).door_route} (docs/MODELS.md)")
        elif args.command == "export":
            for spec in read_specs(args.models).values():
                exporter_of = task_of(spec).exporter
                if exporter_of is not None:
                    exporter = exporter_of(spec)
                    state = "up to date" if exported(spec, exporter) is not None else "exporting"
                    print(f"{spec.name}: {state} ({export_dir(spec)})", flush=True)
                    export(spec, exporter)
        else:
            for spec in (shipped_specs(SOURCE) | read_specs(args.models)).values():
                config = entry_config(spec)
                tensors = ", ".join(t.name for t in config.input) + " -> " + ", ".join(t.name for t in config.output)
                line = f"{spec.name:<20} {spec.task:<19} max_batch={config.max_batch_size:<4} {tensors}  {spec.door_route}"
                print(line + ("  (shipped)" if spec.shipped else ""))
    except RepositoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
