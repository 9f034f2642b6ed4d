"""OCR and health-code reading: pure NumPy/OpenCV steps around the PP-OCRv4 models, tested without Triton."""
