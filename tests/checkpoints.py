"""Small random-weight Hugging Face checkpoints of architectures the kit was not written around, and PyTorch's
answers on them: what the served tests of the text and image tasks add with `kit add` and compare with. Classifiers:
a BERT and a DistilBERT. Encoders: a BERT saved as sentence-transformers saves one (modules.json, mean pooling,
normalised) and an MPNet (the architecture of the most used sentence-transformers checkpoints) with no such files.
Cross-encoders (text ranking, one logit over a query-document pair): a BERT and a DistilBERT.
Token classifiers (named entities: O, B-/I-PER, B-/I-LOC): a BERT with the WordPiece tokenizer and a DeBERTa-v2 with a
SentencePiece-style Unigram one (Metaspace pre-tokenizer, offsets that take the space before a word).
Image classifiers: a ViT (its processor resizes to 32x32) and a ConvNeXt (its processor resizes the shortest edge
ConvNeXt's crop_pct way, then crops 32x32). A classifier of pixels: a narrow ResNet, served from normalised images of
any size (`--input pixels`).

Runs in the export virtualenv (it needs PyTorch); the served tests call it as a program:

    python -m tests.checkpoints make --out DIR    # DIR/bert, distilbert, bert_encoder, mpnet, bert_ranker, ..., resnet
    python -m tests.checkpoints rank --model DIR --max-chars N       # [{"query", "documents"}] (JSON) on stdin
    python -m tests.checkpoints tag --model DIR --stride N           # texts (JSON list) on stdin
    python -m tests.checkpoints reference --model DIR --max-chars N  # texts (JSON list) on stdin
    python -m tests.checkpoints embed --model DIR --max-chars N --pooling mean|cls [--normalize]
    python -m tests.checkpoints classify-images --model DIR          # base64 image files (JSON list) on stdin
    python -m tests.checkpoints classify-pixels --model DIR          # images [3][height][width] (JSON list) on stdin

Each text checkpoint has its own WordPiece tokenizer, trained on a fixed corpus (export.standins.corpus), a fixed
seed, a 128-token limit (so that a few hundred characters already take two chunks) and labels of its own; each image
classifier its own processor, a fixed seed and labels of its own.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    AutoImageProcessor,
    AutoModel,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertTokenizerFast,
    ConvNextConfig,
    ConvNextForImageClassification,
    ConvNextImageProcessorPil,
    DebertaV2Config,
    DebertaV2ForTokenClassification,
    DebertaV2Tokenizer,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    DistilBertTokenizerFast,
    MPNetConfig,
    MPNetModel,
    MPNetTokenizerFast,
    ResNetConfig,
    ResNetForImageClassification,
    ViTConfig,
    ViTForImageClassification,
    ViTImageProcessorPil,
    pipeline,
)

from export.standins import corpus
from kit.pipelines.text.aggregate import label_probabilities, weighted_mean
from kit.pipelines.text.pairs import PairPipeline
from kit.pipelines.text.pipeline import chunk_text

MAX_TOKENS = 128
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MPNET_SPECIAL = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]  # as MPNet's own vocabulary numbers them
LABELS = {
    "bert": ["sport", "politics", "science"],
    "distilbert": ["negative", "positive"],
}
ENCODERS = ("bert_encoder", "mpnet")
RANKERS = ("bert_ranker", "distilbert_ranker")  # cross-encoders: one logit over a query-document pair
TAGGERS = ("bert_tagger", "deberta_tagger")  # token classifiers
TAGGER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# The token classifiers' head bias, by label: random weights alone label tokens near-uniformly at random, so that an
# entity is rarely longer than a token; O first and I- over B- make most tokens no entity and most entities runs of
# several tokens (and of several words), which the grouping and the windows' overlap then have to get right.
TAGGER_BIAS = [1.5, 0.0, 0.5, 0.0, 0.5]
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # what real ConvNeXt processors use
IMAGE_LABELS = {
    "vit": ["cat", "dog", "bird"],
    "convnext": ["document", "photo"],
}
PIXEL_LABELS = {"resnet": ["circle", "square", "line", "dot"]}  # a ResNet served from normalised pixels of any size
# sentence-transformers' files for a BERT it would pool by the mean and normalise (as all-MiniLM-L6-v2 does)
ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]
ST_POOLING = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}


def wordpiece(vocab_size: int = 3000, special: list[str] = SPECIAL) -> Tokenizer:
    """A BERT-style uncased WordPiece tokenizer with [CLS] ... [SEP] around each text, its special tokens numbered in
    the order of `special`."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    tokenizer.train_from_iterator(corpus(300_000), trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tokenizer


def unigram_vocab(vocab_size: int = 3000) -> list[tuple[str, float]]:
    """A SentencePiece-style Unigram vocabulary (pieces and scores), trained on the same corpus, the special tokens
    first as DeBERTa-v2 numbers them."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, unk_token="[UNK]", show_progress=False)
    tokenizer.train_from_iterator(corpus(300_000), trainer)
    return [tuple(piece) for piece in json.loads(tokenizer.to_str())["model"]["vocab"]]


def make_tagger(kind: str, out: Path, seed: int = 0) -> Path:
    """A token classifier of TAGGER_LABELS, its head biased by TAGGER_BIAS."""
    head = label_head(TAGGER_LABELS)
    layers = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    if kind == "bert_tagger":
        tokenizer = BertTokenizerFast(
            tokenizer_object=wordpiece(),
            model_max_length=MAX_TOKENS,
            **dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL)),
        )
        config = BertConfig(**layers, vocab_size=len(tokenizer), max_position_embeddings=MAX_TOKENS, pad_token_id=0, **head)
        model_class = BertForTokenClassification
    else:
        tokenizer = DebertaV2Tokenizer(vocab=unigram_vocab(), model_max_length=MAX_TOKENS)
        size = {"vocab_size": len(tokenizer), "max_position_embeddings": MAX_TOKENS, "pad_token_id": tokenizer.pad_token_id}
        config, model_class = DebertaV2Config(**layers, **size, **head), DebertaV2ForTokenClassification
    config.initializer_range = 0.3  # wide, so that tokens get visibly different labels
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor(TAGGER_BIAS))
    folder = out / kind
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make(kind: str, out: Path, seed: int = 0) -> Path:
    if kind in IMAGE_LABELS:
        return make_image_classifier(kind, out, seed)
    if kind in PIXEL_LABELS:
        return make_pixel_classifier(kind, out, seed)
    if kind in TAGGERS:
        return make_tagger(kind, out, seed)
    tokenizer = wordpiece(special=MPNET_SPECIAL if kind == "mpnet" else SPECIAL)
    labels = label_head(LABELS[kind]) if kind in LABELS else {"num_labels": 1} if kind in RANKERS else {}
    size = {"vocab_size": tokenizer.get_vocab_size(), "max_position_embeddings": MAX_TOKENS, "pad_token_id": 0}
    if kind == "bert_encoder":
        config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, **size)
        model_class, tokenizer_class = BertModel, BertTokenizerFast
    elif kind == "mpnet":  # its pad id is 1 (MPNet's embeddings assume it), and positions count from 2, as RoBERTa's
        size |= {"max_position_embeddings": MAX_TOKENS + 2, "pad_token_id": 1}
        config = MPNetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, **size)
        model_class, tokenizer_class = MPNetModel, MPNetTokenizerFast
    elif kind in ("bert", "bert_ranker"):
        config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, **size, **labels)
        model_class, tokenizer_class = BertForSequenceClassification, BertTokenizerFast
    else:
        config = DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, **size, **labels)
        model_class, tokenizer_class = DistilBertForSequenceClassification, DistilBertTokenizerFast
    config.initializer_range = 0.3  # wide, so that texts get visibly different scores
    torch.manual_seed(seed)
    model = model_class(config).eval()
    folder = out / kind
    model.save_pretrained(folder)
    fast = tokenizer_class(
        tokenizer_object=tokenizer,
        model_max_length=MAX_TOKENS,
        **dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL)),
    )
    fast.save_pretrained(folder)
    if kind == "bert_encoder":
        (folder / "modules.json").write_text(json.dumps(ST_MODULES))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(ST_POOLING))
    return folder


def label_head(labels: list[str]) -> dict:
    """A classifier config's labels, as a checkpoint of its own names them."""
    label2id = {label: index for index, label in enumerate(labels)}
    return {"num_labels": len(labels), "id2label": dict(enumerate(labels)), "label2id": label2id}


def make_image_classifier(kind: str, out: Path, seed: int = 0) -> Path:
    """A tiny image classifier and its processor (the PIL backend's class, which saves under the usual name)."""
    head = label_head(IMAGE_LABELS[kind])
    if kind == "vit":
        layers = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
        config = ViTConfig(image_size=32, patch_size=8, **layers, **head)
        model_class, processor = ViTForImageClassification, ViTImageProcessorPil(size={"height": 32, "width": 32})
    else:
        # layer scale 1, not ConvNeXt's 1e-6, so that the blocks are not the identity at random weights
        config = ConvNextConfig(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], layer_scale_init_value=1.0, **head)
        model_class, processor = (
            ConvNextForImageClassification,
            ConvNextImageProcessorPil(
                size={"shortest_edge": 32}, crop_pct=0.875, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD
            ),
        )
    config.initializer_range = 0.3  # wide, so that images get visibly different scores
    torch.manual_seed(seed)
    folder = out / kind
    model_class(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def make_pixel_classifier(kind: str, out: Path, seed: int = 0) -> Path:
    """A narrow two-stage ResNet with labels of its own; its BatchNorm statistics from random images (one pass), so
    that activations keep their scale and different images get visibly different scores."""
    head = label_head(PIXEL_LABELS[kind])
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", **head)
    torch.manual_seed(seed)
    model = ResNetForImageClassification(config)
    for norm in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        norm.momentum = None
        norm.reset_running_stats()
    with torch.no_grad():
        model.train()(torch.randn(8, 3, 64, 64))
    folder = out / kind
    model.eval().save_pretrained(folder)
    return folder


def classify_pixels(model_dir: Path, images: list[np.ndarray]) -> list[list[float]]:
    """Each normalised image [3, height, width] through the checkpoint alone, unpadded: its label probabilities."""
    model = AutoModelForImageClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return [torch.softmax(model(pixel_values=torch.from_numpy(image)[None]).logits, dim=-1)[0].tolist() for image in images]


def classify_images(model_dir: Path, images: list[bytes]) -> list[list[float]]:
    """Each encoded image decoded with PIL as RGB, through the checkpoint's own processor (PIL backend) and model, one
    at a time: its label probabilities."""
    processor = AutoImageProcessor.from_pretrained(model_dir, backend="pil")
    model = AutoModelForImageClassification.from_pretrained(model_dir).eval()
    answers = []
    for raw in images:
        image = Image.open(io.BytesIO(raw)).convert("RGB")
        pixels = torch.from_numpy(processor(images=image, return_tensors="np")["pixel_values"])
        with torch.no_grad():
            answers.append(torch.softmax(model(pixel_values=pixels).logits, dim=-1)[0].tolist())
    return answers


def reference(model_dir: Path, texts: list[str], max_chars: int) -> list[dict]:
    """Each text chunked as the kit chunks it, each chunk run alone (no padding) through PyTorch: every chunk's label
    probabilities and their length-weighted mean."""
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    answers = []
    for text in texts:
        spans, ids = chunk_text(tokenizer, text, max_chars, MAX_TOKENS)
        with torch.no_grad():
            logits = [model(input_ids=torch.tensor([chunk])).logits.numpy()[0] for chunk in ids]
        chunks = label_probabilities(np.stack(logits))
        answers.append({"scores": weighted_mean(chunks, spans).tolist(), "chunk_scores": chunks.tolist(), "spans": spans})
    return answers


def rank(model_dir: Path, cases: list[dict], max_chars: int, aggregation: str) -> list[dict]:
    """Each case's documents ({"query", "documents"}) chunked as the kit chunks a document beside its query, each chunk
    scored with the query by `transformers`' own text-classification pipeline in this process (the sigmoid of a
    one-label model's logit), and a document's score its chunks' best (`max`) or their length-weighted mean."""
    scorer = pipeline("text-classification", model=str(model_dir), tokenizer=str(model_dir), device="cpu")
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    pairs = PairPipeline(tokenizer, MAX_TOKENS, 0, [MAX_TOKENS], max_chars)
    answers = []
    for case in cases:
        for document in case["documents"]:
            spans, _ = chunk_text(tokenizer, document, max_chars, pairs.room(case["query"]))
            chunks = [scorer({"text": case["query"], "text_pair": document[start:end]})["score"] for start, end in spans]
            lengths = [end - start for start, end in spans]
            score = max(chunks) if aggregation == "max" else float(np.dot(chunks, lengths) / sum(lengths))
            answers.append({"score": score, "chunk_scores": chunks, "spans": spans})
    return answers


def tag(model_dir: Path, texts: list[str], stride: int) -> list[list[dict]]:
    """Each text's entities by `transformers`' own token-classification pipeline in this process, words grouped by its
    "simple" aggregation, a text longer than the model's limit read in windows that share `stride` tokens."""
    tagger = pipeline("token-classification", model=str(model_dir), aggregation_strategy="simple", device="cpu")
    keys = ("entity_group", "score", "word", "start", "end")
    return [[{key: entity[key] for key in keys} for entity in tagger(text, stride=stride)] for text in texts]


def embed(model_dir: Path, texts: list[str], max_chars: int, pooling: str, normalize: bool) -> list[dict]:
    """Each text chunked as the kit chunks it, each chunk run alone (no padding, so the mean is over all its tokens)
    through the encoder: each chunk's pooled embedding and their length-weighted mean, normalised as asked."""
    model = AutoModel.from_pretrained(model_dir).eval()
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def unit(vectors: np.ndarray) -> np.ndarray:
        return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True) if normalize else vectors

    answers = []
    for text in texts:
        spans, ids = chunk_text(tokenizer, text, max_chars, MAX_TOKENS)
        with torch.no_grad():
            states = [model(input_ids=torch.tensor([chunk])).last_hidden_state.numpy()[0] for chunk in ids]
        chunks = unit(np.stack([state[0] if pooling == "cls" else state.mean(axis=0) for state in states]))
        lengths = np.array([end - start for start, end in spans], dtype=np.float64)
        answers.append({"embedding": unit(lengths @ chunks / lengths.sum()).tolist(), "chunks": chunks.tolist(), "spans": spans})
    return answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("reference")
    r.add_argument("--model", type=Path, required=True)
    r.add_argument("--max-chars", type=int, default=0)
    e = sub.add_parser("embed")
    e.add_argument("--model", type=Path, required=True)
    e.add_argument("--max-chars", type=int, default=0)
    e.add_argument("--pooling", choices=("mean", "cls"), required=True)
    e.add_argument("--normalize", action="store_true")
    k = sub.add_parser("rank")  # cases [{"query", "documents"}] (a JSON list) on stdin
    k.add_argument("--model", type=Path, required=True)
    k.add_argument("--max-chars", type=int, default=0)
    k.add_argument("--aggregation", choices=("max", "mean"), default="max")
    t = sub.add_parser("tag")  # texts (a JSON list) on stdin
    t.add_argument("--model", type=Path, required=True)
    t.add_argument("--stride", type=int, required=True)
    c = sub.add_parser("classify-images")
    c.add_argument("--model", type=Path, required=True)
    x = sub.add_parser("classify-pixels")  # images as nested lists [3][height][width] (a JSON list) on stdin
    x.add_argument("--model", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "make":
        for kind in (*LABELS, *ENCODERS, *RANKERS, *TAGGERS, *IMAGE_LABELS, *PIXEL_LABELS):
            print(make(kind, args.out))
    elif args.command == "classify-pixels":
        images = [np.asarray(image, dtype=np.float32) for image in json.load(sys.stdin)]
        json.dump(classify_pixels(args.model, images), sys.stdout)
    elif args.command == "classify-images":
        json.dump(classify_images(args.model, [base64.b64decode(item) for item in json.load(sys.stdin)]), sys.stdout)
    elif args.command == "tag":
        json.dump(tag(args.model, json.load(sys.stdin), args.stride), sys.stdout, default=float)
    elif args.command == "rank":
        json.dump(rank(args.model, json.load(sys.stdin), args.max_chars, args.aggregation), sys.stdout)
    elif args.command == "embed":
        json.dump(embed(args.model, json.load(sys.stdin), args.max_chars, args.pooling, args.normalize), sys.stdout)
    else:
        json.dump(reference(args.model, json.load(sys.stdin), args.max_chars), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
