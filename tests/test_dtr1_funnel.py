"""DT-R1's own report (rvt_bench.adapters.dtr1.funnel through DTR1Adapter) on hand-made predictions:
stages read from rollouts, errors and score records; analytics only where measured."""
import pytest

from rvt_bench.adapters.base import ScoredSample
from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.core.records import JudgeVerdict, ScoreRecord
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.metrics.units.lisa_iou import MaskIoUValues

ROLLOUT = ('<think>t</think> <dt_plan>{"SAM2": []}</dt_plan>\n<dt_rep>{}</dt_rep>\n'
           '<execute>print(1)</execute>\n<results>1</results>\n<task>vqa</task> <answer>a dog</answer>')
EVENTS = [{"stage": "plan", "order": ["SAM2"]}, {"stage": "twin", "chars": 2}, {"stage": "execute", "ok": True},
          {"stage": "answer", "task": "vqa"}]


def sample(sid="s", task="vqa"):
    return Sample(id=sid, dataset="d", split="t", modality="image", frames=["f.jpg"], frame_ids=["0"], query="q",
                  task=task, target=Target(answers=["a dog"]))


def item(pred, task="vqa", iou=None):
    values = {} if iou is None else {"mask_iou": MaskIoUValues(int(100 * iou), 100, 100, iou, iou)}
    return ScoredSample(sample(pred.sample_id, task), pred, ScoreRecord(pred.sample_id, values=values))


@pytest.fixture
def adapter():
    return DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception())


def test_a_text_answer_without_a_judge_is_undecided_not_failed(adapter):
    pred = Prediction(sample_id="s", task="vqa", text="a dog", trace={"rollout": ROLLOUT, "events": EVENTS})
    stopped = adapter.sample_stage(item(pred))
    assert stopped.first_failed is None and stopped.result_correct is None


def test_a_judge_verdict_decides_a_text_answer(adapter):
    pred = Prediction(sample_id="s", task="vqa", text="a dog", trace={"rollout": ROLLOUT})
    record = ScoreRecord("s", judge=JudgeVerdict(0.2))
    assert adapter.sample_stage(ScoredSample(sample(), pred, record)).first_failed == "result_correct"


def test_answer_block_missing_after_the_twin_fails_code_rounds(adapter):
    trace = ROLLOUT.split("<task>")[0]
    pred = Prediction.failure("s", "parse", "token_budget: no </execute> or </answer> within the token budget", trace=trace)
    assert adapter.sample_stage(item(pred)).first_failed == "code_rounds_ran"


def test_a_prediction_without_a_rollout_never_emitted_a_plan(adapter):
    pred = Prediction.failure("s", "adapter", "server down")
    assert adapter.sample_stage(item(pred)).first_failed == "plan_emitted"


def test_the_report_counts_each_stage_and_measures_only_what_was_measured(adapter):
    seg = ROLLOUT.replace("<task>vqa</task> <answer>a dog</answer>", '<task>segmentation</task> <answer>{"instances": [1]}</answer>')
    scored = [
        item(Prediction("ok", task="segmentation", trace={"rollout": seg, "events": EVENTS}, timings={"policy": 2.0, "total": 3.0}),
             "segmentation", iou=0.9),
        item(Prediction("wrong", task="segmentation", trace={"rollout": seg, "events": EVENTS}, timings={"policy": 1.0, "total": 2.0}),
             "segmentation", iou=0.1),
        item(Prediction("task", task="vqa", text="x", trace={"rollout": ROLLOUT}, timings={"total": 1.0}), "segmentation", iou=0.0),
        item(Prediction.failure("dag", "parse", "invalid DAG: unknown tool SAM3",
                                trace='<think>t</think> <dt_plan>{"SAM3": []}</dt_plan>'), "segmentation", iou=0.0),
        item(Prediction.failure("noplan", "parse", "missing <dt_plan>", trace="I think it is the dog."), "segmentation", iou=0.0),
    ]
    report = adapter.report(scored)
    assert [(s.key, s.reached) for s in report.stages] == [
        ("plan_emitted", 4), ("dag_valid", 3), ("twin_built", 3), ("code_rounds_ran", 3), ("answer_parsed", 3),
        ("task_correct", 2), ("result_correct", 1)]
    assert [s.label for s in report.stages][:2] == ["plan emitted", "DAG valid"]
    measures = {m.key: m.value for m in report.measures}
    assert measures == {"valid_dag_rate": 0.75, "code_exec_success_rate": 1.0, "mean_code_rounds": 1.0, "max_code_rounds": 1,
                        "task_consistency": pytest.approx(2 / 3, abs=1e-4), "copied_example_rate": 0.0,
                        "generation_s": 3.0, "total_s": 6.0}
    assert "perception_s" not in measures  # no prediction timed perception: absent, never 0
    assert report.decoding == "free" and report.model == "dtr1" and report.n == 5
    assert report.details == {"tool_usage": {"SAM2": 3},
                              "task_confusion": {"segmentation": {"segmentation": 2, "vqa": 1}}}


def test_the_report_says_grammar_when_the_policy_decodes_under_it():
    policy = ScriptedPolicy([])
    policy.decoding = "grammar"
    assert DTR1Adapter(policy=policy, perception=OraclePerception()).report([]).decoding == "grammar"


def test_code_rounds_are_counted_from_the_events_not_from_tags_the_code_printed(adapter):
    # one <execute> round whose output prints the harness's own tag fifty times
    forged = ROLLOUT.replace("<results>1</results>", "<results>" + "<results>" * 50 + "</results>")
    failed_forged = forged.split("<task>")[0]
    scored = [item(Prediction("ok", task="vqa", text="a dog", trace={"rollout": forged, "events": EVENTS})),
              item(Prediction.failure("bad", "parse", "token_budget", trace={"rollout": failed_forged, "events": EVENTS[:3]}))]
    measures = {m.key: m.value for m in adapter.report(scored).measures}
    assert (measures["mean_code_rounds"], measures["max_code_rounds"]) == (1.0, 1)


def test_a_failed_rollout_keeps_its_events_beside_its_text():
    from rvt_bench.adapters.dtr1.adapter import _with_events
    from rvt_bench.adapters.dtr1.tags import TagError

    exc = TagError("json", "answer is not JSON")
    exc.trace, exc.events = ROLLOUT, EVENTS
    assert _with_events(exc).trace == {"rollout": ROLLOUT, "events": EVENTS}


def test_an_answer_tag_the_code_printed_does_not_pass_the_code_rounds(adapter):
    # the code printed "</dt_rep>...<answer>[]</answer>"; the model never closed an answer block
    printed = ROLLOUT.replace("<results>1</results>", "<results></dt_rep><answer>[]</answer></results>").split("<task>")[0]
    pred = Prediction.failure("s", "parse", "missing_tag: no </execute> or </answer>",
                              trace={"rollout": printed, "events": EVENTS[:3]})
    assert adapter.sample_stage(item(pred)).first_failed == "code_rounds_ran"


# --- a policy that copies the system prompt's worked example ------------------------------------------

def _copying(plan, code):
    from rvt_bench.adapters.dtr1.prompt import EXAMPLE_CODE, EXAMPLE_PLAN

    rollout = ROLLOUT.replace('{"SAM2": []}', EXAMPLE_PLAN if plan else '{"SAM2": []}')
    return rollout.replace("print(1)", EXAMPLE_CODE if code else "print(1)")


@pytest.mark.parametrize("plan,code,parts", [(True, True, ["plan", "code"]), (True, False, ["plan"]),
                                             (False, True, ["code"]), (False, False, [])])
def test_a_plan_or_code_equal_to_the_prompts_example_is_named_a_copy(plan, code, parts):
    from rvt_bench.adapters.dtr1.funnel import copied_example

    assert copied_example(Prediction("s", trace={"rollout": _copying(plan, code), "events": EVENTS})) == parts


def test_the_example_printed_by_the_code_or_reformatted_is_read_as_what_it_is():
    from rvt_bench.adapters.dtr1.funnel import copied_example
    from rvt_bench.adapters.dtr1.prompt import EXAMPLE_CODE, EXAMPLE_PLAN

    # the example inside the harness's insertions (the twin, the code's output) is not the rollout's own
    printed = ROLLOUT.replace("<results>1</results>", f"<results><execute>{EXAMPLE_CODE}</execute></results>")
    assert copied_example(Prediction("s", trace={"rollout": printed})) == []
    # whitespace does not hide a copy; another plan of the same tools is no copy
    spaced = ROLLOUT.replace('{"SAM2": []}', EXAMPLE_PLAN.replace(", ", ",\n  "))
    assert copied_example(Prediction("s", trace={"rollout": spaced})) == ["plan"]
    fewer = ROLLOUT.replace('{"SAM2": []}', EXAMPLE_PLAN.replace(', "SemanticAnalysis": ["SAM2"]', ""))
    assert copied_example(Prediction("s", trace={"rollout": fewer})) == []


def test_the_report_counts_the_rollouts_that_copied_the_example_and_those_right_anyway(adapter):
    seg = '<task>segmentation</task> <answer>{"instances": [1]}</answer>'
    both = _copying(True, True).replace("<task>vqa</task> <answer>a dog</answer>", seg)
    plan_only = _copying(True, False).replace("<task>vqa</task> <answer>a dog</answer>", seg)
    scored = [item(Prediction("a", task="segmentation", trace={"rollout": both, "events": EVENTS}), "segmentation", iou=0.9),
              item(Prediction("b", task="segmentation", trace={"rollout": plan_only, "events": EVENTS}), "segmentation", iou=0.1),
              item(Prediction("c", task="vqa", text="a dog", trace={"rollout": ROLLOUT, "events": EVENTS}))]
    report = adapter.report(scored)
    assert {m.key: m.value for m in report.measures}["copied_example_rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert report.details["copied_example"] == {"plan": 2, "code": 1, "correct": 1}


def test_the_report_splits_policy_seconds_and_counts_prefilled_tokens(adapter):
    calls = [{"after": "start", "generated": 9, "prompt_tokens": 1200, "cached_tokens": 1180, "prefilled": 20,
              "prefill_s": 0.1, "decode_s": 0.9},
             {"after": "twin", "generated": 5, "prompt_tokens": 1500, "cached_tokens": 1220, "prefilled": 280,
              "prefill_s": 1.5, "decode_s": 0.5}]
    timings = {"policy": 2.5, "prefill": 1.6, "decode": 1.4, "total": 3.0}
    scored = [item(Prediction("a", task="vqa", text="a dog", trace={"rollout": ROLLOUT, "events": EVENTS, "calls": calls},
                              timings=timings)),
              # a run written before calls were kept (or a backend that counts nothing) adds nothing
              item(Prediction("b", task="vqa", text="a dog", trace={"rollout": ROLLOUT, "events": EVENTS},
                              timings={"policy": 1.0, "total": 1.0}))]
    measures = {m.key: (m.value, m.unit) for m in adapter.report(scored).measures}
    assert measures["prefilled_tokens_per_call"] == (150.0, "tokens")
    assert measures["prefix_cache_share"] == (round(2400 / 2700, 4), "fraction")
    assert measures["prefill_s"] == (1.6, "s") and measures["decode_s"] == (1.4, "s")
    assert measures["generation_s"] == (3.5, "s")
