"""An image classifier's preprocessing, as its Hugging Face image processor computes it with the PIL backend: decode
the request's bytes, resize (to a height and width, or the shortest edge to a length, ConvNeXt's `crop_pct` way
included), centre-crop, rescale and normalise, channels first. The export (export.image_classifier) derives a
`Preprocessing` from the checkpoint's processor, checks it against the processor on sample images, and writes it as
preprocessing.json; the server reads it from there, so that it needs neither transformers nor PyTorch."""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from kit.pipelines.errors import InputError

CONVNEXT_WARP_EDGE = 384  # ConvNeXt's processor resizes to a square without cropping from this shortest edge on


@dataclass(frozen=True)
class Preprocessing:
    """`height` x `width`: what the graph takes. Resize to `resize_height` x `resize_width`, or (where
    `shortest_edge`) the shorter side to `shortest_edge` (ConvNeXt's processor, where `crop_pct`: to
    shortest_edge / crop_pct, then a centre crop of shortest_edge), with PIL's `resample` filter; then a centre
    crop of `crop_height` x `crop_width` where set; pixels times `rescale_factor` where set; then (x - mean) / std
    per channel where `mean` is set. 0 and empty lists mean a step is off."""

    height: int
    width: int
    resample: int = int(Image.Resampling.BILINEAR)
    resize_height: int = 0
    resize_width: int = 0
    shortest_edge: int = 0
    crop_pct: float = 0.0
    crop_height: int = 0
    crop_width: int = 0
    rescale_factor: float = 0.0
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()

    @classmethod
    def load(cls, path: Path) -> Preprocessing:
        values = json.loads(Path(path).read_text())
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")

    def resized(self, image: Image.Image) -> Image.Image:
        width, height = image.size
        if self.shortest_edge and self.crop_pct and self.shortest_edge < CONVNEXT_WARP_EDGE:
            image = image.resize(shorter_side_to(width, height, int(self.shortest_edge / self.crop_pct)), self.resample)
            return image.crop(centred(image.size, self.shortest_edge, self.shortest_edge))
        if self.shortest_edge and self.crop_pct:
            return image.resize((self.shortest_edge, self.shortest_edge), self.resample)
        if self.shortest_edge:
            return image.resize(shorter_side_to(width, height, self.shortest_edge), self.resample)
        if self.resize_height:
            return image.resize((self.resize_width, self.resize_height), self.resample)
        return image

    def __call__(self, image: Image.Image) -> np.ndarray:
        """One RGB image as the graph's float32 [3, height, width]."""
        image = self.resized(image)
        if self.crop_height:
            image = image.crop(centred(image.size, self.crop_height, self.crop_width))
        pixels = np.asarray(image).transpose(2, 0, 1)
        if pixels.shape[1:] != (self.height, self.width):
            raise InputError(f"the image became {pixels.shape[1]}x{pixels.shape[2]}, not the model's {self.height}x{self.width}")
        values = (
            (pixels.astype(np.float64) * self.rescale_factor).astype(np.float32)
            if self.rescale_factor
            else pixels.astype(np.float32)
        )
        if self.mean:
            mean = np.asarray(self.mean, dtype=np.float32)[:, None, None]
            std = np.asarray(self.std, dtype=np.float32)[:, None, None]
            values = (values - mean) / std
        return values.astype(np.float32)


def shorter_side_to(width: int, height: int, length: int) -> tuple[int, int]:
    """(width, height) with the shorter side `length` and the longer scaled alike, rounded down as transformers does."""
    if width <= height:
        return length, int(length * height / width)
    return int(length * width / height), length


def centred(size: tuple[int, int], height: int, width: int) -> tuple[int, int, int, int]:
    """PIL's crop box of `height` x `width` in the middle of an image of `size` (width, height), with transformers'
    rounding (the extra pixel of an odd margin goes to the bottom and right); outside the image PIL pads with 0."""
    top, left = (size[1] - height) // 2, (size[0] - width) // 2
    return left, top, left + width, top + height


def decode_image(raw: bytes, max_bytes: int, max_pixels: int) -> Image.Image:
    """The request's encoded image as RGB, its size and pixel count checked before it is decoded."""
    if not raw:
        raise InputError("IMAGE is empty")
    if len(raw) > max_bytes:
        raise InputError(f"IMAGE is {len(raw)} bytes; the maximum is {max_bytes}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the pixel limit below is lower
            image = Image.open(io.BytesIO(raw))
            width, height = image.size
            if width * height > max_pixels:
                raise InputError(f"IMAGE is {width}x{height} = {width * height} pixels; the maximum is {max_pixels}")
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise InputError(f"IMAGE is not an image PIL can decode ({type(exc).__name__})") from None


def decode_request_image(tensor: np.ndarray, max_bytes: int, max_pixels: int) -> Image.Image:
    """The one image of a request row's IMAGE (BYTES [1])."""
    items = tensor.reshape(-1)
    if items.size != 1:
        raise InputError(f"IMAGE must hold exactly one encoded image per row, got {items.size}")
    return decode_image(bytes(items[0]), max_bytes, max_pixels)
