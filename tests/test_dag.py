"""DT-R1 plan parsing and validation (adapters/twin/dag.py) against the tool registry."""
import pytest

from rvt_bench.adapters.twin.dag import DAGError, parse_dag, validate_dag
from rvt_bench.adapters.twin.registry import TOOLS, describe_tools
from rvt_bench.core.types import ParseError

# The example plan of the DT-R1 paper (arXiv 2511.12365).
PAPER_DAG = '{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"], "SemanticAnalysis": ["SAM2"]}'


def _reason(text: str) -> str:
    with pytest.raises(DAGError) as info:
        validate_dag(parse_dag(text))
    return info.value.reason


def test_paper_dag_is_valid_and_ordered_with_roots_first():
    assert validate_dag(parse_dag(PAPER_DAG)) == ["SAM2", "DepthAnything2", "DepthStats", "SemanticAnalysis"]


@pytest.mark.parametrize("text", [
    PAPER_DAG,
    '{"Trajectory": ["SAM2"], "SAM2": [], "Qwen2.5-VL": [], "OWLv2": ["SAM2"]}',
    '{"DepthStats": ["SAM2", "DepthAnything2"], "DepthAnything2": [], "SAM2": [], "Trajectory": ["SAM2", "DepthStats"]}',
])
def test_order_puts_every_dependency_before_its_node(text):
    dag = parse_dag(text)
    order = validate_dag(dag)
    assert sorted(order) == sorted(dag)
    for node, deps in dag.items():
        assert all(order.index(d) < order.index(node) for d in deps)


def test_code_fences_and_whitespace_are_accepted():
    fenced = f"\n  ```json\n{PAPER_DAG}\n```  \n"
    bare_fence = f"```{PAPER_DAG}```"
    assert parse_dag(fenced) == parse_dag(PAPER_DAG) == parse_dag(bare_fence)


@pytest.mark.parametrize("text, reason", [
    ('{"SAM2": [}', "json"),
    ('["SAM2", "DepthAnything2"]', "json"),
    ('Plan: {"SAM2": []}', "json"),
    ("", "json"),
    ('{"SAM2": "DepthAnything2"}', "schema"),
    ('{"SAM2": [1]}', "schema"),
    ('{"SAM2": [], "SAM2": []}', "duplicate_node"),
    ('{"SAM2": ' + "[" * 50000 + "]" * 50000 + "}", "json"),   # past Python's parser stack
    ('{"SAM2": [' + "1" * 5000 + "]}", "json"),                 # past the integer digit limit
    ("{}", "empty"),
    ('{"SAM3": []}', "unknown_node"),
    ('{"SAM2": ["GroundingDINO"]}', "unknown_node"),
    ('{"SAM2": [], "DepthStats": ["SAM2", "DepthAnything2"]}', "missing_dependency"),
    ('{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2"]}', "insufficient_dependencies"),
    ('{"SemanticAnalysis": []}', "insufficient_dependencies"),
    ('{"SAM2": ["Trajectory"], "Trajectory": ["SAM2"]}', "cycle"),
    ('{"SAM2": ["SAM2"]}', "cycle"),
])
def test_invalid_plans_name_their_reason(text, reason):
    assert _reason(text) == reason


def test_dag_error_is_a_parse_error_with_a_message_naming_the_node():
    with pytest.raises(ParseError, match="SAM3"):
        validate_dag(parse_dag('{"SAM3": []}'))


def test_registry_declares_the_paper_requirements():
    assert TOOLS["DepthStats"].requires == ("SAM2", "DepthAnything2")
    assert TOOLS["SemanticAnalysis"].requires == ("SAM2",)
    assert TOOLS["Trajectory"].requires == ("SAM2",)
    assert all(TOOLS[n].requires == () for n in ("SAM2", "DepthAnything2", "OWLv2", "Qwen2.5-VL"))


def test_describe_tools_lists_every_listed_tool_with_its_requirements():
    lines = describe_tools().splitlines()
    listed = [name for name, spec in TOOLS.items() if spec.listed]
    assert len(lines) == len(listed)
    assert "- DepthStats (requires: SAM2, DepthAnything2):" in describe_tools()
    assert all(any(line.startswith(f"- {name} (") for line in lines) for name in listed)


def test_dinov2_is_a_tool_but_not_in_the_dtr1_tool_list():
    assert TOOLS["DINOv2"].requires == ("SAM2",) and not TOOLS["DINOv2"].listed
    assert "DINOv2" not in describe_tools()
    assert validate_dag({"SAM2": [], "DINOv2": ["SAM2"]}) == ["SAM2", "DINOv2"]
