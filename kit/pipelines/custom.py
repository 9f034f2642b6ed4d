"""A user's own pre- and post-processing around their networks: the `pipeline` task's contract (kit.control.
pipeline_task). The user writes one Python module that declares what a request holds, what its answer holds and
which ONNX graphs it calls, and an async `run` that turns one request's rows into its answer, awaiting each network
as one call:

    NETWORKS = {"scorer": "scorer.onnx"}          # each network's graph, beside the module
    INPUTS = {"features": ("FP32", [4])}          # each input: its Triton data type and the dims of one row
    OUTPUTS = {"label": ("INT64", [1]), "probs": ("FP32", [3])}

    async def run(inputs, networks):
        scored = await networks.scorer({"x": inputs["features"] / 255})
        return {"label": scored["probs"].argmax(1)[:, None], "probs": scored["probs"]}

    EXAMPLE = {"features": [[0, 10, 200, 255], [1, 2, 3, 4]]}  # optional: valid rows for `kit add`'s check

A pipeline that needs state built once (a table read from a file, a library's pipeline object) declares `load`
instead of `run`, and optionally the dataclass of its settings, which the spec's `parameters` fill (typed as every
model's settings are, kit.adapters.settings; an unknown key is refused at build time):

    SETTINGS = ReaderSettings                     # a dataclass; its fields are the entry's parameters
    FILES = ["characters.txt"]                    # files beside the module that the entry's folder takes
    def load(settings, folder):                   # folder: where the entry's files are
        table = (folder / "characters.txt").read_text().splitlines()
        async def run(inputs, networks): ...
        return run

A spec of `max_batch_size = 0` hands `run` one request's tensors whole, with no rows axis (INPUTS and OUTPUTS
declare their full dims): for work whose answer's size is its own, such as the text lines of one image.
The same `run` serves in Triton, where each network is a batched model of the server called over BLS (so the calls
of concurrent requests meet in its batcher), and in this process over ONNX Runtime (tests, `kit add`'s check, and an
entry whose profile sets `engines: in_process`). A network's tensors are as Triton serves its graph: rows first, a value per row
as [rows, 1]. A ValueError from `run` is the request's fault and fails it alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, is_dataclass, replace
from pathlib import Path

import numpy as np

from kit.pipelines.errors import InputError

# Triton's data types that a pipeline's tensors may take, as numpy types.
TYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
NAMES = ("NETWORKS", "INPUTS", "OUTPUTS")  # and `run` or `load`


Run = Callable[[dict[str, np.ndarray], "Networks"], Awaitable[dict[str, np.ndarray]]]


class DefinitionError(ValueError):
    """The module does not declare a pipeline; the message names the declaration and the fix."""


@dataclass(frozen=True)
class Tensor:
    name: str
    data_type: str  # a key of TYPES
    dims: tuple[int, ...]  # one row's; -1 for a free axis

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(TYPES[self.data_type])

    def fits(self, shape: tuple[int, ...], rows: bool = True) -> bool:
        """Whether a batch of this tensor (rows first), or one request's tensor whole (`rows` false), may have
        `shape`."""
        own = shape[1:] if rows else shape
        return len(shape) == len(self.dims) + rows and all(d in (-1, s) for d, s in zip(self.dims, own))


@dataclass(frozen=True)
class Definition:
    networks: dict[str, str]  # name -> graph file, relative to the module's folder
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    run: Run | None  # None where the module declares `load`, until `loaded`
    example: dict[str, np.ndarray] | None = None  # rows to check it on, where random rows are not valid input
    settings: type | None = None  # SETTINGS: the dataclass of the spec's `parameters`
    files: tuple[str, ...] = ()  # FILES: files beside the module, linked into the entry's version folder
    load: Callable[[object, Path], Run] | None = None

    def loaded(self, settings: object, folder: Path) -> Definition:
        """The pipeline ready to run: `load(settings, folder)`'s run where the module declares `load`."""
        if self.load is None:
            return self
        run = self.load(settings, folder)
        if not inspect.iscoroutinefunction(run):
            raise DefinitionError(f"load returned {run!r}, not an async function run(inputs, networks)")
        return replace(self, run=run, load=None)


def tensors(where: str, key: str, declared: object) -> tuple[Tensor, ...]:
    fix = f'declare {key} as {{"name": ("FP32", [4]), ...}}, each type one of {", ".join(TYPES)}'
    if not isinstance(declared, Mapping) or not declared:
        raise DefinitionError(f"{where}: {key} is {declared!r}; {fix}")
    found = []
    for name, value in declared.items():
        ok = isinstance(name, str) and name.isidentifier() and isinstance(value, tuple | list) and len(value) == 2
        if ok:
            data_type, dims = value
            ok = data_type in TYPES and isinstance(dims, tuple | list) and len(dims) > 0
            ok = ok and all(isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1) for d in dims)
        if not ok:
            raise DefinitionError(f"{where}: {key}[{name!r}] is {value!r}; {fix} (dims: positive, or -1 for a free axis)")
        found.append(Tensor(name, data_type, tuple(dims)))
    return tuple(found)


def definition(namespace: Mapping[str, object], where: str) -> Definition:
    """The pipeline a module's names declare; DefinitionError, naming the declaration, when they do not."""
    missing = [name for name in NAMES if name not in namespace]
    if missing:
        raise DefinitionError(f"{where}: {missing[0]} is missing; a pipeline module declares {', '.join(NAMES)}")
    networks = namespace["NETWORKS"]
    if not isinstance(networks, Mapping) or not all(
        isinstance(k, str) and k.isidentifier() and isinstance(v, str) and v.endswith(".onnx") for k, v in networks.items()
    ):
        raise DefinitionError(f'{where}: NETWORKS is {networks!r}; declare it as {{"name": "graph.onnx", ...}} ({{}}: none)')
    run, load, settings = namespace.get("run"), namespace.get("load"), namespace.get("SETTINGS")
    if (run is None) == (load is None):
        raise DefinitionError(f"{where}: declare one of `async def run(inputs, networks)` and `def load(settings, folder)`")
    if run is not None and not inspect.iscoroutinefunction(run):
        raise DefinitionError(f"{where}: run is not an async function; declare `async def run(inputs, networks)`")
    if load is not None and not callable(load):
        raise DefinitionError(f"{where}: load is not a function; declare `def load(settings, folder)`")
    if settings is not None and not (isinstance(settings, type) and is_dataclass(settings)):
        raise DefinitionError(f"{where}: SETTINGS is {settings!r}; declare it as a dataclass whose fields are parameters")
    inputs, outputs = tensors(where, "INPUTS", namespace["INPUTS"]), tensors(where, "OUTPUTS", namespace["OUTPUTS"])
    files = namespace.get("FILES", ())
    if not isinstance(files, list | tuple) or not all(isinstance(f, str) and f and "/" not in f for f in files):
        raise DefinitionError(f"{where}: FILES is {files!r}; declare it as a list of file names beside the module")
    example = namespace.get("EXAMPLE")
    example = example and examples(where, inputs, example)
    return Definition(dict(networks), inputs, outputs, run, example, settings, tuple(files), load)


def examples(where: str, inputs: tuple[Tensor, ...], declared: object) -> dict[str, np.ndarray]:
    """EXAMPLE's rows as arrays of INPUTS' types; DefinitionError when they do not fit INPUTS."""
    fix = "declare EXAMPLE as {input: rows, ...}, two rows or more of every input, each as INPUTS says"
    if not isinstance(declared, Mapping) or set(declared) != {t.name for t in inputs}:
        raise DefinitionError(f"{where}: EXAMPLE does not name exactly the inputs; {fix}")
    arrays = {}
    for tensor in inputs:
        try:
            arrays[tensor.name] = np.asarray(declared[tensor.name], dtype=tensor.dtype)
        except (TypeError, ValueError) as exc:
            raise DefinitionError(f"{where}: EXAMPLE[{tensor.name!r}] is not {tensor.data_type} ({exc}); {fix}") from None
        if not tensor.fits(arrays[tensor.name].shape):
            raise DefinitionError(f"{where}: EXAMPLE[{tensor.name!r}] has shape {arrays[tensor.name].shape}; {fix}")
    if len({len(a) for a in arrays.values()}) != 1 or len(next(iter(arrays.values()))) < 2:
        raise DefinitionError(f"{where}: EXAMPLE's inputs hold unequal or too few rows; {fix}")
    return arrays


NetworkCall = Callable[[str, dict[str, np.ndarray]], Awaitable[dict[str, np.ndarray]]]


class Networks:
    """A pipeline's networks by name, `networks.scorer(inputs)` or `networks["scorer"](inputs)`: one awaited call,
    its outputs by name. A call of more rows than a network takes at once (`max_rows`, one cap for all, or each
    network's; 0: no cap) goes as several, concatenated."""

    def __init__(self, names: Mapping[str, object], call: NetworkCall, max_rows: int | Mapping[str, int] = 0):
        self._names, self._call = tuple(names), call
        self._max_rows = dict(max_rows) if isinstance(max_rows, Mapping) else dict.fromkeys(self._names, max_rows)

    def __getitem__(self, name: str) -> Callable[[dict[str, np.ndarray]], Awaitable[dict[str, np.ndarray]]]:
        if name not in self._names:
            raise KeyError(f"no network {name!r}: the pipeline declares {', '.join(self._names) or 'none'}")
        return lambda inputs: self._rows(name, inputs)

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    async def _rows(self, name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows, cap = len(next(iter(inputs.values()))) if inputs else 0, self._max_rows.get(name, 0)
        if not cap or rows <= cap:
            return await self._call(name, inputs)
        parts = [await self._call(name, {k: v[start : start + cap] for k, v in inputs.items()}) for start in range(0, rows, cap)]
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


async def answer(
    pipeline: Definition, inputs: dict[str, np.ndarray], networks: Networks, rows: bool = True
) -> dict[str, np.ndarray]:
    """One request's answer: `run` on its rows (or on its tensors whole, `rows` false), held to OUTPUTS (every output,
    of the request's row count, its dims and type). A ValueError of `run` is the request's own (InputError); a wrong
    answer is the pipeline's bug."""
    count = len(next(iter(inputs.values()))) if rows else 0
    try:
        produced = await pipeline.run(inputs, networks)
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if not isinstance(produced, Mapping):
        raise TypeError(f"run returned {type(produced).__name__}, not a dict of its OUTPUTS")
    answered = {}
    for tensor in pipeline.outputs:
        if tensor.name not in produced:
            raise TypeError(f"run returned no {tensor.name!r} (it returned {', '.join(map(str, produced)) or 'nothing'})")
        value = np.asarray(produced[tensor.name])
        if not tensor.fits(value.shape, rows) or rows and value.shape[0] != count:
            says = f"{count} rows of {tensor.dims}" if rows else f"{tensor.dims}"
            raise TypeError(f"run returned {tensor.name!r} of shape {value.shape}; OUTPUTS says {says}")
        answered[tensor.name] = value.astype(tensor.dtype, copy=False)
    return answered
