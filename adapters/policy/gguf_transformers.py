"""The embedded policy's second runtime: the GGUF dequantised into a transformers model
(`AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`, float32), greedy `generate`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.adapters.policy.base import Generation, fit_budget, split_at_stop


class TransformersRuntime:
    """Greedy decoding with `stop_strings=`; under a grammar through xgrammar
    (rvt_bench.adapters.policy.constrain). Tokenises as llama.cpp does: no tokenizer-added
    specials, BOS iff the GGUF's metadata (`meta`) says so."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int | None, seed: int, meta: dict[str, str]):
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

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Generation:
        torch = self.torch
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        budget = fit_budget(len(ids), max_new_tokens, self.n_ctx)
        kwargs: dict[str, Any] = {"stop_strings": stop, "tokenizer": self.tokenizer} if stop else {}
        if grammar:
            from rvt_bench.adapters.policy.constrain import grammar_processor

            kwargs["logits_processor"] = [grammar_processor(self.tokenizer, grammar, self.model.config.vocab_size)]
        with torch.no_grad():
            seq = self.model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=budget, do_sample=False, pad_token_id=next(iter(self.eos_ids), 0), **kwargs,
            )[0, len(ids):].tolist()
        ended = bool(seq) and seq[-1] in self.eos_ids
        body = seq[:-1] if ended else seq
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        head, matched = split_at_stop(text, stop)
        if matched is not None:
            return Generation(head, "stop", matched, len(seq))
        return Generation(text, "eos" if ended else "length", None, len(seq))

    def close(self) -> None:
        """Nothing to free early: torch releases the model with this object."""
