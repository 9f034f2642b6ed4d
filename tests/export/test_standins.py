"""The RADAR stand-in: same class, special tokens and config layout as the real checkpoint, reproducible."""

from __future__ import annotations

import json

import pytest
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from export.standins import SPECIAL_TOKENS, make_standin


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    make_standin("tiny", first, seed=0)
    make_standin("tiny", second, seed=0)
    return first, second


def test_same_seed_gives_identical_tokenizer_and_weights(two_runs):
    first, second = two_runs
    for name in ("tokenizer.json", "model.safetensors", "config.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_another_seed_gives_other_weights_but_the_same_tokenizer(two_runs, tmp_path):
    make_standin("tiny", tmp_path, seed=1)
    assert (tmp_path / "tokenizer.json").read_bytes() == (two_runs[0] / "tokenizer.json").read_bytes()
    assert (tmp_path / "model.safetensors").read_bytes() != (two_runs[0] / "model.safetensors").read_bytes()


def test_loads_through_auto_classes_as_a_roberta_classifier(two_runs):
    path = two_runs[0]
    model = AutoModelForSequenceClassification.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert type(model).__name__ == "RobertaForSequenceClassification"
    assert tokenizer.is_fast and tokenizer.model_max_length == 512
    assert model.config.vocab_size == len(tokenizer)
    assert 8000 <= len(tokenizer) <= 16000
    assert model.config.id2label == {0: "AI-generated", 1: "human-written"}
    config = model.config
    assert (config.max_position_embeddings, config.pad_token_id, config.type_vocab_size) == (514, 1, 1)


def test_tokenizer_has_robertas_special_ids_and_wraps_text_in_s_tags(two_runs):
    tokenizer = AutoTokenizer.from_pretrained(two_runs[0])
    assert [tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    ids = tokenizer("Hello world")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2 and len(ids) > 2
    assert json.loads((two_runs[0] / "tokenizer.json").read_text())["pre_tokenizer"]["type"] == "ByteLevel"


def test_unknown_size_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown size"):
        make_standin("huge", tmp_path)
