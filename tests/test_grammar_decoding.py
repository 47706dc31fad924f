"""policy.decoding=grammar: the DT-R1 protocol grammars (adapters/dtr1/grammar.py) and each backend's
mechanism: vLLM structured outputs through the openai policy (loopback server), xgrammar in the hf
policy (tiny random model), llama.cpp grammars in the embedded GGUF policy."""
import json

import pytest
from xgrammar.testing import _is_grammar_accept_string as accepts

from rvt_bench.adapters.dtr1 import grammar as G
from rvt_bench.adapters.dtr1.answer import parse_answer
from rvt_bench.adapters.policy.base import Request
from rvt_bench.adapters.twin.dag import parse_dag, validate_dag

PLAN_OK = '<think>the dog moves</think> <dt_plan>{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"]}</dt_plan>'


@pytest.mark.parametrize("plan, ok", [
    ('{"SAM2": [], "SemanticAnalysis": ["SAM2"]}', True),
    ('{"OWLv2": []}', True),
    ('{"SemanticAnalysis": ["SAM2"]}', False),           # dependency not planned
    ('{"SAM2": [], "DepthStats": ["SAM2"]}', False),      # requires DepthAnything2 as well
    ('{"SAM3": []}', False),                              # not a registry tool
    ('{}', False),                                        # empty plan
])
def test_plan_grammar_admits_exactly_valid_dags(plan, ok):
    assert accepts(G.plan_grammar(), f"<think>x</think> <dt_plan>{plan}</dt_plan>") is ok


def test_every_dag_the_grammar_admits_validates():
    # All subsets of the registry in registry order: admitted by the grammar <=> validate_dag passes.
    from itertools import combinations

    from rvt_bench.adapters.twin.dag import DAGError
    from rvt_bench.adapters.twin.registry import TOOLS

    names = list(TOOLS)
    for k in range(1, 4):
        for subset in combinations(names, k):
            dag = {n: list(TOOLS[n].requires) for n in subset}
            text = json.dumps(dag, separators=(", ", ": "))
            try:
                validate_dag(parse_dag(text))
                valid = True
            except DAGError:
                valid = False
            assert accepts(G.plan_grammar(), f"<think>x</think> <dt_plan>{text}</dt_plan>") is valid, text


def test_think_span_is_bounded():
    spans = G.Spans(think_chars=10)
    assert accepts(G.plan_grammar(spans), '<think>0123456789</think> <dt_plan>{"SAM2": []}</dt_plan>')
    assert not accepts(G.plan_grammar(spans), '<think>0123456789X</think> <dt_plan>{"SAM2": []}</dt_plan>')


def test_step_grammar_answers_only_with_twin_instance_ids():
    g = G.step_grammar([1, 2], num_frames=2)
    assert accepts(g, '<task>segmentation</task> <answer>{"instances": [2]}</answer>')
    assert not accepts(g, '<task>segmentation</task> <answer>{"instances": [3]}</answer>')
    assert not accepts(g, '<task>detection</task> <answer>{"instances": [1]}</answer>')


def test_step_grammar_boxes_are_four_numbers_in_unit_range():
    g = G.step_grammar([1], num_frames=2)
    assert accepts(g, '<task>grounding</task> <answer>{"boxes": {"1": [[0.1, 0.2, 0.5, 1]]}}</answer>')
    assert not accepts(g, '<task>grounding</task> <answer>{"boxes": {"1": [[0.1, 0.2, 1.5, 1]]}}</answer>')
    assert not accepts(g, '<task>grounding</task> <answer>{"boxes": {"2": [[0.1, 0.2, 0.5, 1]]}}</answer>')  # frame 2 of 0..1


def test_code_rounds_end_when_none_are_left():
    code = "<think>look</think> <execute>print(1)</execute>"
    assert accepts(G.step_grammar([1], 1, allow_execute=True), code)
    assert not accepts(G.step_grammar([1], 1, allow_execute=False), code)


# --- openai policy: the request carries the grammar --------------------------------------------------

def test_openai_policy_sends_each_segments_grammar_as_structured_outputs(serve):
    from tests.test_dtr1_adapter import make_sample
    from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
    from rvt_bench.adapters.twin.oracle import OraclePerception
    from tests.test_policy_openai import _policy

    answer = '<task>segmentation</task> <answer>{"instances": [2]}</answer>'
    # The assistant's turn (after the template's last marker) holds <dt_rep> once the plan ran.
    server = serve(lambda p: answer if "<dt_rep>" in p.rsplit("<｜Assistant｜>", 1)[1] else 'x</think> <dt_plan>{"SAM2": []}</dt_plan>')
    adapter = DTR1Adapter(policy=_policy(server.url, decoding="grammar"), perception=OraclePerception())
    pred = adapter.predict(make_sample())
    assert pred.error is None and pred.task == "segmentation"
    grammars = [b["structured_outputs"]["grammar"] for b in server.bodies]
    assert len(grammars) == 2
    assert "dt_plan" in grammars[0] and '"<think>"' not in grammars[0].split("\n")[0]  # the R1 template opened <think>
    assert 'id ::= "1" | "2"' in grammars[1]  # the twin's instance ids


def test_openai_policy_free_decoding_sends_no_grammar(serve):
    from tests.test_policy_openai import _policy

    server = serve(lambda p: "a</answer>")
    _policy(server.url).generate_batch([Request("p", ["</answer>"], 5, grammar=None)])
    assert "structured_outputs" not in server.bodies[0] and "guided_grammar" not in server.bodies[0]


def test_openai_policy_older_vllm_field(serve):
    from tests.test_policy_openai import _policy

    server = serve(lambda p: "a</answer>")
    _policy(server.url, decoding="grammar", grammar_field="guided_grammar").generate_batch([Request("p", ["</answer>"], 5, grammar="root ::= \"a\"")])
    assert server.bodies[0]["guided_grammar"] == 'root ::= "a"'


@pytest.fixture
def serve():
    from tests.test_policy_openai import Server

    servers = []

    def start(continuation, style="vllm"):
        servers.append(Server(continuation, style))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


# --- hf policy: xgrammar on a tiny random model -------------------------------------------------------

def test_hf_policy_output_follows_the_grammar(tiny_r1):
    from rvt_bench.adapters.policy.hf import HFPolicy

    policy = HFPolicy(str(tiny_r1[0]), dtype="float32", device="cpu", decoding="grammar")
    prompt = policy.render([{"role": "user", "content": "find the dog"}], policy.prefill)
    grammar = G.step_grammar([1, 2], 1, G.Spans(think_chars=8, code_chars=8), allow_execute=False, tasks=("segmentation",))
    gen = policy.generate_batch([Request(prompt, ["</answer>"], 200, grammar=grammar)])[0]
    assert gen.stop_reason == "stop", gen
    text = gen.text + gen.matched_stop
    assert accepts(grammar, text)
    body = text.split("<answer>")[1].split("</answer>")[0]

    class Twin:
        size, num_frames = (4, 4), 1

        def instance_ids(self):
            return [1, 2]

        def masks_for(self, ids):
            return [None]

    assert parse_answer("segmentation", body, Twin()).masks == [None]


# --- embedded GGUF policy: llama.cpp grammar ---------------------------------------------------------

def test_gguf_policy_plan_under_grammar_is_a_valid_dag():
    from rvt_bench.adapters.policy.gguf import GGUFPolicy

    policy = GGUFPolicy("smollm2", n_ctx=1024, decoding="grammar")
    prompt = policy.render([{"role": "user", "content": "Plan vision tools to find the dog, as <think>..</think> <dt_plan>JSON</dt_plan>."}])
    gen = policy.generate(prompt, ["</dt_plan>"], 200, grammar=G.plan_grammar(G.Spans(think_chars=40)))
    assert gen.stop_reason == "stop"
    plan = gen.text.split("<dt_plan>")[1]
    assert validate_dag(parse_dag(plan))


def test_embedded_policy_run_reaches_answer_parsed_and_prints_the_funnel(tmp_path):
    # The main job's setup (embedded SmolLM2 under grammar decoding, oracle twin) on two demo images
    # in a ReasonSeg-format root.
    import shutil

    from tests.test_run_bench_cli import REPO, SMALL, bench, run_dir_of

    root = tmp_path / "reasonseg"
    (root / "val/instances").mkdir(parents=True)
    for name in SMALL:
        for suffix in (".jpg", ".json"):
            shutil.copy(REPO / "demo/reasonseg/val" / f"{name}{suffix}", root / "val")
        shutil.copy(REPO / "demo/reasonseg/val/instances" / f"{name}.json", root / "val/instances")
    proc = bench("+dataset=reasonseg", f"dataset.root={root}", "dataset.split=val", "+model=dtr1",
                 f"run.root={tmp_path / 'runs'}", "leaderboard.publish=false")
    report = json.loads((run_dir_of(proc) / "metrics.json").read_text())["adapter_report"]
    assert report["decoding"] == "grammar"
    assert {s["key"]: s["reached"] for s in report["stages"]}["answer_parsed"] == 2
    assert "  funnel (grammar decoding): plan emitted " in proc.stdout and "answer parsed" in proc.stdout


def test_the_step_grammar_a_rollout_sends_lets_the_policy_declare_any_task():
    # The paper's protocol: the prompt names no task, so the grammar must not choose it either.
    from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
    from rvt_bench.adapters.policy.scripted import ScriptedPolicy
    from rvt_bench.adapters.twin.oracle import OraclePerception
    from tests.test_dtr1_adapter import PLAN, make_sample

    class Recording(ScriptedPolicy):
        decoding = "grammar"

        def __init__(self, turns):
            super().__init__(turns)
            self.grammars = []

        def generate(self, prompt, stop, max_new_tokens, grammar=None):
            self.grammars.append(grammar)
            return super().generate(prompt, stop, max_new_tokens)

    policy = Recording([PLAN, "<task>vqa</task> <answer>a dog</answer>"])
    adapter = DTR1Adapter(policy=policy, perception=OraclePerception(), sandbox={"timeout_s": 20.0})
    pred = adapter.predict(make_sample(task="segmentation"))
    assert "Task:" not in adapter.prompt(make_sample())[1]["content"]  # the user message names none
    step = policy.grammars[1]
    for final in ('<task>segmentation</task> <answer>{"instances": [1]}</answer>',
                  '<task>grounding</task> <answer>{"boxes": {"0": [[0, 0, 0.5, 0.5]]}}</answer>',
                  "<task>vqa</task> <answer>a dog</answer>", "<task>summarization</task> <answer>a dog walks</answer>"):
        assert accepts(step, final), final
    assert (pred.task, pred.text) == ("vqa", "a dog")
