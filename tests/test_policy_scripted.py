"""The scripted policy applies the same stop semantics as a real one."""
import pytest

from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.core.types import AdapterError


def test_stop_string_cuts_the_text_before_it():
    gen = ScriptedPolicy(["a b</execute> c"]).generate("p", ["</execute>"], 10)
    assert (gen.text, gen.stop_reason, gen.matched_stop, gen.n_tokens) == ("a b", "stop", "</execute>", 2)


def test_no_stop_string_is_end_of_turn():
    gen = ScriptedPolicy(["a b"]).generate("p", ["</answer>"], 10)
    assert (gen.text, gen.stop_reason, gen.matched_stop) == ("a b", "eos", None)


def test_budget_cuts_after_max_new_tokens_words():
    gen = ScriptedPolicy(["one two three four</answer>"]).generate("p", ["</answer>"], 2)
    assert (gen.text, gen.stop_reason, gen.n_tokens) == ("one two", "length", 2)


def test_exhausted_script_is_an_adapter_error():
    policy = ScriptedPolicy(["x"])
    policy.generate("p", [], 5)
    with pytest.raises(AdapterError, match="turns used"):
        policy.generate("p", [], 5)


def test_render_contains_messages_and_prefix():
    prompt = ScriptedPolicy([]).render([{"role": "system", "content": "SYS"}], "<think>")
    assert "SYS" in prompt and prompt.endswith("<think>")


def test_turns_file_replays_the_script_for_every_rollout(tmp_path):
    path = tmp_path / "turns.json"
    path.write_text('["plan</dt_plan>", "answer</answer>"]')
    policy = ScriptedPolicy.from_file(str(path))
    sample_a, sample_b = "[user]\nquery a\n[assistant]\n", "[user]\nquery b\n[assistant]\n"
    texts = [policy.generate(p, ["</dt_plan>", "</answer>"], 10).text
             for p in (sample_a, sample_b, sample_a + "plan</dt_plan>", sample_b + "plan</dt_plan>")]
    assert texts == ["plan", "plan", "answer", "answer"]


@pytest.mark.parametrize("content", ['{"turns": ["x"]}', '["x", 3]', "not json"])
def test_a_turns_file_that_is_not_a_list_of_strings_is_refused(tmp_path, content):
    path = tmp_path / "turns.json"
    path.write_text(content)
    with pytest.raises(AdapterError, match="turns_file"):
        ScriptedPolicy.from_file(str(path))


def test_scripted_config_instantiates_from_the_command_line_keys(tmp_path):
    import hydra.utils
    from omegaconf import OmegaConf

    path = tmp_path / "turns.json"
    path.write_text('["a"]')
    cfg = OmegaConf.load("conf/policy/scripted.yaml")
    cfg.turns_file = str(path)
    policy = hydra.utils.instantiate(cfg)
    assert isinstance(policy, ScriptedPolicy) and policy.turns == ["a"] and policy.per_rollout
