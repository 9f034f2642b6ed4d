"""Faults under load, all at once: the served kit (Triton supervised, the door in front) under closed-loop clients of
texts, images and a user spec's model while a seeded scheduler injects faults, every answer checked against the
in-process reference (`python -m perf chaos`, `make chaos`; docs/RELIABILITY.md)."""
