"""The Triton adapter layer: what the model.py files share to turn requests into pipeline calls.

`triton` holds the one error helper and the one BLS helper (with one error type), `settings` the
typed settings of every model, `artifacts` the loaders of the exported files in a version folder.
Importable outside a Python-backend stub: `triton_python_backend_utils` is imported when used.
"""
