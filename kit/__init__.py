"""The kit's importable library: runtime, repository builder and the pipelines' pure functions."""
