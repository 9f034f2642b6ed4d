"""Hand-rolled services from the field reports (RADAR, OCR), on the kit's models and pipelines."""
