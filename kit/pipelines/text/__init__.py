"""Text pipelines: chunking, aggregation and the RADAR pre/post-processing."""
