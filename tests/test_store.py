import json

import pytest

from rvt_bench.core.store import PredictionLog, read_predictions
from rvt_bench.core.types import Prediction, RunStoreError


def test_append_then_read_round_trips(tmp_path):
    log = PredictionLog(tmp_path / "p.jsonl")
    log.append(Prediction("a", task="vqa", text="x", timings={"total": 1.5}))
    log.append(Prediction.failure("b", "parse", "no <answer>"))
    log.close()
    got = read_predictions([tmp_path / "p.jsonl"])
    assert got["a"].text == "x" and got["a"].timings == {"total": 1.5}
    assert got["b"].error == {"kind": "parse", "message": "no <answer>"}


def test_opening_cuts_only_a_torn_tail(tmp_path):
    path = tmp_path / "p.jsonl"
    whole = json.dumps(Prediction("a").to_dict()) + "\n"
    path.write_text(whole + '{"sample_id": "b", "ta')
    PredictionLog(path).close()
    assert path.read_text() == whole


def test_garbage_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("not json\n" + json.dumps(Prediction("a").to_dict()) + "\n")
    with pytest.raises(RunStoreError, match="p.jsonl:1"):
        read_predictions([path])


def test_unknown_schema_version_is_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({**Prediction("a").to_dict(), "schema_version": 99}) + "\n")
    with pytest.raises(RunStoreError, match="schema_version 99"):
        read_predictions([path])


def test_duplicate_ids_keep_the_first(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(Prediction("a", text="first").to_dict()) + "\n"
                    + json.dumps(Prediction("a", text="second").to_dict()) + "\n")
    assert read_predictions([path])["a"].text == "first"


def test_the_record_that_says_most_about_the_model_wins_across_files(tmp_path):
    from rvt_bench.core.store import read_predictions
    from rvt_bench.core.types import Prediction

    def write(name, *preds):
        (tmp_path / name).write_text("".join(json.dumps(p.to_dict()) + "\n" for p in preds))

    write("predictions.jsonl", Prediction.failure("a", "parse", "no tag"), Prediction.failure("b", "adapter", "down"),
          Prediction("c", task="vqa", text="x"))
    write("predictions.shard0of2.jsonl", Prediction.failure("a", "adapter", "down"), Prediction("b", task="vqa", text="y"),
          Prediction.failure("c", "adapter", "down"))
    attempts = {}
    out = read_predictions(sorted(tmp_path.glob("predictions*.jsonl")), attempts)
    assert out["a"].error["kind"] == "parse"  # the model's answer outranks a later outage
    assert out["b"].error is None and out["b"].text == "y"
    assert out["c"].error is None and out["c"].text == "x"
    assert attempts == {"a": 2, "b": 2, "c": 2}


def test_a_lone_surrogate_is_written_escaped_and_read_back(tmp_path):
    log = PredictionLog(tmp_path / "p.jsonl")
    log.append(Prediction("s1", task="vqa", text="x\ud800y"))
    log.append(Prediction("s2", task="vqa", text="ok é"))
    log.close()
    preds = read_predictions([tmp_path / "p.jsonl"])
    assert preds["s1"].text == "x\ud800y" and preds["s2"].text == "ok é"
