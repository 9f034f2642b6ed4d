"""Model runners outside Triton: ONNX Runtime sessions, batched the way Triton would batch them."""
