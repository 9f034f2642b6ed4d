"""The door's own CPU per image on a pixels route (issue 39's image target: <= 1.5 ms), by body: JSON with base64 data
against the float32 bytes themselves (`?shape=`), at each image side, in one run. Triton serves `resnet50` on a fresh
CPU repository; the door runs in its own process, and its CPU-seconds and minor page faults over each window (from
/proc) are divided by the images it answered. The bodies take turns in rounds, so a loaded machine weighs on both
alike; the door's CPU, not the wall time, is what compares. `--base` adds the door of another checkout (the code
before a change), in the same rounds; a body that door refuses is left out for it.

    python -m perf.probes.door_pixels --sides 224 387 --images 40 --rounds 2 --out perf/results/door/pixels.json
    mkdir BASE && git archive HEAD~1 | tar -x -C BASE && python -m perf.probes.door_pixels --base BASE   # before vs after
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil

from kit.control.configs import REPO_ROOT
from kit.control.repository import build
from kit.server.runtime import ServerOptions, TritonServer, free_port
from perf.probes.output import command_line, emit

MODEL, ROUTE = "resnet50", "/v1/resnet50"


def bodies(side: int, count: int) -> dict[str, list[tuple[str, str, bytes]]]:
    """`count` images [3, side, side] as each body: (path, media type, bytes)."""
    rng = np.random.default_rng(side)
    images = [rng.standard_normal((3, side, side), dtype=np.float32) for _ in range(count)]
    shape = f"{ROUTE}?shape=3,{side},{side}"
    return {
        "json": [
            (ROUTE, "application/json", json.dumps({"shape": [3, side, side], "data": base64.b64encode(a).decode()}).encode())
            for a in images
        ],
        "binary": [(shape, "application/octet-stream", a.tobytes()) for a in images],
    }


def send_all(port: int, requests: list[tuple[str, str, bytes]], clients: int) -> None:
    """Every request, `clients` at a time, each client on one kept-alive connection; any answer but 200 fails."""

    def client(share: list[tuple[str, str, bytes]]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            for path, media, body in share:
                connection.request("POST", path, body, {"Content-Type": media})
                response = connection.getresponse()
                answer = response.read()
                if response.status != 200:
                    raise RuntimeError(f"{path}: {response.status} {answer[:300]!r}")
        finally:
            connection.close()

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, [requests[k::clients] for k in range(clients)]))


def minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def measured(door: psutil.Process, port: int, requests: list, clients: int) -> tuple[float, int]:
    """The door's CPU-seconds and minor page faults while it answers `requests`."""
    before, faults = sum(door.cpu_times()[:2]), minor_faults(door.pid)
    send_all(port, requests, clients)
    return sum(door.cpu_times()[:2]) - before, minor_faults(door.pid) - faults


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sides", type=int, nargs="+", default=[224, 387], help="image sides (square images)")
    parser.add_argument("--images", type=int, default=40, help="images per body, side, door and round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds in which the doors and bodies take turns")
    parser.add_argument("--clients", type=int, default=4, help="requests in flight")
    parser.add_argument(
        "--base", type=Path, help="another checkout's door (say, `git archive` of the commit before), measured in turns"
    )
    parser.add_argument("--out", type=Path, help="where to save the report (JSON)")
    args = parser.parse_args(argv)
    checkouts = {"this": REPO_ROOT} | ({"base": args.base.resolve()} if args.base else {})
    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as stack:
        repository = Path(work) / "repository"
        build("cpu", repository, models=[MODEL])
        server = stack.enter_context(TritonServer(ServerOptions.on_free_ports(repository), log_path=Path(work) / "server.log"))
        doors = {}
        for name, root in checkouts.items():
            doors[name] = stack.enter_context(door(root, server.options.grpc_url, Path(work) / f"{name}.log"))
        rows = run(doors, args)
    emit({"command": command_line("perf.probes.door_pixels", argv), "clients": args.clients, "rows": rows}, args.out)
    return 0


@contextlib.contextmanager
def door(root: Path, triton: str, log: Path):
    """A door of the checkout at `root` in its own process: (its process, its port)."""
    port = free_port()
    command = [sys.executable, "-m", "door", "--triton", triton, "--port", str(port), "--wait", "60"]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=root, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(port)
        yield psutil.Process(process.pid), port
    finally:
        process.terminate()
        process.wait(20)


def run(doors: dict, args) -> list[dict]:
    rows = []
    for side in args.sides:
        sets = bodies(side, args.images)
        totals = {(name, body): [0.0, 0, 0] for name in doors for body in sets if takes(doors[name][1], sets[body][:2])}
        for _ in range(args.rounds):
            for (name, body), total in totals.items():
                cpu, faults = measured(*doors[name], sets[body], args.clients)
                total[:] = [total[0] + cpu, total[1] + faults, total[2] + len(sets[body])]
        for (name, body), (cpu, faults, images) in totals.items():
            rows.append(
                {
                    "door": name,
                    "side": side,
                    "body": body,
                    "body_bytes": len(sets[body][0][2]),
                    "images": images,
                    "door_cpu_ms_per_image": round(1000 * cpu / images, 3),
                    "minor_faults_per_image": round(faults / images, 1),
                }
            )
            print(f"  {name} door, {side}x{side} {body}: {rows[-1]['door_cpu_ms_per_image']} ms of its CPU per image", flush=True)
    return rows


def takes(port: int, requests: list) -> bool:
    """Whether the door answers `requests` (a warm-up of that body's path): a base door may not take a body."""
    try:
        send_all(port, requests, 1)
    except RuntimeError as exc:
        print(f"  skipped, the door refused it: {exc}", flush=True)
        return False
    return True


def wait_for(port: int, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/health/ready")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the door on port {port} was not ready within {seconds:g} s")


if __name__ == "__main__":
    sys.exit(main())
