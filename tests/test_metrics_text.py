"""metrics/text.py: pycocoevalcap caption metrics at corpus level, checked against numbers printed
by pycocoevalcap itself (tests/data/captions/parity.json, see its README)."""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from rvt_bench.metrics import text
from rvt_bench.metrics.text import JavaMissingError, caption_scores, check_java

PARITY = json.loads((Path(__file__).parent / "data" / "captions" / "parity.json").read_text())
REFERENCE_NAMES = {"Bleu_1": "BLEU-1", "Bleu_2": "BLEU-2", "Bleu_3": "BLEU-3", "Bleu_4": "BLEU-4",
                   "METEOR": "METEOR", "ROUGE_L": "ROUGE-L", "CIDEr": "CIDEr"}

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")


@pytest.fixture(scope="module")
def parity_scores():
    inputs = PARITY["inputs"]
    return caption_scores([tuple(p) for p in inputs["predictions"]], inputs["references"])


@needs_java
def test_corpus_scores_match_pycocoevalcap(parity_scores):
    expected = {REFERENCE_NAMES[k]: v for k, v in PARITY["outputs"]["corpus"].items()}
    assert set(parity_scores["corpus"]) == set(expected)
    for name, value in expected.items():
        assert parity_scores["corpus"][name] == pytest.approx(value, abs=1e-12), name


@needs_java
def test_per_sample_scores_match_pycocoevalcap(parity_scores):
    assert parity_scores["n"] == 8
    for sid, ref in PARITY["outputs"]["per_sample"].items():
        for k, value in ref.items():
            assert parity_scores["per_sample"][sid][REFERENCE_NAMES[k]] == pytest.approx(value, abs=1e-12), (sid, k)


@needs_java
def test_corpus_bleu_is_pooled_not_the_mean_of_sample_bleus(parity_scores):
    mean_bleu4 = sum(s["BLEU-4"] for s in parity_scores["per_sample"].values()) / parity_scores["n"]
    assert abs(parity_scores["corpus"]["BLEU-4"] - mean_bleu4) > 1e-3


@needs_java
def test_single_sample_cider_is_zero_and_warned_once(caplog, capfd):
    import rvt_bench.metrics.text as text

    text._warn_small_cider.cache_clear()
    with caplog.at_level(logging.WARNING, logger="rvt_bench.metrics.text"):
        out = caption_scores([("a", "a dog runs on the grass")], {"a": ["a dog runs on the grass"]}, metrics=("CIDEr",))
        caption_scores([("b", "a cat")], {"b": ["a cat sleeps"]}, metrics=("CIDEr",))
    assert out["corpus"] == {"CIDEr": 0.0}
    assert caplog.text.count("with 1 sample it is always 0") == 1
    # The Java tokenizer's "PTBTokenizer tokenized N tokens" lines go to the log, not the terminal.
    assert "PTBTokenizer" not in capfd.readouterr().err


@needs_java
def test_empty_hypothesis_scores_zero_not_an_error():
    out = caption_scores([("a", ""), ("b", "a cat")], {"a": ["a dog"], "b": ["a cat"]}, metrics=("ROUGE-L",))
    assert out["per_sample"]["a"]["ROUGE-L"] == 0.0
    assert out["per_sample"]["b"]["ROUGE-L"] == 1.0


def test_duplicate_hypothesis_is_an_error():
    with pytest.raises(ValueError, match="sample 'a' has more than one hypothesis"):
        caption_scores([("a", "x"), ("a", "y")], {"a": ["x"]})


def test_ids_must_match_between_predictions_and_references():
    with pytest.raises(ValueError, match=r"without a hypothesis: \['b'\]"):
        caption_scores([("a", "x")], {"a": ["x"], "b": ["y"]})
    with pytest.raises(ValueError, match=r"without references: \['c'\]"):
        caption_scores([("a", "x"), ("c", "z")], {"a": ["x"]})


def test_sample_without_references_is_an_error():
    with pytest.raises(ValueError, match="sample 'a' needs a non-empty list of reference strings"):
        caption_scores([("a", "x")], {"a": []})


def test_unknown_metric_is_an_error():
    with pytest.raises(ValueError, match="unknown metrics"):
        caption_scores([("a", "x")], {"a": ["x"]}, metrics=("SPICE",))


def test_missing_java_raises_naming_what_to_install(monkeypatch):
    monkeypatch.setattr(text.shutil, "which", lambda name: None)
    check_java.cache_clear()
    try:
        with pytest.raises(JavaMissingError, match="install one, e.g. `apt-get install default-jre-headless`"):
            caption_scores([("a", "x")], {"a": ["x"]})
    finally:
        check_java.cache_clear()


@needs_java
def test_line_breaks_inside_a_text_do_not_shift_samples():
    # pycocoevalcap's PTBTokenizer alone would split "a\rdog" into two lines and misalign b and c
    predictions = [("a", "a\rdog runs"), ("b", "a cat\u2028sleeps"), ("c", "birds fly")]
    references = {"a": ["a dog runs"], "b": ["a cat sleeps"], "c": ["birds fly"]}
    out = caption_scores(predictions, references, metrics=("ROUGE-L",))
    assert [out["per_sample"][k]["ROUGE-L"] for k in "abc"] == [1.0, 1.0, 1.0]
