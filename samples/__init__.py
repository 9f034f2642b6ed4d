"""Sample inputs made offline and deterministically (no data set can be downloaded): texts and images for
exports, tests and benchmarks. Not part of the serving package."""
