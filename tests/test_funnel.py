"""rvt_bench.harness.funnel on hand-made predictions: stages read from DT-R1 traces, errors and score records."""
from rvt_bench.harness.funnel import annotate, first_failed, result_correct, sample_stages
from rvt_bench.core.types import Prediction, Sample, Target

ROLLOUT = ('<think>t</think> <dt_plan>{"SAM2": []}</dt_plan>\n<dt_rep>{}</dt_rep>\n'
           '<execute>print(1)</execute>\n<results>1</results>\n<task>vqa</task> <answer>a dog</answer>')


def sample(task="vqa"):
    return Sample(id="s", dataset="d", split="t", modality="image", frames=["f.jpg"], frame_ids=["0"], query="q",
                  task=task, target=Target(answers=["a dog"]))


def test_text_answer_without_a_judge_is_undecided_not_failed():
    pred = Prediction(sample_id="s", task="vqa", text="a dog", trace={"rollout": ROLLOUT, "events": []})
    stages = sample_stages(sample(), pred, {"sample_id": "s", "hypothesis": "a dog"})
    assert stages["answer_parsed"] and stages["task_correct"] and stages["result_correct"] is None
    assert first_failed(stages) is None


def test_answer_block_missing_after_the_twin_fails_code_rounds():
    trace = ROLLOUT.split("<task>")[0]
    pred = Prediction.failure("s", "parse", "token_budget: no </execute> or </answer> within the token budget", trace=trace)
    assert first_failed(sample_stages(sample(), pred, {"sample_id": "s"})) == "code_rounds_ran"


def test_predictions_without_a_rollout_start_at_answer_parsed():
    pred = Prediction(sample_id="s", task=None, text="a dog", trace={"layout": "revos"})
    stages = sample_stages(sample(), pred, {"sample_id": "s"})
    assert stages["plan_emitted"] is None and stages["answer_parsed"] is True
    assert stages["task_correct"] is False  # no declared task


def test_result_correct_thresholds():
    assert result_correct({"iou": 0.51}) is True and result_correct({"iou": 0.5}) is False
    assert result_correct({"J": 0.7}) is True and result_correct({"giou_term": 0.2}) is False
    assert result_correct({"judge": {"score": 1.0}}) is True and result_correct({"judge": {"score": None}}) is None


def test_data_failures_never_reached_the_model():
    records = [{"sample_id": "s"}]
    keys = annotate([sample()], {"s": Prediction.failure("s", "data", "unreadable frame")}, records, {"decoding": "grammar"})
    assert records[0]["funnel"]["first_failed"] == "no_rollout"
    assert keys["funnel"]["no_rollout"] == 1 and keys["decoding"] == "grammar"
