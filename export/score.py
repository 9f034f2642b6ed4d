"""Score text chunks with the PyTorch source model: the reference that served results are tested against.

    echo '["first chunk", "second chunk"]' | python -m export.score --model DIR_OR_HUB_ID

Prints a JSON list with each chunk's AI-generated probability (softmax over the logits, at the
label index the export recorded).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def score_chunks(model_id: str, chunks: list[str], ai_label_index: int = 0) -> list[float]:
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    model = AutoModelForSequenceClassification.from_pretrained(model_id).eval()
    scores = []
    with torch.inference_mode():
        for chunk in chunks:
            encoded = tokenizer(chunk, return_tensors="pt")
            logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits
            scores.append(float(torch.softmax(logits, dim=-1)[0, ai_label_index]))
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--ai-label-index", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(score_chunks(args.model, json.load(sys.stdin), args.ai_label_index)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
