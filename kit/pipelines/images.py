"""Checks on a normalised image request (resnet50) before it joins a batch, so a bad one fails alone."""

from __future__ import annotations

import numpy as np

from kit.pipelines.errors import InputError


def check_images(array: np.ndarray, max_pixels: int) -> None:
    """`array` is [n, 3, height, width] float32: n images of one shape, normalised."""
    if array.ndim != 4 or array.shape[1] != 3:
        raise InputError(f"INPUT must be [batch, 3, height, width], got shape {list(array.shape)}")
    _, _, height, width = array.shape
    if height == 0 or width == 0 or len(array) == 0:
        raise InputError(f"INPUT has an empty dimension: shape {list(array.shape)}")
    if height * width > max_pixels:
        raise InputError(f"image of {height}x{width} = {height * width} pixels exceeds the limit of {max_pixels}")
    if not np.isfinite(array).all():
        raise InputError("INPUT contains NaN or infinite values")
