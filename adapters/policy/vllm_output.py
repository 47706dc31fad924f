"""One vLLM completion (engine CompletionOutput or server choice with `return_token_ids`) as a
Generation, with the ids and log-probabilities vLLM sampled.

vLLM's conventions (vllm/v1/engine/detokenizer.py, entrypoints/openai/completion/protocol.py):
the text stops before a matched stop string, but `token_ids` keep every sampled token, including
those that spelled the stop string; `stop_reason` is the matched stop string, a stop token id, or
None (end-of-sequence, or not stopped); an end-of-sequence token is the last of `token_ids`.
Generation keeps the stop string's tokens and drops the end-of-turn token (rvt_bench.adapters.policy.base).
"""
from __future__ import annotations

import math
from typing import Sequence

from rvt_bench.adapters.policy.base import Generation, split_at_stop
from rvt_bench.core.types import AdapterError


def from_vllm(text: str, finish_reason: str | None, stop_reason: int | str | None, token_ids: Sequence[int] | None,
              logprobs: Sequence[float | None] | None, stop: list[str], eos_ids: set[int], where: str) -> Generation:
    """The Generation of one vLLM completion.

    finish_reason: "stop" | "length" (anything else, e.g. "abort", raises AdapterError).
    token_ids, logprobs: (N,) sampled ids and their log-probabilities (None where vLLM gave NaN),
    or None when not requested. eos_ids: end-of-turn ids to drop from the end. where: names the
    engine or server in errors. Raises AdapterError on a length mismatch or unknown finish_reason.
    """
    ids = list(token_ids) if token_ids is not None else None
    lps = list(logprobs) if logprobs is not None else None
    if ids is not None and not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
        raise AdapterError(f"{where}: completion token_ids are not all non-negative integers: {ids[:8]}")
    if lps is not None:
        try:
            # A non-finite logprob (NaN, -inf) cannot be corrected against: None, as TRL reads NaN.
            lps = [None if lp is None or not math.isfinite(float(lp)) else float(lp) for lp in lps]
        except (TypeError, ValueError) as exc:
            raise AdapterError(f"{where}: completion logprobs are not numbers: {lps[:8]}") from exc
    if ids is not None and lps is not None and len(ids) != len(lps):
        raise AdapterError(f"{where}: completion has {len(ids)} token ids but {len(lps)} logprobs")
    head, matched = split_at_stop(text, stop)  # a server that echoes the stop string
    if matched is None and isinstance(stop_reason, str) and stop_reason in stop:
        head, matched = text, stop_reason
    if matched is not None:
        return _gen(head, "stop", matched, ids, lps)
    if finish_reason == "length":
        return _gen(text, "length", None, ids, lps)
    if finish_reason != "stop":
        raise AdapterError(f"{where}: completion ended with finish_reason {finish_reason!r}; expected 'stop' or 'length'")
    # Stopped without a stop string: end-of-sequence or a stop token id; drop that token.
    ends = set(eos_ids) | ({stop_reason} if isinstance(stop_reason, int) else set())
    end = None
    if ids and ids[-1] in ends:
        end = (ids[-1], lps[-1] if lps is not None else None)
        ids = ids[:-1]
        lps = lps[:-1] if lps is not None else None
    return _gen(text, "eos", None, ids, lps, end)


def _gen(text: str, reason: str, matched: str | None, ids: list[int] | None, lps: list | None,
         end: tuple[int, float | None] | None = None) -> Generation:
    return Generation(text, reason, matched, len(ids) if ids is not None else 0,  # type: ignore[arg-type]
                      tuple(ids) if ids is not None else None, tuple(lps) if lps is not None else None, end)
