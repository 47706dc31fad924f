"""The scripted policy applies the same stop semantics as a real one."""
import pytest

from adapters.policy.scripted import ScriptedPolicy
from bench.types import AdapterError


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
