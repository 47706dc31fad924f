"""DTR1Adapter end to end with a scripted policy and the real DAG validator, oracle twin and sandbox."""
from pathlib import Path

import json

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.adapters.twin.dag import DAGError
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import InstanceAnnotation, ParseError, Prediction, Sample, Target
from rvt_bench.harness.config import adapter_node

CONF = Path(__file__).resolve().parents[1] / "conf"
H, W = 8, 10


def box_mask(y0, y1, x0, x1):
    m = np.zeros((H, W), bool)
    m[y0:y1, x0:x1] = True
    return m


# annotation "7" (dog) moves right between the frames; "3" (cat) is only in frame 0.
DOG = [box_mask(1, 4, 1, 4), box_mask(1, 4, 5, 8)]
CAT = [box_mask(5, 8, 0, 2), None]


def make_sample(task="segmentation"):
    enc = lambda ms: [None if m is None else mask_io.encode(m) for m in ms]  # noqa: E731
    return Sample(
        id="s1", dataset="toy", split="test", modality="video", frames=["f0.jpg", "f1.jpg"],
        frame_ids=["00000", "00001"], query="the animal that moves to the right", task=task,
        target=Target(masks=enc(DOG)),
        annotations=[InstanceAnnotation("7", "dog", enc(DOG)), InstanceAnnotation("3", "cat", enc(CAT))],
    )


PLAN = '<think>find the moving animal</think>\n<dt_plan>{"SAM2": [], "SemanticAnalysis": ["SAM2"]}</dt_plan>'
CODE = (
    "<think>compare horizontal motion</think>\n<execute>\n"
    "for inst in twin['instances']:\n"
    "    xs = [v[4] for v in inst['track'].values()]\n"
    "    print(inst['id'], inst['label'], max(xs) - min(xs), int(masks[inst['id']].sum()))\n"
    "</execute>"
)
# Oracle ids follow sorted annotation ids ("3" -> 1, "7" -> 2), unrelated to the target.
ANSWER = '<think>instance 2, the dog, moves 4 px</think>\n<task>segmentation</task> <answer>{"instances": [2]}</answer>'


def adapter(turns, **kw):
    return DTR1Adapter(policy=ScriptedPolicy(turns), perception=OraclePerception(),
                       sandbox={"timeout_s": 20.0}, **kw)


def test_perfect_rollout_yields_the_target_masks():
    pred = adapter([PLAN, CODE, ANSWER]).predict(make_sample())
    assert isinstance(pred, Prediction) and pred.error is None
    assert pred.task == "segmentation"
    for t in range(2):
        np.testing.assert_array_equal(mask_io.decode(pred.masks[t]), DOG[t])
    rollout = pred.trace["rollout"]
    # real sandbox output: id, label, centroid x displacement, mask pixels over both frames
    assert "<results>1 cat 0 6\n2 dog 4.0 18</results>" in rollout
    assert '"label":"dog"' in rollout.split("<dt_rep>")[1]
    assert set(pred.timings) == {"policy", "twin", "sandbox"} and pred.timings["sandbox"] > 0


def test_prediction_round_trips_through_json_record():
    pred = adapter([PLAN, ANSWER]).predict(make_sample())
    assert Prediction.from_dict(pred.to_dict()) == pred


# --- the task: the paper's protocol (the policy finds and declares it) or the task_hint variant ------

def test_the_papers_protocol_gives_the_policy_no_task_and_the_variant_names_it():
    quiet, told = adapter([PLAN, ANSWER]), adapter([PLAN, ANSWER], task_hint=True)
    for a in (quiet, told):
        a.predict(make_sample(task="grounding"))
    user = quiet.prompt(make_sample(task="grounding"))[1]["content"]
    assert user == "Input: a video of 2 frames.\nQuery: the animal that moves to the right"
    assert "grounding" not in quiet.policy.prompts[0].split("Query: ")[-1]
    assert told.prompt(make_sample(task="grounding"))[1]["content"] == (
        "Input: a video of 2 frames.\nTask: grounding.\nQuery: the animal that moves to the right")
    assert "Task: grounding." in told.policy.prompts[0]
    # the system prompt is the same under both: only the user message differs
    assert quiet.prompt(make_sample())[0] == told.prompt(make_sample())[0]


def test_a_wrong_declaration_is_parsed_as_the_task_it_declares():
    # a grounding sample answered as segmentation: instance masks, not boxes, recorded as segmentation
    pred = adapter([PLAN, ANSWER]).predict(make_sample(task="grounding"))
    assert pred.task == "segmentation" and pred.boxes is None and pred.masks is not None
    # declared grounding with a segmentation answer: unparsable as the task it declared
    with pytest.raises(ParseError) as info:
        adapter([PLAN, '<task>grounding</task> <answer>{"instances": [2]}</answer>']).predict(make_sample())
    assert info.value.reason == "schema"


def test_an_undeclared_task_fails_to_parse_unless_the_variant_names_it():
    turns = [PLAN, '<answer>{"instances": [1]}</answer>']
    with pytest.raises(ParseError) as info:
        adapter(turns).predict(make_sample())
    assert info.value.reason == "missing_tag" and "<task>" in str(info.value)
    pred = adapter(turns, task_hint=True).predict(make_sample())
    assert pred.task is None
    assert mask_io.area(pred.masks[0]) == 6 and pred.masks[1] is None


def test_the_variant_is_fingerprinted_and_marked_not_comparable():
    quiet, told = adapter([]), adapter([], task_hint=True)
    assert quiet.fingerprint()["limits"]["task_hint"] is False
    assert "task_hint" not in told.fingerprint()["limits"]  # runs made before the setting told the task
    assert quiet.not_comparable() is None
    assert "model.task_hint=true" in told.not_comparable() and "model.task_hint=false" in told.not_comparable()
    with pytest.raises(Exception, match="task_hint"):
        adapter([], task_hint="yes")


def test_invalid_dag_is_a_parse_failure_with_the_dag_reason():
    bad_plan = '<dt_plan>{"DepthStats": ["SAM2", "DepthAnything2"]}</dt_plan>'
    with pytest.raises(DAGError) as info:
        adapter([bad_plan]).predict(make_sample())
    assert info.value.kind == "parse" and info.value.reason == "missing_dependency"
    # a failed rollout keeps its events too, and what its policy calls cost
    assert info.value.trace == {"rollout": bad_plan, "events": [], "calls": [{"after": "start", "generated": 3}]}


def test_unknown_instance_in_answer_is_a_parse_failure_with_trace():
    with pytest.raises(ParseError) as info:
        adapter([PLAN, '<task>segmentation</task><answer>{"instances": [9]}</answer>']).predict(make_sample())
    assert info.value.reason == "unknown_instance"
    assert "<dt_rep>" in info.value.trace["rollout"]
    assert [e["stage"] for e in info.value.trace["events"]] == ["plan", "twin", "answer"]


def test_vqa_answer_is_text():
    pred = adapter([PLAN, "<task>vqa</task> <answer>a dog</answer>"]).predict(make_sample(task="vqa"))
    assert (pred.task, pred.text, pred.masks) == ("vqa", "a dog", None)


def test_prompt_names_query_modality_and_frame_count():
    a = adapter([PLAN, ANSWER])
    a.predict(make_sample())
    first = a.policy.prompts[0]
    assert "Query: the animal that moves to the right" in first
    assert "a video of 2 frames" in first
    assert "DepthStats (requires: SAM2, DepthAnything2)" in first


def test_hydra_config_instantiates_the_adapter_without_loading_a_model():
    # composed as run_bench.py does: conf/model/dtr1.yaml extends the schema of bench/harness/config.py
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "+model=dtr1", "policy=smollm2", "perception=oracle"])
    model = instantiate(adapter_node(cfg.model))
    assert isinstance(model, DTR1Adapter) and model.name == "dtr1"
    fp = model.fingerprint()
    assert fp["policy"]["model"] == "smollm2" and fp["perception"]["name"] == "oracle"
    assert fp["limits"]["max_rounds"] == 10 and fp["sandbox"]["timeout_s"] == 10.0
    assert model.policy._backend is None


def test_unknown_sandbox_key_is_rejected():
    with pytest.raises(Exception, match="unknown keys"):
        DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception(), sandbox={"network": True})


def test_code_error_in_the_real_sandbox_is_reported_and_the_rollout_continues():
    failing = "<execute>\nprint(masks[99])\n</execute>"
    pred = adapter([PLAN, failing, ANSWER]).predict(make_sample())
    assert pred.error is None and pred.task == "segmentation"
    results = pred.trace["rollout"].split("<results>")[1].split("</results>")[0]
    assert results.startswith("KeyError") and "\n" not in results
    assert pred.trace["events"][2]["ok"] is False


# --- twin style: the paper's prompt for real checkpoints, a few-token twin for the embedded policy ---

def _dtr1_cfg(policy: str, *overrides: str):
    # composed as run_bench.py does (conf/model/dtr1.yaml extends bench/harness/config.py's schema)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=["+dataset=demo", "+model=dtr1", f"policy={policy}", "perception=oracle",
                                            *overrides])


def test_the_full_style_keeps_the_papers_prompt_and_the_fingerprint_without_the_knob():
    from rvt_bench.adapters.dtr1 import prompt as prompts
    from rvt_bench.adapters.twin.registry import describe_tools

    # The digest of the system prompt before twin styles existed: real checkpoints' runs keep their names.
    assert prompts.prompt_digest(describe_tools(), 10) == prompts.prompt_digest(describe_tools(), 10, "full") == "7fe491fd90f4"
    full = adapter([])
    assert "twin_style" not in full.fingerprint()["limits"]
    compact = DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception(), twin_style="compact")
    assert compact.fingerprint()["limits"]["twin_style"] == "compact"
    assert compact.fingerprint()["prompt"]["sha256"] != full.fingerprint()["prompt"]["sha256"]


def test_compact_style_inserts_the_compact_twin_and_describes_it():
    a = DTR1Adapter(policy=ScriptedPolicy([PLAN, CODE, ANSWER]), perception=OraclePerception(),
                    sandbox={"timeout_s": 20.0}, twin_style="compact", twin_max_chars=600)
    pred = a.predict(make_sample())
    assert pred.error is None
    rep = json.loads(pred.trace["rollout"].split("<dt_rep>")[1].split("</dt_rep>")[0])
    assert set(rep["video"]) == {"size", "num_frames"} and all("box" in i and "track" not in i for i in rep["instances"])
    system = a.policy.prompts[0]
    assert '"box" {frame index: [x1, y1, x2, y2]}' in system and '"box":{"0":[0.35' in system
    # the code still sees the full twin: the example's track-based code ran on it
    results = pred.trace["rollout"].split("<results>")[1].split("</results>")[0]
    assert results.splitlines()[1].startswith("2 dog 4")


def test_unknown_twin_style_is_rejected():
    with pytest.raises(Exception, match="twin_style"):
        DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception(), twin_style="tiny")


def test_the_embedded_policy_config_sizes_the_twin_and_the_command_line_still_wins():
    small = instantiate(adapter_node(_dtr1_cfg("smollm2").model))
    assert (small.limits.twin_style, small.limits.twin_max_chars) == ("compact", 400)
    other = _dtr1_cfg("scripted", "policy.turns_file=unused").model  # a policy without a `rollout:` block
    assert (other.twin_style, other.twin_max_chars) == ("full", 6000)
    other = DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception(), twin_style=other.twin_style,
                        twin_max_chars=other.twin_max_chars)
    assert (other.limits.twin_style, other.limits.twin_max_chars) == ("full", 6000)
    chosen = instantiate(adapter_node(_dtr1_cfg("smollm2", "model.twin_style=full", "model.twin_max_chars=3000").model))
    assert (chosen.limits.twin_style, chosen.limits.twin_max_chars) == ("full", 3000)
