"""Batching: length buckets, padding of mixed shapes, and merge policies."""
