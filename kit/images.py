"""Checks on a normalised image request before it joins a batch, so a bad one fails alone."""

from __future__ import annotations

import numpy as np


class ImageError(ValueError):
    """The request's image cannot be classified; the message says why."""


def check_images(array: np.ndarray, max_pixels: int) -> None:
    """`array` is [n, 3, height, width] float32: n images of one shape, normalised."""
    if array.ndim != 4 or array.shape[1] != 3:
        raise ImageError(f"INPUT must be [batch, 3, height, width], got shape {list(array.shape)}")
    _, _, height, width = array.shape
    if height == 0 or width == 0 or len(array) == 0:
        raise ImageError(f"INPUT has an empty dimension: shape {list(array.shape)}")
    if height * width > max_pixels:
        raise ImageError(f"image of {height}x{width} = {height * width} pixels exceeds the limit of {max_pixels}")
    if not np.isfinite(array).all():
        raise ImageError("INPUT contains NaN or infinite values")
