"""The control plane: builds runnable repositories from the committed sources and a profile, and runs,
supervises and health-checks the embedded server. It imports the adapter layer's settings (to check
every model's parameters at build time), never the other way round."""
