"""OCR and health-code reading: NumPy/OpenCV steps around the PP-OCRv4 models."""
