"""What the served tests read of Triton's statistics: a model's requests and executions, to show that concurrent
requests shared executions."""

from __future__ import annotations

import time

SETTLE_S = 60.0  # the longest wait for Triton's statistics to count what was answered


def executions(grpc_client, model: str) -> tuple[int, int]:
    stats = grpc_client.get_inference_statistics(model).model_stats[0]
    return stats.inference_stats.success.count, stats.execution_count


def counted(grpc_client, before: dict[str, tuple[int, int]], wanted: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Each model's requests and executions since `before`, read once Triton has counted the `wanted` requests and no
    count has moved for a while: a Python model reports its statistics after it sends its responses, so a client can
    hold every answer before the last executions are counted (a loaded machine showed 70 of 80)."""
    deadline, last = time.monotonic() + SETTLE_S, None
    while True:
        now = {m: tuple(a - b for a, b in zip(executions(grpc_client, m), was)) for m, was in before.items()}
        done = all(now[m][0] >= n for m, n in wanted.items())
        if (done and now == last) or time.monotonic() > deadline:
            return now
        last = now if done else None
        time.sleep(0.2)
