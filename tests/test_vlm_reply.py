"""adapters/vlm/reply.py: a reasoning model's answer comes after </think>."""
from __future__ import annotations

import pytest

from rvt_bench.adapters.vlm.reply import ReplyError, split_reply


def test_a_plain_reply_is_the_answer():
    parts = split_reply("  A red cup.\n")
    assert parts.thought is None and parts.answer == "A red cup."


def test_the_answer_follows_the_think_block():
    parts = split_reply("<think>the cup is left</think>\nA red cup.")
    assert parts.thought == "the cup is left" and parts.answer == "A red cup."


def test_answer_tags_are_unwrapped():
    parts = split_reply('<think>x</think><answer>[{"bbox_2d": [1, 2, 3, 4]}]</answer>')
    assert parts.answer == '[{"bbox_2d": [1, 2, 3, 4]}]'


def test_a_reply_cut_inside_think_is_a_parse_failure_not_an_empty_answer():
    with pytest.raises(ReplyError) as err:
        split_reply("<think>first the cup, then", finish_reason="length")
    assert err.value.reason == "think_unclosed" and "budget" in str(err.value)


def test_a_reply_cut_inside_answer_is_a_parse_failure():
    with pytest.raises(ReplyError) as err:
        split_reply("<think>x</think><answer>[{\"bbox_2d\": [1,", finish_reason="length")
    assert err.value.reason == "answer_unclosed"


def test_nothing_after_think_is_an_empty_answer():
    with pytest.raises(ReplyError) as err:
        split_reply("<think>hmm</think>   ")
    assert err.value.reason == "empty_answer"
