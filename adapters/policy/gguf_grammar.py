"""Greedy decoding under a GBNF grammar on a llama.cpp context, with prompt-lookup drafts
verified in batches (the embedded policy's `decoding: grammar`)."""
from __future__ import annotations

import ctypes
from typing import Iterator

import numpy as np

from rvt_bench.adapters.policy import llama_lib
from rvt_bench.adapters.policy.llama_model import LlamaContext
from rvt_bench.core.types import AdapterError

TOP_K = 32  # candidates tried against the grammar before it masks the whole vocabulary
DRAFT_NGRAM = 3  # prompt-lookup drafting: tokens that must match earlier text before its continuation is proposed
DRAFT_TOKENS = 4  # tokens proposed at most per draft (batches of 5 were cheapest on 2 busy cores)

_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


def constrained(ctx: LlamaContext, tokens: list[int], grammar: str) -> Iterator[int]:
    """Greedy decoding of the continuation of `tokens` under the GBNF `grammar`, token by token:
    the highest-logit token the grammar accepts (llama.cpp's grammar sampler). The prompt is
    evaluated with KV-cache prefix reuse (`LlamaContext.prefill`) on the first step.

    The grammar is applied to the best TOP_K candidates first and to the whole vocabulary only
    when none of them is allowed: the same token as masking everything (greedy picks the best
    allowed), without a full-vocabulary grammar pass at every step.

    Prompt-lookup drafting (speculative decoding without a draft model): where the last
    DRAFT_NGRAM tokens occurred earlier in the context, the tokens that followed them there are
    evaluated together with the next token in one batch, and each is kept only while it is the
    token greedy decoding under the grammar chooses from that batch's logits; the rest leave the KV
    cache. The output is greedy decoding's (up to the float rounding of batched evaluation), but a
    135M policy copies much of the prompt (the worked example's plan and code, the query) and
    evaluating copied runs in batches is several times cheaper than token by token.
    Raises AdapterError when llama.cpp cannot parse the grammar."""
    lib = ctx.lib
    smpl = lib.llama_sampler_init_grammar(ctx.model.vocab, grammar.encode("utf-8"), b"root")
    if not smpl:
        raise AdapterError("llama.cpp could not parse the decoding grammar (policy.decoding=grammar)")
    n_vocab = ctx.model.n_vocab
    data = (llama_lib.TokenData * n_vocab)()
    view = np.frombuffer(data, dtype=_TOKEN_DATA)

    def allowed(ids: np.ndarray, logits: np.ndarray) -> int | None:
        n = len(ids)
        view["id"][:n], view["logit"][:n], view["p"][:n] = ids, logits, 0.0
        arr = llama_lib.TokenDataArray(data=data, size=n, selected=-1, sorted=False)
        lib.llama_sampler_apply(smpl, ctypes.byref(arr))
        kept = view["logit"][:n]
        ok = np.isfinite(kept)
        if not ok.any():
            return None
        return int(view["id"][:n][ok][np.argmax(kept[ok])])

    def choose(i: int) -> int:
        """The greedy allowed token after the i-th token of the last batch; accepted by the grammar."""
        logits = ctx.logits(i)
        top = np.argpartition(-logits, TOP_K)[:TOP_K].astype(np.intc)
        token = allowed(top, logits[top])
        if token is None:
            token = allowed(np.arange(n_vocab, dtype=np.intc), logits)
        if token is None:
            raise AdapterError("the decoding grammar allows no token here (policy.decoding=grammar)")
        lib.llama_sampler_accept(smpl, token)
        return token

    try:
        ctx.prefill(tokens)
        token = choose(-1)
        while True:
            yield token
            room = ctx.n_ctx - ctx.n_tokens - 1
            draft = lookup(ctx.ids[:ctx.n_tokens], token, min(DRAFT_TOKENS, room, ctx.n_batch - 1))
            base = ctx.decode([token, *draft], logits_all=True)
            for i, proposed in enumerate(draft):
                token = choose(i)
                if token != proposed:
                    # the draft's tokens after i are not the continuation: drop them from the KV cache
                    ctx.truncate(base + i + 1)
                    break
                yield token
            else:
                token = choose(len(draft))
    finally:
        lib.llama_sampler_free(smpl)


def lookup(context: np.ndarray, token: int, limit: int) -> list[int]:
    """Prompt-lookup draft: the up to `limit` tokens that followed the latest earlier occurrence of
    the last DRAFT_NGRAM tokens of context + [token], or [] when they occur nowhere before."""
    if limit < 1 or len(context) < DRAFT_NGRAM:
        return []
    ids = np.append(np.asarray(context, dtype=np.intc), np.intc(token))
    tail = ids[-DRAFT_NGRAM:]
    windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], DRAFT_NGRAM)
    hits = np.nonzero((windows == tail).all(axis=1))[0]
    if not len(hits):
        return []
    start = int(hits[-1]) + DRAFT_NGRAM
    return [int(t) for t in ids[start:start + limit]]
