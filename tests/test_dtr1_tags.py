"""Extraction of DT-R1 rollout tags: lenient about whitespace, strict about meaning."""
import pytest

from rvt_bench.adapters.dtr1 import tags as T
from rvt_bench.core.types import ParseError


def test_extract_one_strips_whitespace_around_contents():
    assert T.extract_one("<answer>\n  {\"instances\": [2]} \n</answer>", "answer") == '{"instances": [2]}'


def test_tags_tolerate_spaces_inside_brackets_and_letter_case():
    assert T.extract_one("< Answer >yes</ answer >", "answer") == "yes"


def test_missing_tag_is_a_parse_error_with_reason():
    with pytest.raises(ParseError) as info:
        T.extract_one("<task>vqa</task> the answer is yes", "answer")
    assert info.value.reason == "missing_tag"
    assert info.value.kind == "parse"


@pytest.mark.parametrize("call, text, reason", [
    (T.extract_one, "<answer>yes", "unclosed_tag"),                            # never closed
    (T.extract_one, "yes</answer>", "unclosed_tag"),                           # closed, never opened
    (T.find_blocks, "<answer>a <answer>b</answer>", "unclosed_tag"),            # reopened before the close
    (T.extract_one, "<answer>a</answer> <answer>b</answer>", "duplicate_tag"),  # two answers are ambiguous
])
def test_malformed_tags_are_tag_errors_with_their_reason(call, text, reason):
    with pytest.raises(T.TagError) as info:
        call(text, "answer")
    assert info.value.reason == reason


def test_find_blocks_returns_all_blocks_in_order():
    assert T.find_blocks("<think>a</think>x<think> b </think>", "think") == ["a", "b"]


def test_extract_optional_absent_is_none():
    assert T.extract_optional("<answer>a</answer>", "task") is None


def test_extract_open_block_takes_text_after_last_opening():
    # a policy returns the text before its stop string "</execute>"
    segment = "<think>I will use an <execute> block</think>\n<execute>\nprint(1)\n"
    assert T.extract_open_block(segment, "execute") == "print(1)"


def test_extract_open_block_without_opening_is_missing_tag():
    with pytest.raises(T.TagError) as info:
        T.extract_open_block("<think>x</think> print(1)", "execute")
    assert info.value.reason == "missing_tag"


def test_stop_strings_are_the_closing_tags():
    assert (T.STOP_PLAN, T.STOP_EXECUTE, T.STOP_ANSWER) == ("</dt_plan>", "</execute>", "</answer>")
