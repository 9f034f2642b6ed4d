"""The GPU measurement of issue 13 in one command (docs/GPU.md): the kit's embedded Triton on the gpu-embedded
profile against Flask per request, FastAPI with an asyncio batcher and the offline limit on one GPU, then
ResNet-50's batching variants; with the carry (`carry.py`) that brings what the GPU host lacks.

    bash perf/gpu/run.sh                                  # on the GPU host, with the carry .gpu/
    python -m perf.gpu --device cpu --quick --out DIR     # the same code path on CPU, tiny models (make gpu-dry-run)
"""
