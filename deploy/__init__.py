"""Deployment files for the GPU target (docker-compose.yml, Kubernetes, metrics) and their checks."""
