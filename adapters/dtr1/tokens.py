"""A rollout's assistant turn as token ids: what GRPO trains on, and what token-prompt policies
(vLLM engine and server) continue from, so the two are the same ids.

The prompt is the rendered chat with the template's pre-fill; the completion is the turn's pieces
(rvt_bench.adapters.dtr1.rollout.Rollout.segments) after the pre-fill: a policy piece keeps the ids the
policy sampled when it reports them, every other piece (an inserted <dt_rep> / <results> block, or
a policy piece without ids) is tokenised on its own, so the boundary between policy and harness
tokens is exact.

A policy piece's ids are every token the policy sampled, so when the token that completed a stop
string also carried text after it (">\n" after "</dt_plan"), the ids hold that text while the
trace (what answer parsing and rewards read) is cut at the stop string. Sampler and learner still
see one sequence; only the reward's text differs by those characters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class TurnIds:
    """prompt_ids: (P,) ids of the rendered prompt. completion_ids: (C,) ids of the turn after the
    pre-fill. env_mask: (C,) 1 on policy tokens, 0 on harness insertions. logprobs: (C,) the
    sampler's log-probability of each policy token where the policy reported it, None where it did
    not, 0.0 on harness tokens (masked out of the loss, as TRL does for tool output)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None]

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def turn_ids(encode: Callable[[str], list[int]], prompt_text: str, segments: list[dict]) -> TurnIds:
    """The TurnIds of a rollout. encode: text -> ids without special tokens added; prompt_text:
    policy.render(messages, policy.prefill); segments: Rollout.segments (dicts with "kind", "text",
    "token_ids", optional "logprobs"). Raises ValueError when a piece's logprobs and token_ids
    differ in length."""
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float | None] = []
    for seg in segments:
        if seg["kind"] == "prefill":  # already at the end of prompt_text
            continue
        sampled = seg["kind"] == "policy" and seg.get("token_ids") is not None
        piece = list(seg["token_ids"]) if sampled else (encode(seg["text"]) if seg["text"] else [])
        completion += piece
        mask += [0 if seg["kind"] == "env" else 1] * len(piece)
        if seg["kind"] == "env":
            logprobs += [0.0] * len(piece)
        elif sampled and seg.get("logprobs") is not None:
            if len(seg["logprobs"]) != len(piece):
                raise ValueError(f"a policy piece has {len(piece)} token ids but {len(seg['logprobs'])} logprobs")
            logprobs += list(seg["logprobs"])
        else:
            logprobs += [None] * len(piece)
    return TurnIds(encode(prompt_text), completion, mask, logprobs)
