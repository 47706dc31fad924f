"""An in-process vLLM engine (`vllm.LLM`) as a DT-R1 policy: GRPO's colocate mode, where TRL owns
the engine and syncs the trained weights into it before each rollout call, and offline evaluation
of a checkpoint on a GPU without a server (`policy=vllm`).

Prompts go in as token ids (Request.prompt_ids, see rvt_bench.adapters.dtr1.tokens), one SamplingParams
per request with the request's stop strings and budget, `logprobs=0` so vLLM returns the sampled
token's log-probability. Outputs are read by rvt_bench.adapters.policy.vllm_output.from_vllm.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from rvt_bench.adapters.policy.base import BatchPolicy, Generation, PolicyCost, Request, decoding_fingerprint
from rvt_bench.adapters.policy.hf import render_with_tokenizer, template_prefill
from rvt_bench.adapters.policy.vllm_output import from_vllm
from rvt_bench.core.types import AdapterError

log = logging.getLogger(__name__)


class VLLMEnginePolicy(BatchPolicy):
    """vLLM's offline engine behind the Policy interface.

    llm:          a `vllm.LLM` to use (TRL's `trainer.vllm_generation.llm` in colocate mode); or
                  None to build one from `model` on first use.
    tokenizer:    a loaded tokenizer (renders prompts); None = the engine's (`llm.get_tokenizer()`).
    model:        hub id or directory for a new engine (ignored when `llm` is given).
    adapter:      None, or a PEFT LoRA directory (train_dtr1.py's output) served through
                  vLLM's LoRA support (`enable_lora`, LoRARequest).
    engine_kwargs: extra `vllm.LLM` keyword arguments (gpu_memory_utilization, max_model_len, ...).
    temperature, top_p, top_k, min_p, repetition_penalty: sampling (temperature 0 = greedy; top_k 0
                  and min_p 0 = off). seed: per-request seed, None = vLLM's own randomness (GRPO:
                  the K rollouts of a prompt must differ).
    batch_size:   samples the evaluation runner rolls out together (vLLM batches their requests).
    extra_sampling: more SamplingParams fields, applied last (GRPOConfig.generation_kwargs).
    Raises AdapterError when vllm is not installed, and for a prompt longer than the engine's
    max_model_len (that request only; run_rollouts isolates it).
    """

    token_prompts = True

    def __init__(self, llm: Any = None, tokenizer: Any = None, model: str | None = None, adapter: str | None = None,
                 engine_kwargs: dict | None = None, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, repetition_penalty: float = 1.0, seed: int | None = 0, batch_size: int = 32,
                 extra_sampling: dict | None = None):
        if llm is None and not model:
            raise AdapterError("vllm policy: set `model` (hub id or directory) or pass an engine")
        self._llm = llm
        self._tokenizer = tokenizer
        self.model_id = model
        self.adapter = adapter
        self.engine_kwargs = dict(engine_kwargs or {})
        self.temperature, self.top_p, self.top_k = float(temperature), float(top_p), int(top_k)
        self.min_p, self.repetition_penalty, self.seed = float(min_p), float(repetition_penalty), seed
        self.batch_size = int(batch_size)
        self.extra_sampling = dict(extra_sampling or {})
        self.name = f"vllm:{model or 'engine'}"
        self._prefill: str | None = None

    # --- Policy interface --------------------------------------------------------------------------

    @property
    def prefill(self) -> str:  # type: ignore[override]
        if self._prefill is None:
            self._prefill = template_prefill(self.tokenizer)
        return self._prefill

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = self._engine().get_tokenizer()
        return self._tokenizer

    def fingerprint(self) -> dict:
        from rvt_bench.adapters.policy.hf import _dir_digest

        return {
            "policy": "vllm",
            "model": self.model_id,
            "adapter": None if self.adapter is None else {"path": self.adapter, "sha256_16": _dir_digest(self.adapter)},
            "decoding": decoding_fingerprint(self.temperature, self.top_p, self.seed or 0),
            "sampling": {"top_k": self.top_k, "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                         **self.extra_sampling},
        }

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        return render_with_tokenizer(self.tokenizer, messages, assistant_prefix, self.prefill)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode_batch(self, requests: list[Request]) -> list[Generation]:
        llm = self._engine()
        prompts = [{"prompt_token_ids": list(r.prompt_ids) if r.prompt_ids is not None else self.encode(r.prompt)}
                   for r in requests]
        params = [self._sampling(r) for r in requests]
        kwargs: dict[str, Any] = {"sampling_params": params, "use_tqdm": False}
        if self.adapter:
            from vllm.lora.request import LoRARequest

            kwargs["lora_request"] = LoRARequest("dtr1", 1, self.adapter)
        try:
            outputs = llm.generate(prompts, **kwargs)
        except ValueError as exc:  # vLLM's input validation, e.g. a prompt longer than max_model_len
            raise AdapterError(f"{self.name}: {exc}") from exc
        eos = self._eos_ids()
        return [self._generation(out, r, eos) for out, r in zip(outputs, requests)]

    def close(self) -> None:
        self._llm = None

    # --- engine ------------------------------------------------------------------------------------

    def _engine(self) -> Any:
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError as exc:
                raise AdapterError("vllm policy: vllm is not installed (pip install vllm, on a GPU machine)") from exc
            kwargs = dict(self.engine_kwargs)
            # a rollout's rounds and all samples share the system prompt: each request prefills only
            # what no earlier one did (vLLM's automatic prefix caching; engine_kwargs may turn it off)
            kwargs.setdefault("enable_prefix_caching", True)
            if self.adapter:
                kwargs.setdefault("enable_lora", True)
            log.info("starting vLLM on %s (adapter %s)", self.model_id, self.adapter)
            self._llm = LLM(model=self.model_id, **kwargs)
        return self._llm

    def _sampling(self, r: Request) -> Any:
        from vllm import SamplingParams

        kw: dict[str, Any] = {"n": 1, "max_tokens": int(r.max_new_tokens), "stop": list(r.stop), "logprobs": 0,
                              "temperature": self.temperature, "top_p": self.top_p}
        # Only what differs from vLLM's defaults: the "off" value of top_k changed across versions.
        if self.top_k > 0:
            kw["top_k"] = self.top_k
        if self.min_p > 0:
            kw["min_p"] = self.min_p
        if self.repetition_penalty != 1.0:
            kw["repetition_penalty"] = self.repetition_penalty
        if self.seed is not None:
            kw["seed"] = int(self.seed)
        kw.update(self.extra_sampling)
        return SamplingParams(**kw)

    def _eos_ids(self) -> set[int]:
        ids = {getattr(self.tokenizer, "eos_token_id", None)}
        try:
            config_eos = self._engine().llm_engine.model_config.hf_config.eos_token_id  # e.g. Qwen's two ends
            ids |= set(config_eos if isinstance(config_eos, list) else [config_eos])
        except AttributeError:
            pass
        ids.discard(None)
        return ids  # type: ignore[return-value]

    def _generation(self, out: Any, r: Request, eos: set[int]) -> Generation:
        """RequestOutput -> Generation: its single CompletionOutput, logprobs of the sampled ids, and
        its cost in tokens (prompt_token_ids, num_cached_tokens: the prompt's tokens vLLM's prefix
        cache held; seconds are not measured per request here)."""
        comp = out.outputs[0]
        ids = list(comp.token_ids)
        lps = None
        if comp.logprobs is not None:
            # logprobs=0: each position maps the sampled id (and nothing else) to a Logprob.
            lps = [pos[tid].logprob if tid in pos else None for tid, pos in zip(ids, comp.logprobs)]
        gen = from_vllm(comp.text, comp.finish_reason, comp.stop_reason, ids, lps, list(r.stop), eos, self.name)
        prompt = getattr(out, "prompt_token_ids", None)
        cached = getattr(out, "num_cached_tokens", None)
        if prompt is None:
            return gen
        return replace(gen, cost=PolicyCost(len(prompt), int(cached) if isinstance(cached, int) else None))
