"""Text no codec accepts (rvt_bench.core.codec): a lone surrogate in an answer is the model's parse
failure with its position, scored as the empty answer; in a query or reference it is the sample's
data error; pycocoevalcap and the judge never see one (issue 34: `<answer>\\ud800</answer>` or
`"text": "\\ud800"` in a precomputed file crashed every scoring with UnicodeEncodeError)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rvt_bench.core.codec import encodable, unencodable_at, unencodable_reason
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.harness.predict import text_checked
from rvt_bench.harness.score import text_checked_pair

REPO = Path(__file__).resolve().parent.parent
LONE = "\ud800"


def vqa_sample(query="what is on the table?", answers=("a cup",)) -> Sample:
    return Sample("s", "demo", "val", "image", ["f.jpg"], ["0"], query, "vqa", Target(answers=list(answers)))


def test_a_lone_surrogate_is_found_with_its_position_and_written_as_its_escape():
    assert unencodable_at("ok") is None and unencodable_at(f"ab{LONE}c") == 2
    assert unencodable_reason("the answer", f"ab{LONE}") == \
        "the answer holds text no codec accepts (U+D800, a lone surrogate, at character 2)"
    assert encodable(f"a{LONE}") == "a\\ud800" and json.loads(f'"{encodable(f"a{LONE}")}"') == f"a{LONE}"


def test_an_answer_with_a_lone_surrogate_is_the_model_s_parse_failure_keeping_its_trace():
    pred = text_checked(Prediction("s", task="vqa", text=f"a {LONE} cup", trace="<answer>...", timings={"policy": 1.0}))
    assert pred.error == {"kind": "parse", "message": "the answer holds text no codec accepts (U+D800, a lone "
                                                      "surrogate, at character 2)"}
    assert pred.text is None and pred.trace == "<answer>..." and pred.timings == {"policy": 1.0}


@pytest.mark.parametrize("sample", [vqa_sample(query=f"what {LONE}?"), vqa_sample(answers=("a cup", f"x{LONE}"))])
def test_a_query_or_reference_with_a_lone_surrogate_is_the_sample_s_data_error(sample):
    pred = text_checked_pair(sample, Prediction("s", task="vqa", text="a cup"))
    assert pred.failure_kind == "data" and "no codec accepts" in pred.error["message"]


def test_a_resumed_answer_with_a_lone_surrogate_is_failed_at_scoring_too():
    pred = text_checked_pair(vqa_sample(), Prediction("s", task="vqa", text=LONE))
    assert pred.failure_kind == "parse"


def test_caption_scores_refuses_a_lone_surrogate_before_java():
    from rvt_bench.metrics.text import caption_scores

    with pytest.raises(ValueError, match="sample 's': hypothesis holds text no codec accepts"):
        caption_scores([("s", LONE)], {"s": ["a cup"]})
    with pytest.raises(ValueError, match="reference 1 holds text no codec accepts"):
        caption_scores([("s", "a cup")], {"s": ["a cup", LONE]})


@pytest.mark.parametrize("field", ["question", "prediction", "references"])
def test_the_judge_leaves_an_item_with_a_lone_surrogate_unscored_without_a_request(tmp_path, field):
    from rvt_bench.metrics.judge import Judge, JudgeItem

    judge = Judge(model="m", base_url="http://127.0.0.1:9/v1", api_key="EMPTY", cache_dir=str(tmp_path), max_retries=0)
    item = {"sample_id": "s", "question": "q?", "references": ["a"], "prediction": "a"}
    item[field] = [LONE] if field == "references" else LONE
    verdict = judge.score(JudgeItem(**item))
    assert verdict.score is None and verdict.error.startswith("input: ") and "no codec accepts" in verdict.error
    assert list(tmp_path.iterdir()) == []  # nothing cached, nothing sent


def test_a_precomputed_answer_with_a_lone_surrogate_fails_its_sample_and_the_run_scores(tmp_path):
    """The demo's 10 samples against a predictions file whose vqa answer is "\\ud800" (a JSON escape):
    that sample is a parse failure with its reason, the summary is scored (pycocoevalcap, Java),
    metrics.json is written."""
    import rvt_bench.harness.config  # noqa: F401  registers the schemas
    from rvt_bench.harness.runner import run

    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"sample_id": "rvt/vqa/launch_pad", "task": "vqa", "text": "\\ud800"}\n'
                     '{"sample_id": "rvt/summary/kitchen_table", "task": "summarization", "text": "a cup on a table"}\n')
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "+model=precomputed", f"model.root={preds}",
                                           f"run.root={tmp_path / 'runs'}", "run.report=false",
                                           "leaderboard.publish=false",
                                           "run.stop_after_same_failures=0"])  # 8 of 10 have no prediction, on purpose
    result = run(cfg)
    failed = {f["sample_id"]: f for f in result.metrics["failed_samples"]}
    assert failed["rvt/vqa/launch_pad"] == {
        "sample_id": "rvt/vqa/launch_pad", "kind": "parse",
        "message": "the answer holds text no codec accepts (U+D800, a lone surrogate, at character 0)"}
    assert "rvt/summary/kitchen_table" not in failed and (result.run_dir / "metrics.json").is_file()
