"""Batching inputs of variable shape: length buckets for Triton's equal-shape batcher (buckets), and
merge policies, padding and cost measurement for batches of mixed shapes (merge, padding, measure_cost)."""
