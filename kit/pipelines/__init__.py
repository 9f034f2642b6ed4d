"""Pure pipelines: text, OCR and batching logic on NumPy, OpenCV and tokenizers.

No Triton, no control plane, no file reading: the adapter layer (kit.adapters) loads artifacts and
turns requests into calls of these functions, and the same functions run in tests, baselines and
benchmarks.
"""
