"""The GPU host: what it lacks carried to it (carry.py), the models generated there (models.py), and the one
command that serves and measures the kit on it (run.sh; docs/GPU.md)."""
