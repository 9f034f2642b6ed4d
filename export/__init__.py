"""Model sources -> ONNX: each export is validated against its source before it is written."""
