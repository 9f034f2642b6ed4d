"""Benchmarks: scripts that print and save their numbers (no timed assertions in tests)."""
