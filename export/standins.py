"""Stand-ins for TrustSafeAI/RADAR-Vicuna-7B, which cannot be downloaded here.

RADAR is an encoder-only `RobertaForSequenceClassification` (RoBERTa-large sized, 2 labels,
byte-level BPE, at most 512 tokens). A stand-in has the same class, config layout, special tokens
and tokenizer kind with random weights, so it goes through exactly the export and serving path of
the real model: `tiny` for tests, `large` (RoBERTa-large shape) for realistic compute per chunk.
Both are deterministic: the tokenizer is trained offline on docstrings of the pinned
`transformers` package, the weights come from a fixed seed.

    python -m export.standins --size tiny --out artifacts/standins/radar-tiny
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from tqdm import tqdm
from transformers import RobertaConfig, RobertaForSequenceClassification, RobertaTokenizerFast

SIZES = {
    # A wider init than BERT's 0.02 so that different chunks get visibly different scores: with
    # near-constant outputs a test comparing served and direct scores could not tell chunks apart.
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "initializer_range": 0.2,
    },
    "large": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096},
}
# RoBERTa's special tokens with RoBERTa's ids (the trainer assigns ids in this order).
SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
# RADAR's model card: softmax(logits)[0] is the probability that the text is AI-generated.
ID2LABEL = {0: "AI-generated", 1: "human-written"}
VOCAB_SIZE = 12000
CORPUS_CHARS = 2_000_000
MAX_TOKENS = 512
TRIPLE_QUOTED = re.compile(r'"""(.*?)"""', re.S)


def corpus(max_chars: int = CORPUS_CHARS) -> list[str]:
    """English-heavy prose that is identical wherever the pinned `transformers` is installed.

    The triple-quoted strings (docstrings) of its modules, read in sorted path order and capped,
    so the corpus does not depend on the file system's listing order and trains in about a second.
    """
    root = Path(transformers.__file__).parent
    texts: list[str] = []
    size = 0
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        for match in TRIPLE_QUOTED.finditer(path.read_text(encoding="utf-8")):
            text = inspect.cleandoc(match.group(1))
            if text:
                texts.append(text)
                size += len(text)
        if size >= max_chars:
            return texts
    return texts


def train_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE laid out like RoBERTa's: same pre-tokenizer, special ids and post-processor."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,  # the step bar covers it; its bars print blank lines off a terminal
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    return tokenizer


def wrap_tokenizer(tokenizer: Tokenizer) -> RobertaTokenizerFast:
    return RobertaTokenizerFast(tokenizer_object=tokenizer, model_max_length=MAX_TOKENS)


def make_config(size: str, vocab_size: int) -> RobertaConfig:
    """roberta-large's config fields (positions, pad/bos/eos ids, eps) with RADAR's two labels."""
    return RobertaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=MAX_TOKENS + 2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        num_labels=len(ID2LABEL),
        id2label=ID2LABEL,
        label2id={label: index for index, label in ID2LABEL.items()},
        **SIZES[size],
    )


def build_model(config: RobertaConfig, seed: int) -> RobertaForSequenceClassification:
    torch.manual_seed(seed)
    return RobertaForSequenceClassification(config).eval()


def make_standin(size: str, out: Path, seed: int = 0) -> RobertaForSequenceClassification:
    """Write a checkpoint dir that `from_pretrained` loads like the real RADAR checkpoint."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {', '.join(SIZES)}")
    with tqdm(total=4, desc=f"radar stand-in ({size})", unit="step") as steps:
        steps.set_postfix_str("reading corpus")
        texts = corpus()
        steps.update()
        steps.set_postfix_str("training tokenizer")
        tokenizer = wrap_tokenizer(train_tokenizer(texts))
        steps.update()
        steps.set_postfix_str("initialising weights")
        model = build_model(make_config(size, len(tokenizer)), seed)
        steps.update()
        steps.set_postfix_str("saving")
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        steps.update()
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), required=True)
    parser.add_argument("--out", type=Path, required=True, help="checkpoint directory to write")
    parser.add_argument("--seed", type=int, default=0, help="torch seed for the random weights")
    args = parser.parse_args(argv)
    model = make_standin(args.size, args.out, args.seed)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.size} RADAR stand-in ({params / 1e6:.1f}M parameters, random weights) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
