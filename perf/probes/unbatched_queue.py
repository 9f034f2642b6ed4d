"""What Triton's queue policy costs a model that does not batch (max_batch_size 0), as the OCR entries and every
unbatched pipeline entry are: a Python model that answers at once, its config without `dynamic_batching`, with an
empty one, and with the kit's bounded queue policy (REJECT after 30 s, at most 512 waiting), each answering in the
three ways the kit's models do (EXECUTE), loaded by a burst of requests sent at once from one client and by clients
that send their next request when their last is answered. Nothing of the kit is served, so that what it shows is
Triton's.

    python -m perf.probes.unbatched_queue --burst 128 --clients 16 --out build/probes/unbatched_queue.json

Each load reports its wall time and the mean time a request waited in Triton's queue (its statistics).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio

from kit.server.runtime import ServerOptions, TritonServer
from perf.probes.output import command_line, emit

BATCHING = {
    "no dynamic_batching": "",
    "dynamic_batching {}": "dynamic_batching { }",
    "bounded queue policy": (
        "dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 30000000 "
        "allow_timeout_override: true max_queue_size: 512 } }"
    ),
}
CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{batching}
"""
# How `execute` answers, as the kit's Python models do: returning the responses; awaiting in an async `execute`
# (the OCR entries); or handing the request to another thread that answers through its response sender while
# `execute` returns (kit.adapters.handoff: the text, pixel and pipeline entries).
ANSWER = (
    '\n    return [pb.InferenceResponse([pb.Tensor("Y", pb.get_input_tensor_by_name(r, "X").as_numpy() * 2)]) for r in requests]'
)
EXECUTE = {
    "returned, no thread started": "def execute(self, requests):" + ANSWER,
    "returned": "def initialize(self, args):\n    self.pool = ThreadPoolExecutor(4)\n\ndef execute(self, requests):" + ANSWER,
    "awaited": "async def execute(self, requests):\n    await asyncio.sleep(0)" + ANSWER,
    "handed off": (
        "def initialize(self, args):\n    self.pool = ThreadPoolExecutor(4)\n\n"
        "def execute(self, requests):\n"
        "    for r in requests:\n"
        "        sender, y = r.get_response_sender(), pb.get_input_tensor_by_name(r, 'X').as_numpy() * 2\n"
        "        final = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL\n"
        "        self.pool.submit(lambda s=sender, y=y: s.send(pb.InferenceResponse([pb.Tensor('Y', y)]), flags=final))\n"
        "    return None"
    ),
}
MODEL = "echo"
MODEL_PY = """import asyncio
from concurrent.futures import ThreadPoolExecutor

import triton_python_backend_utils as pb


class TritonPythonModel:
{execute}
"""


def write_repository(root: Path, batching: str, execute: str) -> Path:
    (root / MODEL / "1").mkdir(parents=True)
    (root / MODEL / "config.pbtxt").write_text(CONFIG.format(name=MODEL, batching=BATCHING[batching]))
    body = "\n".join("    " + line for line in EXECUTE[execute].splitlines())
    (root / MODEL / "1" / "model.py").write_text(MODEL_PY.format(execute=body))
    return root


def tensor(module, values: np.ndarray):
    x = module.InferInput("X", list(values.shape), "FP32")
    x.set_data_from_numpy(values)
    return x


async def burst(url: str, count: int) -> tuple[float, int]:
    """`count` requests sent at once from one client: seconds until the last has ended, and how many failed."""
    client = grpcaio.InferenceServerClient(url)
    start = time.perf_counter()
    try:
        ended = await asyncio.gather(
            *(client.infer(MODEL, [tensor(grpcaio, np.ones(8, np.float32))]) for _ in range(count)), return_exceptions=True
        )
        return time.perf_counter() - start, sum(isinstance(e, Exception) for e in ended)
    finally:
        await client.close()


def closed_loop(url: str, clients: int, per_client: int) -> float:
    """`clients` threads, each with its own client, sending its next request when its last is answered."""

    def run(_: int) -> None:
        client = grpcclient.InferenceServerClient(url)
        for _ in range(per_client):
            client.infer(MODEL, [tensor(grpcclient, np.ones(8, np.float32))])
        client.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    return time.perf_counter() - start


def queue_ms(url: str) -> float:
    stats = grpcclient.InferenceServerClient(url).get_inference_statistics(MODEL).model_stats[0].inference_stats
    return stats.queue.ns / max(1, stats.success.count) / 1e6


def measure(batching: str, execute: str, args: argparse.Namespace) -> dict:
    """One model alone on a server of its own."""
    with tempfile.TemporaryDirectory() as folder:
        options = ServerOptions.on_free_ports(write_repository(Path(folder) / "repository", batching, execute))
        with TritonServer(options, log_path=Path(folder) / "server.log"):
            url = options.grpc_url
            asyncio.run(burst(url, 4))  # warm
            burst_s, failed = asyncio.run(burst(url, args.burst))
            return {
                f"burst of {args.burst}, s": round(burst_s, 3),
                "burst failed": failed,
                f"{args.clients} closed-loop clients x {args.per_client}, s": round(
                    closed_loop(url, args.clients, args.per_client), 3
                ),
                "mean queue wait, ms": round(queue_ms(url), 2),
            }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--burst", type=int, default=128, help="requests sent at once from one client")
    parser.add_argument("--clients", type=int, default=16, help="closed-loop clients")
    parser.add_argument("--per-client", type=int, default=8, help="requests each closed-loop client sends")
    parser.add_argument("--out", type=Path, help="where to save the JSON report")
    args = parser.parse_args(argv)
    results = {}
    for batching in BATCHING:
        for execute in EXECUTE:
            results[f"{batching}, {execute}"] = measure(batching, execute, args)
            print(f"{batching}, {execute}: {results[f'{batching}, {execute}']}", flush=True)
    emit({"command": command_line("perf.probes.unbatched_queue", argv), "results": results}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
