"""rvt_bench.harness.funnel on hand-made predictions: stages read from DT-R1 traces, errors and score records."""
import rvt_bench.metrics  # noqa: F401  (the built-in kinds of score values)
from rvt_bench.core.records import JudgeVerdict, ScoreRecord
from rvt_bench.harness.funnel import annotate, first_failed, result_correct, sample_stages
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.metrics.units.box_iou import BoxValues
from rvt_bench.metrics.units.captions import TextValues
from rvt_bench.metrics.units.lisa_iou import MaskIoUValues
from rvt_bench.metrics.units.video_jf import VideoJFValues

ROLLOUT = ('<think>t</think> <dt_plan>{"SAM2": []}</dt_plan>\n<dt_rep>{}</dt_rep>\n'
           '<execute>print(1)</execute>\n<results>1</results>\n<task>vqa</task> <answer>a dog</answer>')


def sample(task="vqa"):
    return Sample(id="s", dataset="d", split="t", modality="image", frames=["f.jpg"], frame_ids=["0"], query="q",
                  task=task, target=Target(answers=["a dog"]))


def test_text_answer_without_a_judge_is_undecided_not_failed():
    pred = Prediction(sample_id="s", task="vqa", text="a dog", trace={"rollout": ROLLOUT, "events": []})
    stages = sample_stages(sample(), pred, ScoreRecord("s", values={"text": TextValues("a dog", ["a dog"])}))
    assert stages["answer_parsed"] and stages["task_correct"] and stages["result_correct"] is None
    assert first_failed(stages) is None


def test_answer_block_missing_after_the_twin_fails_code_rounds():
    trace = ROLLOUT.split("<task>")[0]
    pred = Prediction.failure("s", "parse", "token_budget: no </execute> or </answer> within the token budget", trace=trace)
    assert first_failed(sample_stages(sample(), pred, ScoreRecord("s"))) == "code_rounds_ran"


def test_predictions_without_a_rollout_start_at_answer_parsed():
    pred = Prediction(sample_id="s", task=None, text="a dog", trace={"layout": "revos"})
    stages = sample_stages(sample(), pred, ScoreRecord("s"))
    assert stages["plan_emitted"] is None and stages["answer_parsed"] is True
    assert stages["task_correct"] is False  # no declared task


def test_result_correct_thresholds():
    def record(*values, judge=None):
        return ScoreRecord("s", values={v.kind: v for v in values}, judge=judge)

    image = [record(MaskIoUValues(51, 100, 100, iou, iou)) for iou in (0.51, 0.5)]
    assert result_correct(image[0]) is True and result_correct(image[1]) is False
    assert result_correct(record(VideoJFValues(0.7, 0.1, 0.4, {}))) is True
    assert result_correct(record(BoxValues(0.2, 1.0, 5.0, [0.2]))) is False
    text = TextValues("a dog", ["a dog"])
    assert result_correct(record(text, judge=JudgeVerdict(1.0))) is True
    assert result_correct(record(text, judge=JudgeVerdict(None))) is None


def test_data_failures_never_reached_the_model():
    records = [ScoreRecord("s")]
    keys = annotate([sample()], {"s": Prediction.failure("s", "data", "unreadable frame")}, records, {"decoding": "grammar"})
    assert records[0].funnel["first_failed"] == "no_rollout"
    assert keys["funnel"]["no_rollout"] == 1 and keys["decoding"] == "grammar"
