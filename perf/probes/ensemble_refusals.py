"""Whether a refusal reaches the client: many requests at once to a model whose bounded queue is full, sent to the
model itself and to an ensemble whose one step is that model, over gRPC and over HTTP. Nothing of the kit is served:
the repository is two generated configs and a Python model that sleeps, so that what it shows is Triton's.

    python -m perf.probes.ensemble_refusals --requests 4000 --out build/probes/ensemble_refusals.json

Each request ends answered, refused (the queue-full UNAVAILABLE / 503) or never answered within --wait seconds.
The RADAR entry, and every text and image spec's entry, is such an ensemble (perf/RELIABILITY.md, make peak).
Whether the HTTP refusals arrive depends on the kernel's net.core.wmem_default (kit.server.reply_buffer), which
the report records: compare `sysctl -w net.core.wmem_default=212992` (the default) with 16777216.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import tritonclient.grpc.aio as grpcaio
import tritonclient.http.aio as httpaio

from kit.server import reply_buffer
from kit.server.runtime import ServerOptions, TritonServer
from perf.probes.output import command_line, emit

QUEUE = 8  # the step's max_queue_size: everything past it is refused at once
SLEEP_S = 0.5  # each execution's time, so that the queue stays full while the burst arrives
MODEL = f"""name: "slow"
backend: "python"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
dynamic_batching {{
  default_queue_policy {{ timeout_action: REJECT default_timeout_microseconds: 30000000 max_queue_size: {QUEUE} }}
}}
"""
MODEL_PY = f"""import time

import triton_python_backend_utils as pb


class TritonPythonModel:
    def execute(self, requests):
        time.sleep({SLEEP_S})
        return [pb.InferenceResponse([pb.Tensor("Y", pb.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
"""
ENSEMBLE = """name: "entry"
platform: "ensemble"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling {
  step [ { model_name: "slow" model_version: -1 input_map { key: "X" value: "X" } output_map { key: "Y" value: "Y" } } ]
}
"""


def write_repository(root: Path) -> Path:
    for path, text in {"slow/config.pbtxt": MODEL, "slow/1/model.py": MODEL_PY, "entry/config.pbtxt": ENSEMBLE}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "entry" / "1").mkdir(exist_ok=True)
    return root


async def burst(url: str, protocol: str, model: str, count: int, wait: float) -> Counter:
    """`count` requests at once; how each ended."""
    if protocol == "http":
        module, client = httpaio, httpaio.InferenceServerClient(url, conn_limit=count, conn_timeout=wait)
    else:
        module, client = grpcaio, grpcaio.InferenceServerClient(url)

    async def one() -> str:
        tensor = module.InferInput("X", [1, 1], "FP32")
        tensor.set_data_from_numpy(np.ones((1, 1), np.float32))
        try:
            await asyncio.wait_for(client.infer(model, [tensor]), wait)
            return "answered"
        except TimeoutError:
            return "never answered"
        except Exception as exc:  # the refusal, over either protocol
            text = str(exc).lower()
            return "refused" if "queue" in text or "unavailable" in text else f"other: {str(exc)[:100]}"

    try:
        return Counter(await asyncio.gather(*(one() for _ in range(count))))
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000, help="requests sent at once to each model and protocol")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds after which a request counts as never answered")
    parser.add_argument("--out", type=Path, help="where to save the JSON report")
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # HTTP/1.1: a socket per request in flight
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.requests + 512)), hard))
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        options = ServerOptions.on_free_ports(write_repository(Path(folder) / "repository"))
        with TritonServer(options, log_path=Path(folder) / "server.log"):
            for model in ("slow", "entry"):
                for protocol, url in (("grpc", options.grpc_url), ("http", options.http_url)):
                    ended = asyncio.run(burst(url, protocol, model, args.requests, args.wait))
                    results[f"{model} over {protocol}"] = dict(ended)
                    print(f"{model} over {protocol}: {dict(ended)}", flush=True)
    emit(
        {
            "command": command_line("perf.probes.ensemble_refusals", argv),
            "queue": QUEUE,
            "net.core.wmem_default": reply_buffer.current(),
            "results": results,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
