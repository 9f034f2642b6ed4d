"""Files that the repository builder installs as a model's `model.py`."""
