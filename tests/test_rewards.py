"""DT-R1's GRPO reward terms (adapters/dtr1/rewards.py), one behaviour per test."""

import numpy as np
import pytest

from rvt_bench.adapters.dtr1.rewards import (Episode, r_dag, r_exec, r_result, r_task, r_token, reward_terms, term_weights,
                                             total_reward, trl_reward_funcs)
from rvt_bench.core.masks import encode
from rvt_bench.core.types import AdapterError, Sample, Target

PLAN = '{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"], "SemanticAnalysis": ["SAM2"]}'
GOOD = (
    "<think>\nwhich paw rises</think> <dt_plan>" + PLAN + "</dt_plan>\n<dt_rep>{}</dt_rep>\n"
    "<think>measure</think> <execute>print(1)</execute>\n<results>1</results>\n"
    '<think>paw 1</think> <task>segmentation</task> <answer>{"instances": [1]}</answer>'
)


def _mask(rows, cols, shape=(20, 20)):
    m = np.zeros(shape, dtype=bool)
    m[rows, cols] = True
    return m


class FakeTwin:
    """What answer parsing reads from a twin: size, frames, instance masks."""

    def __init__(self, instances, shape=(20, 20), num_frames=1):
        self.size, self.num_frames, self.instances = list(shape), num_frames, instances

    def instance_ids(self):
        return list(self.instances)

    def masks_for(self, ids):
        return [encode(np.any([self.instances[i][t] for i in ids], axis=0)) for t in range(self.num_frames)]


def _sample(task="segmentation", masks=None, boxes=None, answers=None, frames=1):
    return Sample(id="s1", dataset="d", split="train", modality="image" if frames == 1 else "video",
                  frames=[f"f{t}.jpg" for t in range(frames)], frame_ids=[str(t) for t in range(frames)],
                  query="which paw", task=task, target=Target(masks=masks, boxes=boxes, answers=answers))


# --- R_token ----------------------------------------------------------------------------------------

def test_token_flawless_rollout_scores_plus_one():
    assert r_token(GOOD) == 1.0


def test_token_prefilled_think_counts_as_written():
    # The R1 template pre-fills "<think>\n": the trace holds it, the generated text alone does not.
    generated = GOOD[len("<think>\n"):]
    assert r_token(GOOD) == 1.0 and r_token(generated) == -1.0


@pytest.mark.parametrize("broken", [
    GOOD.replace("<think>measure</think> ", "<think>measure "),               # unclosed think
    GOOD.replace("<task>segmentation</task> ", ""),                            # missing task
    GOOD + ' <answer>{"instances": [2]}</answer>',                             # second answer
    GOOD.replace("\n<results>1</results>\n", ""),                              # execute without results
    GOOD + " trailing words",                                                   # text after </answer>
    GOOD.replace("<task>segmentation</task> <answer>", "<answer>").replace("</answer>", "</answer><task>segmentation</task>"),
    GOOD.replace("<dt_plan>", "").replace("</dt_plan>", ""),                   # no plan
])
def test_token_missing_or_malformed_pairs_score_minus_one(broken):
    assert r_token(broken) == -1.0


# --- R_dag ------------------------------------------------------------------------------------------

def test_dag_valid_paper_plan_scores_half():
    assert r_dag(GOOD) == 0.5


@pytest.mark.parametrize("plan", [
    '{"SAM2": ["DepthStats"], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"]}',  # cycle
    '{"SAM3": []}',                                                                                # unknown tool
    '{"SAM2": [], "DepthStats": ["SAM2"]}',                                                        # insufficient deps
    '{"SAM2": [}',                                                                                 # not JSON
])
def test_dag_invalid_plan_scores_minus_half(plan):
    assert r_dag(GOOD.replace(PLAN, plan)) == -0.5


def test_dag_missing_plan_scores_minus_half():
    assert r_dag("<think>x</think> <answer>1</answer>") == -0.5


# --- R_exec, R_task ---------------------------------------------------------------------------------

def test_exec_any_error_costs_half():
    ok = {"stage": "execute", "ok": True}
    assert r_exec([ok, ok]) == 0.0
    assert r_exec([ok, {"stage": "execute", "ok": False}]) == -0.5
    assert r_exec([{"stage": "plan", "order": ["SAM2"]}]) == 0.0


def test_task_matches_case_and_whitespace_insensitively():
    assert r_task(" Segmentation ", "segmentation") == 0.25
    assert r_task("grounding", "segmentation") == 0.0
    assert r_task(None, "segmentation") == 0.0


# --- R_result ---------------------------------------------------------------------------------------

GT = _mask(slice(0, 10), slice(0, 10))                 # 100 px
TWIN = FakeTwin({1: [_mask(slice(0, 10), slice(0, 6))],  # inside GT, 60 px: IoU 0.6
                 2: [_mask(slice(0, 10), slice(0, 5))],  # 50 px: IoU 0.5 (not > 0.5)
                 3: [_mask(slice(10, 20), slice(10, 20))]})


@pytest.mark.parametrize("ids,expected", [([1], 1.0), ([2], -1.0), ([3], -1.0), ([], -1.0)])
def test_result_segmentation_needs_iou_above_half(ids, expected):
    ep = Episode(_sample(masks=[encode(GT)]), GOOD, task="segmentation", answer=f'{{"instances": {ids}}}', twin=TWIN)
    assert r_result(ep) == expected


def test_result_video_averages_j_over_frames():
    # frame 0: J = 1, frame 1: J = 0.1 -> mean 0.55 > 0.5; with frame 0 at J = 0.6 -> mean 0.35.
    gt = [encode(GT), encode(GT)]
    twin = FakeTwin({1: [GT, _mask(slice(0, 10), slice(0, 1))], 2: [_mask(slice(0, 10), slice(0, 6)), _mask(slice(0, 10), slice(0, 1))]},
                    num_frames=2)
    sample = _sample(masks=gt, frames=2)
    assert r_result(Episode(sample, GOOD, task="segmentation", answer='{"instances": [1]}', twin=twin)) == 1.0
    assert r_result(Episode(sample, GOOD, task="segmentation", answer='{"instances": [2]}', twin=twin)) == -1.0


def test_result_unparsable_or_missing_answer_is_wrong():
    sample = _sample(masks=[encode(GT)])
    assert r_result(Episode(sample, GOOD, task="segmentation", answer='{"instances": [9]}', twin=TWIN)) == -1.0
    assert r_result(Episode(sample, GOOD, task="segmentation", answer="paw one", twin=TWIN)) == -1.0
    assert r_result(Episode(sample, GOOD, answer=None, twin=None, error="parse: missing_tag")) == -1.0


def test_result_grounding_uses_box_iou():
    # GT box [0, 0, 10, 10] px in a 20 x 20 frame; [0, 0, 0.3, 0.5] -> [0, 0, 6, 10]: IoU 0.6.
    sample = _sample(task="grounding", boxes=[[[0.0, 0.0, 10.0, 10.0]]])
    right = Episode(sample, GOOD, task="grounding", answer='{"boxes": {"0": [[0, 0, 0.3, 0.5]]}}', twin=FakeTwin({}))
    wrong = Episode(sample, GOOD, task="grounding", answer='{"boxes": {"0": [[0, 0, 0.25, 0.5]]}}', twin=FakeTwin({}))
    assert (r_result(right), r_result(wrong)) == (1.0, -1.0)


class FakeJudge:
    def __init__(self, score):
        self.score_value, self.items = score, []

    def score(self, item):
        raise AssertionError("rewards send the judge's items together (score_many)")

    def score_many(self, items):
        self.batches = getattr(self, "batches", []) + [len(items)]
        self.items += list(items)
        return [type("Verdict", (), {"score": self.score_value if "wrong" not in i.prediction else 0.0})() for i in items]


@pytest.mark.parametrize("score,expected", [(1.0, 1.0), (0.0, -1.0), (None, 0.0)])
def test_result_text_follows_the_judge_verdict(score, expected):
    judge = FakeJudge(score)
    ep = Episode(_sample(task="vqa", answers=["the left paw"]), GOOD, task="vqa", answer="left paw", twin=FakeTwin({}))
    assert r_result(ep, judge) == expected
    assert (judge.items[0].prediction, list(judge.items[0].references)) == ("left paw", ["the left paw"])


# --- the task: declared by the rollout (the paper's protocol) or named by the prompt (task_hint) -----

def test_a_wrong_declaration_gets_no_task_reward_and_is_read_as_the_declared_task():
    # instance 1 is right for the segmentation sample, but the rollout declared grounding
    ep = Episode(_sample(masks=[encode(GT)]), GOOD, task="grounding", answer='{"instances": [1]}', twin=TWIN)
    assert (r_task(ep.task, ep.sample.task), r_result(ep)) == (0.0, -1.0)


def test_an_undeclared_task_is_a_wrong_answer_unless_the_prompt_named_it():
    sample = _sample(masks=[encode(GT)])
    assert r_result(Episode(sample, GOOD, answer='{"instances": [1]}', twin=TWIN)) == -1.0
    assert r_result(Episode(sample, GOOD, answer='{"instances": [1]}', twin=TWIN, task_hint=True)) == 1.0


def test_result_text_without_judge_is_an_error():
    ep = Episode(_sample(task="vqa", answers=["x"]), GOOD, task="vqa", answer="x", twin=FakeTwin({}))
    with pytest.raises(AdapterError, match="judge"):
        r_result(ep)


# --- weights and the total --------------------------------------------------------------------------

def test_total_is_a_times_format_plus_b_times_outcome():
    ep = Episode(_sample(masks=[encode(GT)]), GOOD, events=[{"stage": "execute", "ok": False}],
                 task="segmentation", answer='{"instances": [1]}', twin=TWIN)
    terms = reward_terms(ep)
    assert terms == {"token": 1.0, "dag": 0.5, "exec": -0.5, "task": 0.25, "result": 1.0}
    assert total_reward(terms, term_weights(2.0, 3.0)) == 2.0 * (1.0 + 0.5) + 3.0 * (-0.5 + 0.25 + 1.0)


def test_ablation_zeroes_the_disabled_terms():
    assert term_weights(1.0, 2.0, {"token": False, "result": False}) == {"token": 0.0, "dag": 1.0, "exec": 2.0, "task": 2.0, "result": 0.0}
    with pytest.raises(AdapterError, match="format"):
        term_weights(1.0, 1.0, {"format": False})


def test_trl_reward_functions_read_the_episode_column():
    ep = Episode(_sample(masks=[encode(GT)]), GOOD, task="grounding", answer='{"instances": [3]}', twin=TWIN)
    funcs = trl_reward_funcs()
    assert [f.__name__ for f in funcs] == ["r_token", "r_dag", "r_exec", "r_task", "r_result", "success"]
    assert [f(prompts=["k"], completions=["c"], episode=[ep])[0] for f in funcs] == [1.0, 0.5, 0.0, 0.0, -1.0, 0.0]


# --- the training success rate (logged, never summed) ----------------------------------------------

RIGHT = dict(task="segmentation", answer='{"instances": [1]}', twin=TWIN)


@pytest.mark.parametrize("trace,events,answer,expected", [
    (GOOD, [], RIGHT, 1.0),                                                      # the whole protocol, right answer
    (GOOD, [], {**RIGHT, "answer": '{"instances": [3]}'}, 0.0),                  # wrong answer
    (GOOD, [], {**RIGHT, "task": "grounding"}, 0.0),                              # wrong task declared
    (GOOD, [{"stage": "execute", "ok": False}], RIGHT, 0.0),                      # a code round failed
    (GOOD.replace(PLAN, '{"SAM2": [], "DepthStats": ["SAM2"]}'), [], RIGHT, 0.0),  # invalid DAG
    (GOOD + " trailing words", [], RIGHT, 0.0),                                   # broken tags
])
def test_success_is_the_whole_protocol_and_a_right_answer(trace, events, answer, expected):
    from rvt_bench.adapters.dtr1.rewards import success

    assert success(Episode(_sample(masks=[encode(GT)]), trace, events=events, **answer)) == expected


def test_the_success_column_does_not_ask_the_judge_again():
    from rvt_bench.adapters.dtr1.rewards import SUCCESS, TERMS

    judge = FakeJudge(1.0)
    episodes = [Episode(_sample(task="vqa", answers=["the left paw"]), GOOD, task="vqa", answer="left paw", twin=FakeTwin({}))]
    funcs = dict(zip([*TERMS, SUCCESS], trl_reward_funcs(judge)))
    assert funcs["result"](prompts=[""], completions=[""], episode=episodes) == [1.0]
    assert funcs[SUCCESS](prompts=[""], completions=[""], episode=episodes) == [1.0]
    assert judge.batches == [1]


def test_result_reward_asks_the_judge_once_per_batch_in_episode_order():
    from rvt_bench.adapters.dtr1.rewards import TERMS, trl_reward_funcs

    judge = FakeJudge(1.0)
    vqa = _sample(task="vqa", answers=["the left paw"])
    episodes = [Episode(vqa, GOOD, task="vqa", answer="left paw", twin=FakeTwin({})),
                Episode(vqa, GOOD, answer=None, twin=None),  # no answer: -1 without asking
                Episode(vqa, GOOD, task="vqa", answer="wrong paw", twin=FakeTwin({})),
                Episode(vqa, GOOD, task="vqa", answer="the left paw", twin=FakeTwin({}))]
    result = trl_reward_funcs(judge)[TERMS.index("result")]
    assert result(prompts=[""] * 4, completions=[""] * 4, episode=episodes) == [1.0, -1.0, -1.0, 1.0]
    assert judge.batches == [3] and [i.prediction for i in judge.items] == ["left paw", "wrong paw", "the left paw"]
