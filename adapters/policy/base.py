"""The interface of a DT-R1 policy backend: an LLM that continues a rollout until a stop string.

Backends (embedded GGUF, transformers, OpenAI-compatible servers) differ only in how they load
and decode; the rollout loop (rvt_bench.adapters.dtr1.rollout) sees nothing but this interface.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

StopReason = Literal["stop", "length", "eos"]


@dataclass(frozen=True)
class Generation:
    """One continuation.

    text:        the generated text, up to but excluding the matched stop string (OpenAI semantics).
    stop_reason: "stop" (a stop string was generated), "length" (max_new_tokens reached or the
                 context window is full), "eos" (the model ended its turn).
    matched_stop: the stop string that ended generation when stop_reason == "stop", else None.
    n_tokens:    number of tokens generated (including those of the matched stop string).
    token_ids:   the generated token ids (the stop string's tokens included, end-of-turn excluded)
                 when the backend knows them (hf), else None; training uses them so the loss sees
                 the tokens that were sampled rather than a re-tokenisation of the text.
    logprobs:    per token of `token_ids`, the log-probability the sampler gave it (natural log,
                 after temperature; None where the backend could not score it), when the backend
                 reports them (vLLM engine and server); else None. GRPO's importance-sampling
                 correction compares them with the trained model's.
    end_token:   (id, logprob or None) of the end-of-turn token the backend sampled and dropped from
                 `token_ids` (stop_reason "eos"), when it reports it (vLLM); training ends the
                 episode with that token and its logprob.
    cost:        what the call cost, as far as the backend measured it (a PolicyCost), else None.
    """

    text: str
    stop_reason: StopReason
    matched_stop: str | None
    n_tokens: int
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float | None, ...] | None = None
    end_token: tuple[int, float | None] | None = None
    cost: "PolicyCost | None" = None


@dataclass(frozen=True)
class PolicyCost:
    """What one continuation cost the backend (the DT-R1 paper's per-query cost, split).

    prompt_tokens: tokens of the prompt. cached_tokens: of those, the tokens whose KV cache was
    reused from an earlier call (the shared system prompt, the rollout's earlier rounds), so
    prompt_tokens - cached_tokens were prefilled. prefill_s: seconds evaluating the prompt, up to
    the first generated token's logits. decode_s: seconds generating the rest (the tokens after
    the first, stop-string checks included). A field the backend does not know is None (a server
    reports tokens, not seconds); seconds are the request's own, measured where it ran (requests
    decoded side by side overlap)."""

    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    prefill_s: float | None = None
    decode_s: float | None = None

    def record(self) -> dict:
        """The known fields as a JSON-ready dict ({"prompt_tokens", "cached_tokens", "prefilled",
        "prefill_s", "decode_s"}; "prefilled" when both token counts are known), seconds rounded to
        0.1 ms."""
        out: dict = {}
        if self.prompt_tokens is not None:
            out["prompt_tokens"] = int(self.prompt_tokens)
        if self.cached_tokens is not None:
            out["cached_tokens"] = int(self.cached_tokens)
            if self.prompt_tokens is not None:
                out["prefilled"] = int(self.prompt_tokens) - int(self.cached_tokens)
        for key in ("prefill_s", "decode_s"):
            value = getattr(self, key)
            if value is not None:
                out[key] = round(float(value), 4)
        return out


@dataclass(frozen=True)
class Request:
    """One continuation to compute: `generate(prompt, stop, max_new_tokens)`'s arguments.

    prompt_ids: the same prompt as token ids, set by the rollout loop for policies with
    `token_prompts` (rvt_bench.adapters.dtr1.tokens.turn_ids): the pieces the policy generated keep the ids it
    sampled, so the model continues from exactly the ids that training scores.
    grammar: a GBNF grammar the continuation must follow (policy.decoding="grammar"; built per
    segment by rvt_bench.adapters.dtr1.grammar), None = free decoding.
    """

    prompt: str
    stop: list[str]
    max_new_tokens: int
    prompt_ids: tuple[int, ...] | None = None
    grammar: str | None = None


class Policy(ABC):
    """An LLM that continues a prompt. Models load lazily on the first `generate`.

    prefill: text the chat template itself writes at the start of the assistant turn (the
    DeepSeek-R1-Distill templates end the generation prompt with "<think>\n"). The rollout starts
    its trace with it, so the trace holds the whole turn, and `render` must not write it twice.
    """

    name: str
    prefill: str = ""
    # "free" | "grammar": under "grammar" the rollout sends each request with the protocol grammar
    # of its segment (Request.grammar) and the backend constrains decoding to it.
    decoding: str = "free"
    # True: generate_batch continues Request.prompt_ids when set (and `encode` works).
    token_prompts: bool = False
    # True: render may be called from several threads at once (a server renders, or a Jinja
    # template does), so the rollouts of a batch take their harness steps side by side.
    thread_safe: bool = False

    @abstractmethod
    def generate(self, prompt: str, stop: list[str], max_new_tokens: int) -> Generation:
        """Greedy continuation of `prompt` (already chat-rendered, see `render`) until one of the
        `stop` strings appears (the earliest in the text wins), the model emits end-of-turn, or
        `max_new_tokens` tokens were generated."""

    def generate_batch(self, requests: list[Request]) -> list[Generation]:
        """`generate` for each request, results in request order. Backends that can decode several
        prompts at once override this; the result for a request must not depend on the others
        (greedy batch of 8 == 8 batches of 1). The default decodes one request at a time; a
        request's grammar goes to `generate(..., grammar=)`, which backends with grammar support accept."""
        return [self.generate(r.prompt, list(r.stop), r.max_new_tokens, **({"grammar": r.grammar} if r.grammar else {}))
                for r in requests]

    @abstractmethod
    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        """The prompt for `generate`: `messages` ([{"role": "system"|"user"|"assistant",
        "content": str}, ...]) through the model's chat template with the generation prompt, then
        the assistant's partial turn `assistant_prefix` appended verbatim."""

    @abstractmethod
    def fingerprint(self) -> dict:
        """Semantic configuration (model id, weights digest, runtime, decoding), JSON-serialisable."""

    def preflight(self) -> None:
        """Load what generation needs (tokenizer, template, weights or engine) and reach the server,
        once, before the first sample; raises AdapterError naming the setting to fix. The default
        renders a probe prompt, which loads the tokenizer or template."""
        self.render([{"role": "user", "content": "x"}], self.prefill)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with no special tokens added (the rendered prompt writes its own
        BOS). Raises AdapterError where the backend has no tokenizer."""
        from rvt_bench.core.types import AdapterError

        raise AdapterError(f"policy {self.name} cannot tokenize text")

    def close(self) -> None:
        """Release the model; the default has nothing to release."""


class BatchPolicy(Policy):
    """A backend whose primitive is a batch (hf, vLLM, OpenAI-compatible servers): `generate` is a
    batch of one, and every request's budget is checked before `decode_batch` sees it."""

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Generation:
        return self.generate_batch([Request(prompt, list(stop), int(max_new_tokens), grammar=grammar)])[0]

    def generate_batch(self, requests: list[Request]) -> list[Generation]:
        for r in requests:
            if r.max_new_tokens < 1:
                from rvt_bench.core.types import AdapterError

                raise AdapterError(f"max_new_tokens must be >= 1, got {r.max_new_tokens}")
        return self.decode_batch(requests)

    @abstractmethod
    def decode_batch(self, requests: list[Request]) -> list[Generation]:
        """generate_batch's work, on requests already checked."""


def fit_budget(n_prompt: int, max_new_tokens: int, n_ctx: int) -> int:
    """The tokens a continuation may generate: max_new_tokens, at most what the context window
    `n_ctx` has left after the prompt. Raises AdapterError when the prompt alone does not fit."""
    from rvt_bench.core.types import AdapterError

    room = n_ctx - n_prompt
    if room < 1:
        raise AdapterError(f"prompt of {n_prompt} tokens does not fit the context window n_ctx={n_ctx}")
    return min(max_new_tokens, room)


def split_at_stop(text: str, stop: list[str]) -> tuple[str, str | None]:
    """(text before the earliest stop string, that stop string) or (text, None) when none occurs.
    Ties at the same position go to the longer stop string."""
    best: tuple[int, int, str] | None = None
    for s in stop:
        i = text.find(s)
        if s and i >= 0 and (best is None or (i, -len(s)) < (best[0], best[1])):
            best = (i, -len(s), s)
    if best is None:
        return text, None
    return text[: best[0]], best[2]


def check_decoding(decoding: str, name: str, supported: tuple[str, ...] = ("free", "grammar")) -> str:
    """`decoding` when this backend supports it, else AdapterError naming the setting."""
    if decoding not in supported:
        from rvt_bench.core.types import AdapterError

        raise AdapterError(f"policy {name}: policy.decoding={decoding!r} is not one of {list(supported)}")
    return decoding


def decoding_fingerprint(temperature: float, top_p: float, seed: int) -> str | dict:
    """How a policy decodes, for fingerprints: "greedy" at temperature 0 (top_p and seed are then
    irrelevant), else the sampling settings."""
    return "greedy" if temperature == 0 else {"temperature": temperature, "top_p": top_p, "seed": seed}
