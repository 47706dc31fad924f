"""adapters/jit/adapter.py with a scripted policy (fixed replies) and oracle perception on demo
samples: plan -> DAG -> twin -> scene graph -> LLM or sandboxed program -> ids -> masks / boxes /
text, every prompt and reply in the trace; and the golden prompts of conf/model/jit.yaml."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.jit import prompts as P
from rvt_bench.adapters.jit.adapter import JiTAdapter, program_code
from rvt_bench.adapters.jit.planner import JiTError
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.dag import DAGError
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.core.types import AdapterError
from rvt_bench.harness.config import group_node

REPO = Path(__file__).resolve().parents[1]
# the composed `model` node (schema defaults + conf/model/jit.yaml), unresolved: as run_bench.py builds it
CONF = OmegaConf.to_container(group_node("model", "jit"), resolve=False)
SEMANTIC = '{"query_type": "semantic", "specialists": [{"name": "OWLv2", "rationale": "names the objects"}]}'
SPATIAL = '{"query_type": "spatial", "specialists": [{"name": "DepthAnything2", "rationale": "closer means depth"}]}'


@pytest.fixture(scope="module")
def demo():
    return {s.id: s for s in DemoDataset(REPO / "demo")}


def make(*replies, **overrides):
    kw = {k: v for k, v in CONF.items() if k not in ("_target_", "name", "policy", "perception")}
    kw.update(overrides)
    return JiTAdapter(policy=ScriptedPolicy(list(replies)), perception=OraclePerception(), **kw)


def _cup_id(sample):
    twin = build_twin(sample, ["SAM2", "OWLv2"], OraclePerception())
    return next(i.id for i in twin.instances if i.label == "cup"), twin


def test_a_semantic_query_is_answered_by_the_llm_over_the_graph(demo):
    sample = demo["video/kitchen_table/0"]  # "the cup"
    cup, twin = _cup_id(sample)
    pred = make(SEMANTIC, json.dumps({"ids": [cup]})).predict(sample)
    assert pred.masks == twin.masks_for([cup])
    assert pred.trace["mode"] == "semantic" and pred.trace["ids"] == [cup]
    assert pred.trace["order"] == ["SAM2", "OWLv2", "Trajectory"]
    planner, answer = pred.trace["calls"]
    assert planner["stage"] == "planner" and planner["reply"] == SEMANTIC
    assert "Query: the cup" in answer["messages"][1]["content"] and '"label":"cup"' in answer["messages"][1]["content"]
    assert set(pred.timings) == {"planner", "twin", "graph", "reasoning", "masks"}


def test_a_spatial_query_runs_the_llms_program_in_the_sandbox(demo):
    sample = demo["video/lawn_depth/1"]  # "the object that is getting closer to the camera"
    program = ("```python\n"
               "first = {n['id']: n for n in graph['frames'][0]['nodes']}\n"
               "last = {n['id']: n for n in graph['frames'][-1]['nodes']}\n"
               "grow = {i: last[i]['area'] - first[i]['area'] for i in first if i in last}\n"
               "print(json.dumps({'ids': [max(grow, key=grow.get)]}))\n```")
    pred = make(SPATIAL, program).predict(sample)
    twin = build_twin(sample, ["SAM2"], OraclePerception())
    areas = {i.id: i.frames[max(i.frames)].area - i.frames[min(i.frames)].area for i in twin.instances}
    assert pred.trace["mode"] == "program" and pred.trace["ids"] == [max(areas, key=areas.get)]
    assert pred.trace["order"] == ["SAM2", "DepthAnything2", "DepthStats", "Trajectory"]
    assert "sandbox" in pred.timings and pred.trace["program_output"].strip().startswith('{"ids"')


def test_a_failing_program_is_a_parse_failure_with_its_error(demo):
    with pytest.raises(JiTError) as err:
        make(SPATIAL, "print(graph['nope'])").predict(demo["video/lawn_depth/1"])
    assert err.value.reason == "program_error" and "KeyError" in str(err.value)
    assert [c["stage"] for c in err.value.trace["calls"]] == ["planner", "program"]


def test_grounding_gives_the_chosen_objects_boxes_per_frame(demo):
    sample = demo["rvt/grounding/kitchen_table"]
    twin = build_twin(sample, ["SAM2"], OraclePerception())
    first = twin.instances[0]
    pred = make(SEMANTIC, json.dumps({"ids": [first.id]})).predict(sample)
    assert [b for b in pred.boxes] == [[list(first.frames[t].bbox)] if t in first.frames else []
                                       for t in range(sample.num_frames)]


def test_vqa_is_the_llms_text_over_the_graph(demo):
    pred = make(SEMANTIC, " The rocket. ").predict(demo["rvt/vqa/launch_pad"])
    assert pred.text == "The rocket." and pred.trace["mode"] == "text"


def test_smoothing_changes_the_masks_over_time(demo):
    sample = demo["video/kitchen_table/0"]
    cup, _ = _cup_id(sample)
    plain = make(SEMANTIC, json.dumps({"ids": [cup]})).predict(sample)
    smooth = make(SEMANTIC, json.dumps({"ids": [cup]}), smoothing={"enabled": True, "alpha": 0.8}).predict(sample)
    assert plain.masks[0] is not None and smooth.masks[0] is not None and smooth.masks != plain.masks


@pytest.mark.parametrize("replies,error,reason", [
    (["no plan"], JiTError, "plan_json"),
    ([SEMANTIC, "the cup"], JiTError, "answer_json"),
    ([SEMANTIC, '{"ids": [99]}'], JiTError, "unknown_id"),
    ([SPATIAL, "print('done')"], JiTError, "program_output"),
])
def test_unusable_replies_fail_the_sample_with_the_trace(demo, replies, error, reason):
    with pytest.raises(error) as err:
        make(*replies).predict(demo["video/kitchen_table/0"])
    assert err.value.reason == reason and err.value.trace["calls"][0]["reply"] == replies[0]


def test_dinov2_with_oracle_perception_fails_naming_the_perception_to_use(demo):
    plan = '{"query_type": "semantic", "specialists": [{"name": "DINOv2"}]}'
    with pytest.raises(AdapterError, match="perception=foundation"):
        make(plan, '{"ids": [1]}').predict(demo["video/kitchen_table/0"])


def test_the_planner_is_offered_only_the_configured_specialists(demo):
    jit = make(SEMANTIC, '{"ids": []}', specialists=["SAM2", "OWLv2"])
    pred = jit.predict(demo["video/kitchen_table/0"])
    system = pred.trace["calls"][0]["messages"][0]["content"]
    assert "- OWLv2:" in system and "DINOv2" not in system and pred.masks == [None] * 16


def test_prompts_window_smoothing_and_policy_are_in_the_fingerprint():
    base = make().fingerprint()
    assert base["prompt"]["version"] == 1 and base["window"] == 6
    assert make(window=4).fingerprint() != base
    assert make(smoothing={"enabled": True, "alpha": 0.8}).fingerprint() != base
    assert make(prompts=dict(CONF["prompts"], answer_ids="Answer.")).fingerprint()["prompt"] != base["prompt"]


def test_program_code_takes_the_fenced_block():
    assert program_code("Here:\n```python\nprint(1)\n```\nthanks") == "print(1)\n"
    assert program_code("print(2)") == "print(2)\n"


# --- golden prompts -------------------------------------------------------------------------------

def test_planner_prompt(demo):
    system, user = P.planner_messages(P.check(CONF["prompts"]), demo["video/kitchen_table/0"], ["SAM2", "OWLv2"])
    assert system == {"role": "system", "content": (
        "You plan the perception for a query about an image or a video. Choose the specialist vision models that the "
        "query needs; only those will run.\n"
        "Specialists:\n"
        "- SAM2: segments and tracks every object through the frames (always runs)\n"
        "- OWLv2: open-vocabulary detection, a category label for each object\n"
        'Reply with one JSON object and nothing else: {"query_type": "semantic" or "spatial" or "temporal", '
        '"specialists": [{"name": "<specialist>", "rationale": "<why the query needs it>"}]}\n'
        "semantic: the answer depends on what the objects are or what they are for. spatial: on where objects are "
        "relative to each other. temporal: on how objects move or change over time.")}
    assert user == {"role": "user", "content": "Input: a video of 16 frames.\nTask: segmentation.\nQuery: the cup"}


def test_answer_prompt(demo):
    system, user = P.reasoning_messages(P.check(CONF["prompts"]), "answer_ids", demo["image/coffee_cup"], "GRAPH")
    assert system["content"] == (
        "You answer a query about a scene from its scene graph. Each object has an id; each listed frame gives its "
        "nodes (bbox [x1, y1, x2, y2] in pixels, origin top-left, velocity [dx, dy] in pixels per frame) and edges "
        "(a left-of b, a above b, a behind b, a moving-towards b).\n"
        'Reply with one JSON object and nothing else: {"ids": [the ids of the objects the query refers to]}')
    assert user["content"] == "GRAPH\nTask: segmentation.\nQuery: the container used for hot drinks"


def test_program_prompt_ends_with_its_output_contract():
    text = P.fill(P.check(CONF["prompts"])["program"])
    assert text.endswith('The program must print one line: json.dumps({"ids": [the ids of the objects the query '
                         'refers to]}).\nReply with the code only.')
    assert text.startswith("You write a Python program that answers a query from a scene graph.")


def test_the_preflight_checks_the_programs_sandbox_and_reports_its_isolation():
    from rvt_bench.core.types import SandboxError

    with pytest.raises(SandboxError, match=r"model\.sandbox\.memory_mb=100 .* cannot run a probe round"):
        make(sandbox={"memory_mb": 100}).preflight()
    assert make().code_isolation() == "bwrap"
    assert make(sandbox={"isolation": "none"}).code_isolation() == "none"
