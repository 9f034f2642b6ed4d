"""Clients for the kit's models over Triton's HTTP and gRPC protocols (tritonclient)."""
