"""Shape buckets, so that Triton's dynamic batcher (equal shapes only) can merge variable inputs."""
