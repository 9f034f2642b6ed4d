"""Hand-rolled RADAR services from the field reports, on the kit's model and text pipeline."""
