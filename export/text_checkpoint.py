"""Loading and checking a Hugging Face text checkpoint, as every text export does (export.text_model's classifiers
and encoders, export.ranking_model's cross-encoders, export.token_model's token classifiers): the module exported and
served, its fast tokenizer (serving tokenizes with the `tokenizers` library, from the tokenizer.json written here), the
longest input it takes and its pad token. A checkpoint loads exactly as a user with network access would load it: a
hub id, or a local directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, PreTrainedTokenizerBase
from transformers.utils import cached_file

from kit.runners.torch_models import LogitsOnly, PooledEmbeddings, TokenModel, usable_positions

CLASSIFICATION, FEATURE_EXTRACTION = "text-classification", "feature-extraction"
# sentence-transformers' module types (modules.json) that the embedder reproduces; any other module is refused
ST_MODULES = {f"sentence_transformers.models.{name}" for name in ("Transformer", "Pooling", "Normalize")}
ST_POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
UNSET_MAX_LENGTH = 1_000_000  # tokenizers without a stated limit report int(1e30)


class ExportError(Exception):
    """The source cannot be exported as asked; the message says why."""


def sentence_transformers_pooling(source: str) -> tuple[str | None, bool | None]:
    """The pooling and normalisation a sentence-transformers checkpoint declares (None for each it does not): what
    sentence-transformers would compute, which the embedder must match."""
    modules_file = cached_file(source, "modules.json", _raise_exceptions_for_missing_entries=False)
    if modules_file is None:
        return None, None
    modules = json.loads(Path(modules_file).read_text())
    unknown = [m["type"] for m in modules if m["type"] not in ST_MODULES]
    if unknown:
        raise ExportError(f"its sentence-transformers modules include {', '.join(unknown)}, which the kit does not reproduce")
    normalize = any(m["type"].endswith(".Normalize") for m in modules)
    pooling = None
    for module in modules:
        if module["type"].endswith(".Pooling"):
            config_file = cached_file(source, f"{module['path']}/config.json", _raise_exceptions_for_missing_entries=False)
            settings = json.loads(Path(config_file).read_text())
            modes = [key for key, on in settings.items() if key.startswith("pooling_mode") and on]
            if len(modes) != 1 or modes[0] not in ST_POOLING_MODES:
                raise ExportError(f"its Pooling module uses {modes}; the kit pools by one of {list(ST_POOLING_MODES)}")
            pooling = ST_POOLING_MODES[modes[0]]
    return pooling, normalize


def load_model(source: str, task: str = CLASSIFICATION, pooling: str | None = None, normalize: bool | None = None) -> TokenModel:
    """The module exported and served: a classifier's logits, or an encoder's pooled embedding."""
    if task == CLASSIFICATION:
        model = AutoModelForSequenceClassification.from_pretrained(source, dtype=torch.float32)
        model.config.use_cache = False  # a classifier needs no cache, and a cache breaks the export
        return LogitsOnly(model.eval()).eval()
    declared_pooling, declared_normalize = sentence_transformers_pooling(source)
    encoder = AutoModel.from_pretrained(source, dtype=torch.float32).eval()
    chosen = pooling or declared_pooling or "mean"
    return PooledEmbeddings(encoder, chosen, bool(declared_normalize if normalize is None else normalize)).eval()


def load_tokenizer(source: str) -> PreTrainedTokenizerBase:
    """Serving tokenizes with the `tokenizers` library, so only a fast tokenizer has a tokenizer.json to ship."""
    tokenizer = AutoTokenizer.from_pretrained(source)
    if not getattr(tokenizer, "is_fast", False):
        raise ExportError(
            f"{source} has a slow (Python) tokenizer {type(tokenizer).__name__}; the export needs a fast "
            "tokenizer with a tokenizer.json that `tokenizers.Tokenizer` can load"
        )
    return tokenizer


def max_tokens(config, tokenizer) -> int:
    """The longest input, special tokens included, that both the tokenizer and the positions allow."""
    limits = [n for n in (usable_positions(config), tokenizer.model_max_length) if n and n < UNSET_MAX_LENGTH]
    if not limits:
        raise ExportError("neither the model config nor the tokenizer states a maximum input length")
    return min(limits)


def pad_token_id(tokenizer) -> int:
    if tokenizer.pad_token_id is None:
        raise ExportError("the tokenizer has no pad token, so chunks cannot be batched")
    return int(tokenizer.pad_token_id)


def write_tokenizer(tokenizer: PreTrainedTokenizerBase, path: Path) -> None:
    """The backend tokenizer without padding or truncation state, which validation calls leave on it."""
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    backend.no_truncation()
    backend.save(str(path))
