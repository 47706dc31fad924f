"""Grammar-constrained decoding for transformers models, through xgrammar (the library vLLM uses).

A GBNF grammar (rvt_bench.adapters.dtr1.grammar builds them) is compiled once per (tokenizer, grammar text)
and applied as a token mask before each choice: the token chosen is the best one the grammar
allows (greedy) or is sampled among the allowed ones. Used by rvt_bench.adapters.policy.hf (its own decoding
loop: `Constraint`) and by the GGUF policy's transformers runtime (`grammar_processor`, a
transformers LogitsProcessor for `generate`).
"""
from __future__ import annotations

from typing import Any

from rvt_bench.core.types import AdapterError


_COMPILERS: dict[tuple[int, int], tuple[Any, Any]] = {}


def _compiler(tokenizer: Any, vocab_size: int) -> Any:
    """One xgrammar GrammarCompiler per (tokenizer, vocab size); it caches compiled grammars itself."""
    key = (id(tokenizer), vocab_size)
    if key not in _COMPILERS:
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        # The tokenizer is kept with its compiler so that its id is not reused while cached.
        _COMPILERS[key] = (tokenizer, xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True))
    return _COMPILERS[key][1]


def compile_grammar(tokenizer: Any, grammar: str, vocab_size: int) -> Any:
    """xgrammar CompiledGrammar of a GBNF `grammar` for `tokenizer` (vocab_size = the model's
    logits width). Raises AdapterError when xgrammar cannot parse the grammar."""
    try:
        return _compiler(tokenizer, int(vocab_size)).compile_grammar(grammar)
    except (RuntimeError, ValueError) as exc:
        raise AdapterError(f"xgrammar could not compile the decoding grammar (policy.decoding=grammar): {str(exc)[:200]}") from exc


class Constraint:
    """One grammar matcher per batch row (None = unconstrained row).

    mask(logits): (B, V) float logits -> the same tensor with disallowed tokens at -inf (in place).
    accept(i, token): advance row i's matcher with the chosen token.
    """

    def __init__(self, tokenizer: Any, grammars: list[str | None], vocab_size: int):
        import xgrammar as xgr

        self.xgr = xgr
        self.matchers = [None if g is None else xgr.GrammarMatcher(compile_grammar(tokenizer, g, vocab_size)) for g in grammars]
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), vocab_size)

    def mask(self, logits: Any) -> Any:
        rows = [i for i, m in enumerate(self.matchers) if m is not None and not m.is_terminated()]
        if not rows:
            return logits
        self.bitmask.fill_(-1)  # all allowed
        for i in rows:
            self.matchers[i].fill_next_token_bitmask(self.bitmask, i)
        device = logits.device
        cpu = logits.to("cpu") if device.type not in ("cpu", "cuda") else logits
        self.xgr.apply_token_bitmask_inplace(cpu, self.bitmask.to(cpu.device)[: cpu.shape[0]])
        return cpu.to(device)

    def accept(self, i: int, token: int) -> None:
        m = self.matchers[i]
        if m is not None and not m.is_terminated():
            m.accept_token(int(token))


def grammar_processor(tokenizer: Any, grammar: str, vocab_size: int) -> Any:
    """A transformers LogitsProcessor (xgrammar.contrib.hf) constraining one `generate` call to `grammar`."""
    import xgrammar.contrib.hf as xgr_hf

    return xgr_hf.LogitsProcessor(compile_grammar(tokenizer, grammar, vocab_size))
