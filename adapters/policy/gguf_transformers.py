"""The embedded policy's second runtime: the GGUF dequantised into a transformers model
(`AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`, float32), greedy `generate`, with
the KV cache of the longest prefix it already evaluated reused (a DynamicCache, copied per call)."""
from __future__ import annotations

import copy
import inspect
import time
from pathlib import Path
from typing import Any

from rvt_bench.adapters.policy.base import Generation, PolicyCost, fit_budget, split_at_stop


class TransformersRuntime:
    """Greedy decoding with `stop_strings=`; under a grammar through xgrammar
    (rvt_bench.adapters.policy.constrain). Tokenises as llama.cpp does: no tokenizer-added
    specials, BOS iff the GGUF's metadata (`meta`) says so.

    prefix_cache: keep the KV cache of the last call's prompt and generated tokens, and start the
    next call from a copy of it cropped to the prefix the two share (the shared system prompt, a
    rollout's turn so far), so only the new tokens are prefilled; False = every prompt prefilled whole."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int | None, seed: int, meta: dict[str, str],
                 prefix_cache: bool = True):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if n_threads:
            torch.set_num_threads(int(n_threads))
        torch.manual_seed(seed)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        self.model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        self.model.eval()
        self.n_ctx = n_ctx
        self.add_bos = meta.get("tokenizer.ggml.add_bos_token", "false") == "true"
        self.bos_id = int(meta["tokenizer.ggml.bos_token_id"]) if "tokenizer.ggml.bos_token_id" in meta else None
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        self.eos_ids.discard(None)
        self.prefix_cache = bool(prefix_cache)
        # the ids whose keys and values `_cache` holds (the last call's prompt and generated tokens
        # but the last, which was never fed back)
        self._cache_ids: list[int] = []
        self._cache: Any = None
        # the keyword of the KV cache in this transformers version (5.x renamed past_key_values to cache)
        self._cache_key = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Generation:
        torch = self.torch
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        budget = fit_budget(len(ids), max_new_tokens, self.n_ctx)
        start = time.perf_counter()
        first = _FirstStep()  # when the prompt's forward pass gave the first logits
        kwargs: dict[str, Any] = {"stop_strings": stop, "tokenizer": self.tokenizer} if stop else {}
        processors: list[Any] = [first]
        if grammar:
            from rvt_bench.adapters.policy.constrain import grammar_processor

            processors.append(grammar_processor(self.tokenizer, grammar, self.model.config.vocab_size))
        cache, reused = self._prefix(ids)
        if cache is not None:
            kwargs[self._cache_key] = cache
        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=budget, do_sample=False, pad_token_id=next(iter(self.eos_ids), 0),
                logits_processor=processors, return_dict_in_generate=True, **kwargs,
            )
        seq = out.sequences[0, len(ids):].tolist()
        end = time.perf_counter()
        held = getattr(out, self._cache_key, None)
        if self.prefix_cache and held is not None:
            self._cache = held
            self._cache_ids = (ids + seq)[:held.get_seq_length()]
        at = first.at or end
        cost = PolicyCost(len(ids), reused, at - start, end - at)
        ended = bool(seq) and seq[-1] in self.eos_ids
        body = seq[:-1] if ended else seq
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        head, matched = split_at_stop(text, stop)
        if matched is not None:
            return Generation(head, "stop", matched, len(seq), cost=cost)
        return Generation(text, "eos" if ended else "length", None, len(seq), cost=cost)

    def _prefix(self, ids: list[int]) -> tuple[Any, int]:
        """(a copy of the cache cropped to the longest prefix of ids[:-1] it holds, that length), or
        (None, 0) with nothing to reuse. The last prompt token is always evaluated (for its logits)."""
        if not self.prefix_cache or self._cache is None:
            return None, 0
        n = 0
        for a, b in zip(self._cache_ids, ids[:-1]):
            if a != b:
                break
            n += 1
        if n == 0:
            return None, 0
        cache = copy.deepcopy(self._cache)
        drop = cache.get_seq_length() - n
        if drop > 0:
            cache.crop(-drop)  # a negative count removes that many tokens (transformers 4.x and 5.x)
        return cache, n

    def close(self) -> None:
        """Nothing to free early: torch releases the model with this object."""


class _FirstStep:
    """A logits processor that changes nothing and notes when it is first called: the end of the
    prompt's forward pass (prefill) within `generate`."""

    at: float | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.at is None:
            self.at = time.perf_counter()
        return scores
