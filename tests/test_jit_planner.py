"""adapters/jit/planner.py: the planner's JSON configuration of specialists, and its DAG."""
from __future__ import annotations

import pytest

from rvt_bench.adapters.jit.planner import JiTError, Plan, parse_plan, to_dag
from rvt_bench.adapters.twin.dag import validate_dag

PLAN = ('{"query_type": "spatial", "specialists": [{"name": "SAM2", "rationale": "objects"}, '
        '{"name": "DepthAnything2", "rationale": "behind means depth"}]}')


def test_a_plan_reads_query_type_specialists_and_rationales():
    plan = parse_plan(PLAN)
    assert plan == Plan("spatial", [("SAM2", "objects"), ("DepthAnything2", "behind means depth")])


def test_a_fenced_plan_inside_prose_parses():
    assert parse_plan("Here is my plan:\n```json\n" + PLAN + "\n```\nDone.").query_type == "spatial"


def test_repeated_specialists_count_once():
    plan = parse_plan('{"query_type": "semantic", "specialists": [{"name": "OWLv2"}, {"name": "OWLv2"}]}')
    assert plan.specialists == [("OWLv2", "")]


@pytest.mark.parametrize("text,reason", [
    ("I would use SAM2.", "plan_json"),
    ('{"query_type": "causal", "specialists": []}', "unknown_query_type"),
    ('{"query_type": "semantic", "specialists": "SAM2"}', "plan_schema"),
    ('{"query_type": "semantic", "specialists": [{"name": "YOLO"}]}', "unknown_specialist"),
    ('{"query_type": "semantic", "n": ' + "9" * 5000 + "}", "plan_json"),  # past the integer digit limit
    ("{" + '"a": [' * 50000 + "}", "plan_json"),                               # past the parser's stack
])
def test_unusable_plans_fail_with_their_reason(text, reason):
    with pytest.raises(JiTError) as err:
        parse_plan(text)
    assert err.value.reason == reason and err.value.kind == "parse"


def test_a_specialist_this_run_does_not_offer_is_refused():
    with pytest.raises(JiTError, match="DINOv2"):
        parse_plan('{"query_type": "semantic", "specialists": [{"name": "DINOv2"}]}', allowed=("SAM2", "OWLv2"))


def test_the_dag_always_segments_and_tracks_and_adds_what_each_specialist_needs():
    assert to_dag(Plan("semantic", [])) == {"SAM2": [], "Trajectory": ["SAM2"]}
    dag = to_dag(parse_plan(PLAN))
    assert dag == {"SAM2": [], "Trajectory": ["SAM2"], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"]}
    every = to_dag(Plan("temporal", [("OWLv2", ""), ("DINOv2", ""), ("DepthAnything2", "")]))
    assert validate_dag(every) == ["SAM2", "DepthAnything2", "OWLv2", "DepthStats", "Trajectory", "DINOv2"]
