"""The server: the Triton process run and supervised, the `make serve` command, its health check, and a model
updated under load. It serves what kit.control builds."""
