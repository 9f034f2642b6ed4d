"""What quick benchmarks apart from the sweeps share (export.int8_graphs is one)."""
