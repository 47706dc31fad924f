"""One llama.cpp instance of the embedded policy: a model and its context, continuing rollouts
from the ids it sampled, free or under a grammar."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from rvt_bench.adapters.policy import gguf_grammar
from rvt_bench.adapters.policy.base import Generation, PolicyCost, fit_budget, split_at_stop
from rvt_bench.adapters.policy.llama_model import LlamaContext, LlamaModel, common_prefix
from rvt_bench.core.types import AdapterError


class LlamaInstance:
    """A GGUF model in llama.cpp with one KV cache; `generate` is greedy decoding.

    n_threads / n_threads_batch: CPU threads for single-token steps / prompt evaluation.
    prefix_cache: True = a prompt reuses the KV cache of its longest prefix that the last call
    evaluated or generated (the shared system prompt, a rollout's turn so far); False = every
    prompt is evaluated whole (for timing what the cache saves; batched re-evaluation rounds
    otherwise than the incremental path, so the greedy text can differ)."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int | None, n_threads_batch: int | None,
                 prefix_cache: bool = True):
        threads = n_threads or max((os.cpu_count() or 2) // 2, 1)  # llama-cpp-python's defaults
        self.model = LlamaModel(path)
        self.ctx = LlamaContext(self.model, n_ctx, threads, n_threads_batch or n_threads or (os.cpu_count() or 1))
        # Work done, for the log line at close: prompt tokens evaluated, prompt tokens whose KV
        # cache was reused from the previous call (the shared system prompt, the turn so far), tokens generated.
        self.counts = {"calls": 0, "prompt_evaluated": 0, "prompt_reused": 0, "generated": 0}
        # The last call's prompt (bytes) and its tokens, the tokens it generated and their text
        # (bytes): a rollout's next prompt is that prompt + the generated text + the harness's insertion.
        self.last: tuple[bytes, list[int], list[int], bytes] = (b"", [], [], b"")
        # set by the scheduler (gguf_pool) on Ctrl-C: stop generating at the next token
        self.cancel = threading.Event()
        self.prefix_cache = bool(prefix_cache)

    def close(self) -> None:
        """Free llama.cpp's context and model now. An interrupted run's traceback may keep this
        object alive until the interpreter's own teardown, whose order llama.cpp did not survive
        with two instances (exit 139 after Ctrl-C)."""
        self.ctx.close()
        self.model.close()

    def tokenize(self, prompt: str) -> list[int]:
        """The prompt's tokens as `generate` evaluates them: the last call's prompt tokens and the
        tokens it generated, as far as the prompt continues their text, then the rest of the prompt
        tokenised (`_tokenize`). So a rollout continues from the ids the model sampled: re-tokenising
        grammar-decoded text often splits it otherwise, which would both re-evaluate the turn so
        far and show the model ids it never produced."""
        data = prompt.encode("utf-8")
        last_prompt, last_tokens, generated, text = self.last
        if not last_tokens or not data.startswith(last_prompt):
            return self._tokenize(data, bos=True)
        keep, end = len(generated), len(last_prompt) + len(text)  # usually all the generated text is kept
        if not data.startswith(text, len(last_prompt)):
            # only part of it (text after the stop string was dropped): the longest token prefix it keeps
            keep, end = 0, len(last_prompt)
            for i in range(1, len(generated)):
                piece = self.model.detokenize(generated[:i])
                if not data.startswith(piece, len(last_prompt)):
                    break
                keep, end = i, len(last_prompt) + len(piece)
        return last_tokens + generated[:keep] + (self._tokenize(data[end:], bos=False) if end < len(data) else [])

    def _tokenize(self, data: bytes, bos: bool) -> list[int]:
        # bos=True defers to the GGUF's add_bos_token; special=True parses the template's
        # control tokens (<|im_start|>, <start_of_turn>) as tokens.
        return self.model.tokenize(data, add_bos=bos, special=True)

    def prefix_bytes(self, prompt: str) -> int:
        """How many leading bytes `prompt` shares with the last call's prompt + generated text
        (a request's affinity to this instance's KV cache)."""
        last_prompt, _, _, text = self.last
        return len(os.path.commonprefix([last_prompt + text, prompt.encode("utf-8")]))

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Generation:
        ctx, model = self.ctx, self.model
        tokens = self.tokenize(prompt)
        if not tokens:
            raise AdapterError("the prompt is empty: there is nothing to continue")
        budget = fit_budget(len(tokens), max_new_tokens, ctx.n_ctx)
        start = time.perf_counter()
        if not self.prefix_cache:
            ctx.truncate(0)
        # the last prompt token is evaluated again even when cached (for fresh logits)
        reused = common_prefix(ctx.ids[:ctx.n_tokens], tokens[:-1])
        self.counts["calls"] += 1
        self.counts["prompt_reused"] += reused
        self.counts["prompt_evaluated"] += len(tokens) - reused
        out: list[int] = []
        pieces: list[bytes] = []
        text, matched, reason = "", None, "length"
        steps = gguf_grammar.constrained(ctx, tokens, grammar) if grammar else ctx.greedy(tokens)
        first: float | None = None  # when the prompt was evaluated and the first token chosen
        for token in steps:
            if first is None:
                first = time.perf_counter()
            if self.cancel.is_set():
                break
            if model.is_eog(token):
                reason = "eos"
                break
            out.append(token)
            pieces.append(model.piece(token))
            text = _text(out, pieces, model.bos)
            head, matched = split_at_stop(text, stop)
            if matched is not None:
                text, reason = head, "stop"
                break
            if len(out) >= budget:
                break
        steps.close()
        end = time.perf_counter()
        self.counts["generated"] += len(out)
        self.last = (prompt.encode("utf-8"), tokens, out, model.detokenize(out) if out else b"")
        first = end if first is None else first
        cost = PolicyCost(len(tokens), reused, first - start, end - first)
        return Generation(text=text, stop_reason=reason, matched_stop=matched, n_tokens=len(out), cost=cost)


def _text(tokens: list[int], pieces: list[bytes], bos: int) -> str:
    """LlamaModel.detokenize(tokens) from the tokens' pieces, decoded with bytes that are not UTF-8
    dropped (an incomplete character at the end appears once its next token completes it)."""
    data = b"".join(pieces)
    if tokens[0] == bos and data[:1] == b" ":
        data = data[1:]
    return data.decode("utf-8", errors="ignore")
