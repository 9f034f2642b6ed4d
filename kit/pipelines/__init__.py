"""Pure pipelines: text, image and batching logic on NumPy, OpenCV and tokenizers, and the contract of a user's own
pre- and post-processing (custom: the `pipeline` task's, which the shipped OCR models' own code, ocr/, builds on).

No Triton, no control plane, no file reading: the adapter layer (kit.adapters) loads artifacts and
turns requests into calls of these functions, and the same functions run in tests, baselines and
benchmarks.
"""
