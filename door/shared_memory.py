"""Large tensors to Triton through system shared memory, where the door runs beside it.

Over gRPC a tensor's bytes are serialized into the message, sent, and parsed again by Triton: on ResNet-50's pixels
route that was a third of the door's CPU (docs/PERFORMANCE.md). Instead, each door worker makes one region of shared
memory and registers it with Triton, which maps it then; a large tensor is copied into a free extent of it, and the
request names where it lies. Where Triton cannot map the region (it runs on another host or in another container, or
refuses the registration), the worker says so once in its log and sends every tensor in the message, as before.

The region is a file under /dev/shm of the worker's own, mode 0600, its space reserved when made (a full /dev/shm is
refused then, not met later as SIGBUS); it is not made where /dev/shm is small (a container's 64 MB), which Triton's
Python stubs need. It stays until the worker closes, so a Triton that restarts (and forgets its
registrations) can map it again; a worker that died leaves its file behind, which the next worker to start removes.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import logging
import mmap
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.grpc.aio as grpcaio
from tritonclient.utils import InferenceServerException

SHM_DIR = Path("/dev/shm")
PREFIX = "kit-door-"  # a worker's region: kit-door-PID-RANDOM
SMALLEST = 64 << 10  # bytes: a smaller tensor goes in the message, where its copy costs less than an extent's keeping
ALIGN = 64  # each extent starts on a cache line
SPARE = 4  # /dev/shm must have this many times the region free: the rest is Triton's Python stubs', which grow into it
ADMIN_TIMEOUT = 5.0  # seconds for a (un)registration: a door stopping beside a dead Triton does not wait on it
LOST = "Unable to find shared memory region"  # Triton's refusal of a request that names a region it does not hold
log = logging.getLogger("door.shared_memory")


class Extents:
    """First-fit allocation of a region's bytes: free extents kept sorted by offset and merged when given back."""

    def __init__(self, size: int):
        self.free: list[tuple[int, int]] = [(0, size)] if size else []

    def take(self, size: int) -> int | None:
        """The offset of `size` bytes no other taker holds, or None where no free extent is that long."""
        size = -(-size // ALIGN) * ALIGN
        for i, (offset, length) in enumerate(self.free):
            if length >= size:
                self.free[i : i + 1] = [(offset + size, length - size)] if length > size else []
                return offset
        return None

    def give(self, offset: int, size: int) -> None:
        size = -(-size // ALIGN) * ALIGN
        i = bisect.bisect(self.free, (offset, 0))
        if i < len(self.free) and offset + size == self.free[i][0]:  # joins the next free extent
            size += self.free.pop(i)[1]
        if i and self.free[i - 1][0] + self.free[i - 1][1] == offset:  # and the one before
            offset, size = self.free[i - 1][0], self.free[i - 1][1] + size
            i -= 1
            self.free.pop(i)
        self.free.insert(i, (offset, size))


@dataclasses.dataclass(frozen=True)
class Placed:
    """Where a tensor lies in the region, and the registration it was written under."""

    region: str
    offset: int
    size: int
    registration: int


class SharedInputs:
    """One door worker's region of shared memory for the large tensors of its requests to Triton."""

    def __init__(self, megabytes: int, admin_headers: dict[str, str] | None = None, hold_seconds: float = 120.0):
        """`admin_headers`: the key of Triton's admin calls, where it has one. `hold_seconds`: how long an extent stays
        taken after a request that Triton may still hold (its call cancelled or timed out) ended at the door: the
        longest Triton takes to answer."""
        self.size = megabytes << 20
        self.headers = admin_headers
        self.hold_seconds = hold_seconds
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.memory: mmap.mmap | None = None
        self.extents = Extents(0)
        self.registration = 0  # counts registrations: a request placed under an older one does not trigger another
        self.registered = False
        self.lock = asyncio.Lock()
        self.watchers: list[Callable[[str], None]] = []  # told how each large tensor went: "shared_memory" or "message"

    async def open(self, client: grpcaio.InferenceServerClient) -> None:
        """Make the region and register it with Triton; where either fails, tensors go in the message."""
        if not self.size:
            return
        remove_orphans()
        free = shutil.disk_usage(SHM_DIR).free
        if free < SPARE * self.size:
            log.warning(
                "/dev/shm has %d MiB free, less than %d x the door's %d MiB (--shared-memory-mb): it is left to Triton, "
                "and tensors go in the gRPC message",
                free >> 20,
                SPARE,
                self.size >> 20,
            )
            return
        try:
            self.memory = region(SHM_DIR / self.name, self.size)
        except OSError as exc:
            log.warning("no shared memory for tensors to Triton (%s): they go in the gRPC message", exc)
            return
        self.extents = Extents(self.size)
        if not await self.register(client):
            self.release_region()

    async def register(self, client: grpcaio.InferenceServerClient) -> bool:
        try:
            await client.register_system_shared_memory(
                self.name, f"/{self.name}", self.size, headers=self.headers, client_timeout=ADMIN_TIMEOUT
            )
        except InferenceServerException as exc:
            log.warning("Triton did not map the door's shared memory (%s): tensors go in the gRPC message", exc.message())
            self.registered = False
            return False
        self.registration += 1
        self.registered = True
        return True

    def place(self, arrays: dict[str, np.ndarray], datatypes: dict[str, str]) -> dict[str, Placed]:
        """The large fixed-width tensors of a request, each copied into an extent of its own; those not placed (small,
        BYTES, or no extent free) go in the message."""
        placed: dict[str, Placed] = {}
        for name, array in arrays.items():
            if array.nbytes < SMALLEST or datatypes[name] in ("BYTES", "BF16"):
                continue
            offset = self.extents.take(array.nbytes) if self.registered else None
            if offset is not None:
                self.memory[offset : offset + array.nbytes] = np.ascontiguousarray(array).data.cast("B")
                placed[name] = Placed(self.name, offset, array.nbytes, self.registration)
            for watcher in self.watchers:
                watcher("shared_memory" if offset is not None else "message")
        return placed

    def release(self, placed: dict[str, Placed], settled: bool) -> None:
        """Give the extents back: at once where Triton answered, after `hold_seconds` where it may still read them."""
        for spot in placed.values():
            if settled:
                self.extents.give(spot.offset, spot.size)
            else:
                asyncio.get_running_loop().call_later(self.hold_seconds, self.extents.give, spot.offset, spot.size)

    @staticmethod
    def lost(exc: InferenceServerException) -> bool:
        """Whether Triton refused a request for a region it no longer holds (it restarted since registering)."""
        return LOST in (exc.message() or "")

    async def recover(self, client: grpcaio.InferenceServerClient, placed: dict[str, Placed]) -> None:
        """Register the region again after Triton lost it, once for all the requests that found it lost."""
        async with self.lock:
            if self.registered and max(spot.registration for spot in placed.values()) == self.registration:
                await self.unregister(client)
                await self.register(client)

    async def close(self, client: grpcaio.InferenceServerClient | None) -> None:
        if self.registered and client is not None:
            await self.unregister(client)
        self.registered = False
        self.release_region()

    async def unregister(self, client: grpcaio.InferenceServerClient) -> None:
        """Triton forgets the region; a Triton that already has (restarted, or gone) is no error."""
        with contextlib.suppress(InferenceServerException):
            await client.unregister_system_shared_memory(self.name, headers=self.headers, client_timeout=ADMIN_TIMEOUT)

    def release_region(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None
            (SHM_DIR / self.name).unlink(missing_ok=True)


def region(path: Path, size: int) -> mmap.mmap:
    """A new file of `size` bytes at `path`, its space reserved, mapped."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
        return mmap.mmap(fd, size)
    except OSError:
        path.unlink()
        raise
    finally:
        os.close(fd)


def remove_orphans() -> None:
    """Remove the regions of door workers that are no longer running (killed before they could)."""
    for path in SHM_DIR.glob(f"{PREFIX}*"):
        pid = path.name.removeprefix(PREFIX).partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)
