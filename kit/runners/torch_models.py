"""The PyTorch modules the kit serves and exports: one definition for the ONNX export and the PyTorch runner.

Both wrappers take and return exactly the tensors of their ONNX models, so a served model computes
the same function whichever runner serves it:

- `LogitsOnly`: a sequence classifier's `input_ids`, `attention_mask` -> `logits` (RADAR), a cross-encoder's
  with its `token_type_ids` where it has them, and a token classifier's (one row of logits per token). No model
  output object or cache leaves it (the dynamo exporter fails on a returned KV cache).
- `PooledEmbeddings`: an encoder's `input_ids`, `attention_mask` -> `embeddings`, its last hidden state
  pooled (the mean of the real tokens, or the first token's) and optionally L2-normalised, as
  sentence-transformers computes a sentence embedding.
- `PaddedResNet`: `pixel_values` (images zero-padded at the bottom/right) and `image_sizes` ->
  `probs`, equal to each image's unpadded result.
- `ImageProbabilities`: an image classifier's `pixel_values`, all of its one size, -> `scores`, the softmax of its
  logits (an image-classification spec's model, export.image_classifier).

Each also has `check(inputs)`: the runner calls it on the numpy inputs before they reach the device,
so that a request the model cannot take fails alone with a reason.

Why `PaddedResNet` needs the sizes: zero padding changes a CNN's output in two ways. The global
average pool would average the padded area's activations too (the large effect), and every 3x3/7x7
convolution and the max pool near the bottom/right border would read padded-area activations that
are not zero: BatchNorm's shift makes them non-zero after the first layer (a smaller effect that
grows with depth). `PaddedResNet` zeroes the padded area of the input of every spatial operation
(the same zeros the unpadded model's own convolution padding reads; after ReLU a zero is also what
the max pool's padding amounts to) and averages only the valid cells of the last feature map. With
stride-2 layers the valid region of a feature map at stride s is ceil(h/s) x ceil(w/s), which is
what the unpadded model computes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    PreTrainedModel,
    ResNetForImageClassification,
)

POOLINGS = ("mean", "cls")
POOLING_FILE = "pooling.json"  # beside a saved encoder: how its embeddings are pooled ({"pooling", "normalize"})
# fairseq-style models number positions from pad_token_id + 1, so two positions are never usable.
OFFSET_POSITION_MODELS = {
    "roberta",
    "roberta-prelayernorm",
    "xlm-roberta",
    "xlm-roberta-xl",
    "camembert",
    "data2vec-text",
    "mpnet",
}


def usable_positions(config) -> int | None:
    """The longest input the position embeddings allow; None for a model without a stated limit."""
    positions = getattr(config, "max_position_embeddings", None)
    if positions is None:
        return None
    if config.model_type in OFFSET_POSITION_MODELS:
        return positions - config.pad_token_id - 1
    return positions


class TokenModel(torch.nn.Module):
    """A text model of `input_ids` and `attention_mask` [batch, tokens]."""

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model
        self.vocab_size = model.config.vocab_size
        self.max_length = usable_positions(model.config)

    def check(self, inputs: dict[str, np.ndarray]) -> None:
        """Refuse, on the CPU, what an embedding lookup would fail on: on a GPU that failure is a device-side
        assert, which breaks the process's CUDA context for every later request, not just this one."""
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        if ids.ndim != 2 or mask.shape != ids.shape:
            raise ValueError(f"input_ids {ids.shape} and attention_mask {mask.shape} must both be [batch, tokens]")
        if self.max_length is not None and ids.shape[1] > self.max_length:
            raise ValueError(f"{ids.shape[1]} tokens exceed the model's {self.max_length} positions")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"token ids must lie in 0..{self.vocab_size - 1}")


class LogitsOnly(TokenModel):
    """Returns the logits tensor alone: Triton's config names one output. A cross-encoder (export.ranking_model) also
    takes its pairs' segments, `token_type_ids`, where its tokenizer makes them."""

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **types, return_dict=True).logits


class PooledEmbeddings(TokenModel):
    """An encoder's sentence embedding: `pooling` mean (over the tokens the mask keeps) or cls (the first token's
    hidden state), L2-normalised where `normalize`."""

    def __init__(self, model: PreTrainedModel, pooling: str = "mean", normalize: bool = False):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling {pooling!r} is not one of {POOLINGS}")
        super().__init__(model)
        self.pooling, self.normalize = pooling, normalize

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=-1) if self.normalize else pooled


class ValidMasks:
    """Per stride, a [batch, 1, H, W] mask of each image's valid region (cached for one forward)."""

    def __init__(self, image_sizes: torch.Tensor):
        self.sizes = image_sizes
        self.cache: dict[int, torch.Tensor] = {}

    def valid(self, stride: int) -> torch.Tensor:
        return torch.div(self.sizes + (stride - 1), stride, rounding_mode="floor")

    def mask(self, x: torch.Tensor, stride: int) -> torch.Tensor:
        if stride not in self.cache:
            valid = self.valid(stride)
            rows = torch.arange(x.shape[2], device=x.device)[None, :] < valid[:, :1]
            cols = torch.arange(x.shape[3], device=x.device)[None, :] < valid[:, 1:]
            self.cache[stride] = (rows[:, None, :, None] & cols[:, None, None, :]).to(x.dtype)
        return self.cache[stride]


class PaddedResNet(torch.nn.Module):
    """A transformers ResNet whose output for a padded image equals its output for the image alone.

    `mask_layers=False` masks only the global pool: kept to measure what per-layer masking buys.
    """

    def __init__(self, model: ResNetForImageClassification, mask_layers: bool = True):
        super().__init__()
        self.resnet = model.resnet
        self.classifier = model.classifier
        self.mask_layers = mask_layers

    def check(self, inputs: dict[str, np.ndarray]) -> None:
        """Cheap shape checks on the CPU: each image's size must lie inside the padded batch."""
        pixels, sizes = inputs["pixel_values"], inputs["image_sizes"]
        if pixels.ndim != 4 or sizes.shape != (len(pixels), 2):
            raise ValueError(f"pixel_values {pixels.shape} must be [batch, 3, H, W] and image_sizes {sizes.shape} [batch, 2]")
        if ((sizes < 1) | (sizes > np.array(pixels.shape[2:]))).any():
            raise ValueError(f"image_sizes must lie within 1..{list(pixels.shape[2:])}, the padded height and width")

    def masked(self, x: torch.Tensor, masks: ValidMasks, stride: int) -> torch.Tensor:
        return x * masks.mask(x, stride) if self.mask_layers else x

    def block(self, block: torch.nn.Module, x: torch.Tensor, masks: ValidMasks, stride: int) -> tuple[torch.Tensor, int]:
        """A basic or bottleneck residual block; convolutions wider than 1x1 read masked inputs."""
        hidden = x
        for conv in block.layer:
            if conv.convolution.kernel_size[0] > 1:
                hidden = self.masked(hidden, masks, stride)
            hidden = conv(hidden)
            stride *= conv.convolution.stride[0]
        return block.activation(hidden + block.shortcut(x)), stride

    def forward(self, pixel_values: torch.Tensor, image_sizes: torch.Tensor) -> torch.Tensor:
        masks = ValidMasks(image_sizes)
        stem = self.resnet.embedder
        x = stem.embedder(self.masked(pixel_values, masks, 1))
        x = stem.pooler(self.masked(x, masks, 2))
        stride = 4
        for stage in self.resnet.encoder.stages:
            for block in stage.layers:
                x, stride = self.block(block, x, masks, stride)
        valid = masks.valid(stride)
        pooled = (x * masks.mask(x, stride)).sum(dim=(2, 3)) / (valid[:, :1] * valid[:, 1:]).to(x.dtype)
        return torch.softmax(self.classifier(pooled), dim=-1)


class ImageProbabilities(torch.nn.Module):
    """An image classifier's label probabilities for images preprocessed to its one size."""

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model
        self.channels = getattr(model.config, "num_channels", 3)

    def check(self, inputs: dict[str, np.ndarray]) -> None:
        pixels = inputs["pixel_values"]
        if pixels.ndim != 4 or pixels.shape[1] != self.channels:
            raise ValueError(f"pixel_values {pixels.shape} must be [batch, {self.channels}, height, width]")

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.model(pixel_values=pixel_values).logits, dim=-1)


def with_fused_attention(auto: type, checkpoint: Path, dtype: torch.dtype) -> PreTrainedModel:
    """The model with PyTorch's scaled-dot-product attention where its architecture has it (MPNet, for one, has
    not: it keeps its own)."""
    try:
        return auto.from_pretrained(checkpoint, dtype=dtype, attn_implementation="sdpa")
    except ValueError as exc:
        if "scaled_dot_product_attention" not in str(exc):
            raise
        return auto.from_pretrained(checkpoint, dtype=dtype)


def load_serving_module(checkpoint: Path, dtype: torch.dtype) -> torch.nn.Module:
    """The wrapper its exported ONNX model was made from, over a checkpoint folder: a ResNet (by its config's model
    type) becomes a `PaddedResNet`, another image classifier (by its architecture) `ImageProbabilities`, an encoder
    saved with its pooling (pooling.json) `PooledEmbeddings`, a token classifier (by its architecture) and anything
    else a sequence classifier's `LogitsOnly`;
    text models with PyTorch's scaled-dot-product attention where they have it (the model's own fused kernels) and no
    cache."""
    if not (checkpoint / "config.json").is_file():
        raise FileNotFoundError(f"no checkpoint in {checkpoint}: the exports save one into <out>/checkpoint")
    config = AutoConfig.from_pretrained(checkpoint)
    if config.model_type == "resnet":
        return PaddedResNet(ResNetForImageClassification.from_pretrained(checkpoint, dtype=dtype)).eval()
    if any(name.endswith("ForImageClassification") for name in config.architectures or ()):
        return ImageProbabilities(AutoModelForImageClassification.from_pretrained(checkpoint, dtype=dtype)).eval()
    if (checkpoint / POOLING_FILE).is_file():
        pooling = json.loads((checkpoint / POOLING_FILE).read_text())
        encoder = with_fused_attention(AutoModel, checkpoint, dtype)
        return PooledEmbeddings(encoder, pooling["pooling"], bool(pooling["normalize"])).eval()
    tokens = any(name.endswith("ForTokenClassification") for name in config.architectures or ())
    model = with_fused_attention(
        AutoModelForTokenClassification if tokens else AutoModelForSequenceClassification, checkpoint, dtype
    )
    model.config.use_cache = False
    return LogitsOnly(model).eval()
