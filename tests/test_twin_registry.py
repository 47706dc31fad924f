"""rvt_bench.adapters.twin.registry is the one list of vision tools: a tool registered there reaches the plan
validator, the plan grammar, the prompt's tool list and the perception dispatch with no other edit,
and the default prompt (which names runs) is what it was."""
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.adapters.dtr1.grammar import plan_grammar
from rvt_bench.adapters.dtr1.prompt import prompt_digest
from rvt_bench.adapters.twin import registry
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.dag import parse_dag, validate_dag
from rvt_bench.adapters.twin.foundation import FoundationPerception
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.adapters.twin.registry import ToolSpec, describe_tools, register_tool
from rvt_bench.core.types import AdapterError
from tests.test_twin_oracle import synthetic_sample

BRIGHTNESS = ToolSpec("Brightness", ("SAM2",), "twin.artifacts['brightness']",
                      "mean brightness of each instance", method="brightness")
SPREAD = ToolSpec("Spread", ("SAM2",), "twin.artifacts['spread']", "frames each instance is visible in",
                  step="tests.test_twin_registry:spread_step")
GLOW = ToolSpec("Glow", (), "twin.artifacts['glow']", "a model that glows", method="glow", listed=False,
                backend="glow", uses="Glow")


@pytest.fixture
def registered():
    """Brightness (computed from the twin) and Glow (a model node) registered for one test only."""
    for spec in (BRIGHTNESS, GLOW):
        register_tool(spec)
    yield
    for spec in (BRIGHTNESS, GLOW):
        registry.TOOLS.pop(spec.name)


def spread_step(perception, sample, twin):
    twin.artifacts["spread"] = {inst.id: len(inst.frames) for inst in twin.instances}


class BrightOracle(OraclePerception):
    def brightness(self, sample, twin):
        twin.artifacts["brightness"] = {inst.id: 0.5 for inst in twin.instances}


def test_the_default_prompt_and_tool_list_are_unchanged():
    # digests of DT-R1's system prompt before the registry derived the dispatch (main at 69042cd)
    assert prompt_digest(describe_tools(), 10) == "7fe491fd90f4"
    assert prompt_digest(describe_tools(), 2) == "8e7b428c7f6c"
    assert "Brightness" not in describe_tools() and "Brightness" not in plan_grammar()


def test_a_registered_tool_reaches_the_prompt_and_the_plan_grammar(registered):
    assert describe_tools().splitlines()[-1] == "- Brightness (requires: SAM2): mean brightness of each instance"
    assert "Glow" not in describe_tools()  # unlisted
    grammar = plan_grammar()
    assert '\\"Brightness\\": [\\"SAM2\\"]' in grammar and '\\"Glow\\": []' in grammar


def test_a_registered_tool_is_a_valid_plan_node_in_registry_order(registered):
    assert validate_dag(parse_dag('{"Brightness": ["SAM2"], "SAM2": []}')) == ["SAM2", "Brightness"]


def test_a_registered_tool_dispatches_to_its_perception_method(registered):
    twin = build_twin(synthetic_sample(), ["SAM2", "Brightness"], BrightOracle())
    assert twin.tools == ["SAM2", "Brightness"] and twin.artifacts["brightness"] == {1: 0.5, 2: 0.5}


def test_a_backend_without_the_tool_method_says_so(registered):
    with pytest.raises(AdapterError, match="perception 'oracle' has no tool 'Brightness'"):
        build_twin(synthetic_sample(), ["SAM2", "Brightness"], OraclePerception())


def test_a_registered_model_node_is_a_foundation_backend_key_and_can_be_disabled(registered):
    class Backend:
        def fingerprint(self):
            return {"model_id": "glow-1"}

    perception = FoundationPerception(glow=Backend(), disable=["Glow"])
    assert perception.backends["Glow"] is not None and "Glow" in perception.disable
    assert perception.fingerprint()["backends"]["Glow"] == {"model_id": "glow-1"}
    assert "Glow" not in FoundationPerception().fingerprint()["backends"]  # added later: only when configured


@pytest.fixture
def spread():
    register_tool(SPREAD)
    yield SPREAD
    registry.TOOLS.pop(SPREAD.name)


def test_a_tool_computed_from_the_twin_is_a_step_every_perception_runs(spread):
    twin = build_twin(synthetic_sample(), ["SAM2", "Spread"], OraclePerception())
    assert twin.tools == ["SAM2", "Spread"] and twin.artifacts["spread"] == {1: 2, 2: 2}


def test_a_perception_method_of_the_tool_wins_over_its_step(spread):
    class SpreadOracle(OraclePerception):
        def spread(self, sample, twin):
            twin.artifacts["spread"] = "own"

    registry.TOOLS["Spread"] = ToolSpec(**{**SPREAD.__dict__, "method": "spread"})
    twin = build_twin(synthetic_sample(), ["SAM2", "Spread"], SpreadOracle())
    assert twin.artifacts["spread"] == "own"


def test_a_step_is_imported_when_it_first_runs_not_when_registered():
    spec = register_tool(ToolSpec("Late", (), "", "", step="no_such_module_xyz:step"))
    try:
        with pytest.raises(ValueError, match="tool 'Late': cannot import the module of step 'no_such_module_xyz:step'"):
            build_twin(synthetic_sample(), ["Late"], OraclePerception())
    finally:
        registry.TOOLS.pop(spec.name)


def test_a_step_must_name_a_function():
    with pytest.raises(ValueError, match="names no function"):
        registry.step_function(ToolSpec("X", (), "", "", step="tests.test_twin_registry:SPREADS"))


def test_importing_the_registry_imports_no_model_code():
    code = ("import sys, rvt_bench.adapters.twin.registry as r; r.TOOLS['DINOv2']; "
            "print(sorted(m for m in ('torch', 'transformers', 'rvt_bench.adapters.twin.backends.dinov2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


def test_unknown_foundation_keys_are_refused():
    with pytest.raises(AdapterError, match="unknown keys \\['glow'\\]"):
        FoundationPerception(glow=object())


def test_register_tool_refuses_duplicates_and_unknown_requirements():
    with pytest.raises(ValueError, match="already registered"):
        register_tool(registry.TOOLS["SAM2"])
    with pytest.raises(ValueError, match="unknown tools"):
        register_tool(ToolSpec("X", ("Nope",), "", "", method="x"))
    with pytest.raises(ValueError, match="backend key 'sam2'"):
        register_tool(ToolSpec("X", (), "", "", method="x", backend="sam2"))
    with pytest.raises(ValueError, match="neither a perception method nor a step"):
        register_tool(ToolSpec("X", (), "", ""))
    with pytest.raises(ValueError, match="step must be 'module:function', got 'tests.x.step'"):
        register_tool(ToolSpec("X", (), "", "", step="tests.x.step"))
    assert "X" not in registry.TOOLS


def test_derived_model_nodes_and_config_keys_are_the_ones_foundation_listed_by_hand():
    # foundation.py's MODEL_NODES and _CONFIG_KEY before they were derived (main at 69042cd)
    assert registry.model_nodes() == ("SAM2", "DepthAnything2", "OWLv2", "Qwen2.5-VL", "DINOv2")
    assert registry.backend_keys() == {"sam2": "SAM2", "depth": "DepthAnything2", "owlv2": "OWLv2",
                                       "qwen": "Qwen2.5-VL", "dinov2": "DINOv2"}
    assert {n: s.uses for n, s in registry.TOOLS.items() if s.uses} == {
        "SAM2": "SAM2", "DepthAnything2": "DepthAnything2", "OWLv2": "OWLv2", "Qwen2.5-VL": "Qwen2.5-VL",
        "SemanticAnalysis": "Qwen2.5-VL", "DINOv2": "DINOv2"}
