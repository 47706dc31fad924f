"""A transformers causal LM as a DT-R1 policy: a base or merged checkpoint, optionally with a PEFT
LoRA adapter directory (what train_dtr1.py saves).

Prompts are rendered with the tokenizer's own chat template (`apply_chat_template`). DeepSeek-R1-
Distill templates end the generation prompt with "<think>\\n": that text is the policy's `prefill`,
so the rollout trace starts with it (and the format reward sees a complete <think> pair) while the
prompt string the model reads is exactly the template's.

Decoding is a batched KV-cache loop written here rather than `model.generate`, because a rollout
batch mixes stages: every row has its own stop strings and token budget, and a row must stop at its
stop string even when a token runs past it (split_at_stop cuts the text). Rows are left-padded with
position ids counted from each row's first real token, so a row's greedy continuation does not
depend on what else is in the batch (tests/test_policy_hf.py checks batch 1 == batch 8).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rvt_bench.adapters.policy.base import BatchPolicy, Generation, Request, check_decoding, split_at_stop, decoding_fingerprint
from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, first_line

log = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16")
# The R1-distill chat templates (deepseek-ai/DeepSeek-R1-Distill-* tokenizer_config.json) end the
# generation prompt with this; other templates pre-fill nothing.
THINK_PREFILL = "<think>\n"


def template_prefill(tokenizer: Any) -> str:
    """The text the tokenizer's chat template writes after the assistant header with
    add_generation_prompt=True: THINK_PREFILL for R1-distill templates, else ""."""
    probe = [{"role": "user", "content": "x"}]
    rendered = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    return THINK_PREFILL if rendered.endswith(THINK_PREFILL) else ""


def render_with_tokenizer(tokenizer: Any, messages: list[dict], assistant_prefix: str, prefill: str) -> str:
    """`messages` through the tokenizer's chat template (generation prompt on), then the partial
    assistant turn. The rollout's turn starts with `prefill` (the template's own pre-filled text),
    which is dropped from the rendered template so it is written once.

    Raises AdapterError when the tokenizer has no chat template or the template fails, and when
    the turn does not start with the prefill (a trace from another policy).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise AdapterError(f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat_template; set policy.chat_template")
    try:
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # jinja2 raises its own TemplateError family, and ValueError for bad roles
        raise AdapterError(f"chat template of {getattr(tokenizer, 'name_or_path', '?')!r} failed to render: {exc}") from exc
    if prefill:
        if not assistant_prefix.startswith(prefill):
            raise AdapterError(f"the assistant turn must start with the template's prefill {prefill!r}, got {assistant_prefix[:40]!r}")
        rendered = rendered[: len(rendered) - len(prefill)] if rendered.endswith(prefill) else rendered
    return rendered + assistant_prefix


class HFPolicy(BatchPolicy):
    """A transformers causal LM behind the Policy interface.

    model:          checkpoint directory or hub id (a base model, or a merged GRPO checkpoint).
    adapter:        None, or a PEFT LoRA adapter directory saved by train_dtr1.py; it is merged into
                    the base weights at load (inference only).
    tokenizer:      None = the adapter directory when it holds a tokenizer, else `model`.
    dtype:          "auto" (the checkpoint's), "float32", "bfloat16", "float16".
    device:         None = "cuda" when available else "cpu".
    chat_template:  None = the tokenizer's; else a Jinja2 template that replaces it.
    batch_size:     most prompts decoded together by generate_batch.
    temperature:    0 = greedy (evaluation); > 0 samples (training rollouts), with `top_p`, from a
                    torch.Generator seeded with `seed` (sampled outputs do depend on batching).
    max_context:    prompt + generation tokens at most; None = the model's max_position_embeddings.
    Loading happens on the first render/generate. Raises AdapterError for a bad dtype, a missing
    directory, or a prompt that does not fit max_context.
    Rollouts continue from token ids (Request.prompt_ids): the ids sampled so far plus the
    harness's insertions, exactly the sequence GRPO scores, not a re-tokenisation of the text.
    """

    token_prompts = True

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        tokenizer: str | None = None,
        dtype: str = "auto",
        device: str | None = None,
        chat_template: str | None = None,
        batch_size: int = 8,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        max_context: int | None = None,
        trust_remote_code: bool = False,
        decoding: str = "free",
    ):
        if dtype not in DTYPES:
            raise AdapterError(f"hf policy: dtype must be one of {DTYPES}, got {dtype!r}")
        if batch_size < 1 or temperature < 0 or not 0 < top_p <= 1:
            raise AdapterError(f"hf policy: need batch_size >= 1, temperature >= 0, 0 < top_p <= 1; got {batch_size}, {temperature}, {top_p}")
        self.model_id = str(model)
        self.adapter = None if adapter in (None, "") else str(adapter)
        self.tokenizer_id = tokenizer
        self.dtype = dtype
        self.device = device
        self.chat_template = chat_template
        self.batch_size = int(batch_size)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = int(seed)
        self.max_context = max_context
        self.trust_remote_code = bool(trust_remote_code)
        self.decoding = check_decoding(decoding, "hf")
        self.name = f"hf:{Path(self.model_id).name}" + (f"+{Path(self.adapter).name}" if self.adapter else "")
        self._model: Any = None
        self._tokenizer: Any = None
        self._generator: Any = None
        self._prefill: str | None = None

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, **kwargs: Any) -> "HFPolicy":
        """A policy over an already loaded model and tokenizer (the model being trained)."""
        policy = cls(model=getattr(model, "name_or_path", "loaded"), **kwargs)
        policy._model, policy._tokenizer = model, tokenizer
        if policy.chat_template:
            tokenizer.chat_template = policy.chat_template
        return policy

    # --- Policy interface --------------------------------------------------------------------------

    @property
    def prefill(self) -> str:  # type: ignore[override]
        if self._prefill is None:
            self._prefill = template_prefill(self._load()[1])
        return self._prefill

    def fingerprint(self) -> dict:
        return {
            "policy": "hf",
            "model": self.model_id,
            "adapter": self.adapter,
            "adapter_sha256": _dir_digest(self.adapter) if self.adapter else None,
            "dtype": self.dtype,
            "decoding": decoding_fingerprint(self.temperature, self.top_p, self.seed),
            "constraint": self.decoding,
            "prompts": "token_ids",
            "chat_template": self.chat_template or "tokenizer",
        }

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        return render_with_tokenizer(self._load()[1], messages, assistant_prefix, self.prefill)

    def encode(self, text: str) -> list[int]:
        return self._load()[1](text, add_special_tokens=False)["input_ids"]

    def decode_batch(self, requests: list[Request]) -> list[Generation]:
        out: list[Generation] = []
        for start in range(0, len(requests), self.batch_size):
            out.extend(self._decode(requests[start: start + self.batch_size]))
        return out

    def close(self) -> None:
        self._model = None
        self._tokenizer = None

    # --- loading -----------------------------------------------------------------------------------

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            for key, path in (("policy.model", self.model_id), ("policy.adapter", self.adapter)):
                if path is not None and path.startswith((".", "/")) and not Path(path).is_dir():
                    raise AdapterError(f"hf policy: {key}={path} is not a directory")
            if self.adapter and not (Path(self.adapter) / "adapter_config.json").is_file() and self.adapter.startswith((".", "/")):
                raise AdapterError(f"hf policy: policy.adapter={self.adapter} holds no adapter_config.json "
                                   "(expected the LoRA directory train_dtr1.py saves, <output_dir>/final)")
            tok_src = self.tokenizer_id or (self.adapter if self.adapter and (Path(self.adapter) / "tokenizer_config.json").is_file() else self.model_id)
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            dtype = "auto" if self.dtype == "auto" else getattr(torch, self.dtype)
            log.info("loading %s (adapter %s) on %s", self.model_id, self.adapter, device)
            try:
                tokenizer = AutoTokenizer.from_pretrained(tok_src, trust_remote_code=self.trust_remote_code)
                if self.chat_template:
                    tokenizer.chat_template = self.chat_template
                model = AutoModelForCausalLM.from_pretrained(self.model_id, dtype=dtype, trust_remote_code=self.trust_remote_code)
            except (OSError, ValueError) as exc:
                raise AdapterError(f"hf policy: cannot load {self.model_id!r} (policy.model; a hub id needs the network "
                                   f"once, or a local directory): {first_line(exc)}") from exc
            if self.adapter:
                from peft import PeftModel

                try:
                    model = PeftModel.from_pretrained(model, self.adapter).merge_and_unload()
                except (OSError, ValueError) as exc:
                    raise AdapterError(f"hf policy: cannot load the LoRA adapter {self.adapter!r} (policy.adapter): "
                                       f"{first_line(exc)}") from exc
            self._model, self._tokenizer = model.to(device).eval(), tokenizer
        return self._model, self._tokenizer

    # --- decoding ----------------------------------------------------------------------------------

    def _eos_ids(self, model: Any, tokenizer: Any) -> set[int]:
        eos = getattr(model.generation_config, "eos_token_id", None)
        ids = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.eos_token_id}
        ids.discard(None)
        return ids

    def _decode(self, requests: list[Request]) -> list[Generation]:
        import torch

        model, tokenizer = self._load()
        device = next(model.parameters()).device
        limit = self.max_context or getattr(model.config, "max_position_embeddings", None)
        # The rendered prompt already holds BOS and the template's control tokens as text.
        prompts = [list(r.prompt_ids) if r.prompt_ids is not None else tokenizer(r.prompt, add_special_tokens=False)["input_ids"]
                   for r in requests]
        budgets = []
        for ids, r in zip(prompts, requests):
            room = (limit - len(ids)) if limit else r.max_new_tokens
            if room < 1:
                raise AdapterError(f"prompt of {len(ids)} tokens does not fit the context of {limit} tokens")
            budgets.append(min(r.max_new_tokens, room))
        eos_ids = self._eos_ids(model, tokenizer)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos_ids), 0)
        width = max(len(p) for p in prompts)
        input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        window = max((len(s) for r in requests for s in r.stop), default=0) + 1
        constraint = None
        if any(r.grammar for r in requests):
            from rvt_bench.adapters.policy.constrain import Constraint

            constraint = Constraint(tokenizer, [r.grammar for r in requests], int(model.config.vocab_size))
        generated: list[list[int]] = [[] for _ in requests]
        done: list[Generation | None] = [None] * len(requests)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                cache = _new_cache(model)
                step_ids, step_pos = input_ids, positions
                for _ in range(max(budgets)):
                    out = model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos,
                                use_cache=True, **cache)
                    logits = out.logits[:, -1, :].float()
                    nxt = self._choose(constraint.mask(logits) if constraint else logits)
                    for i, token in enumerate(nxt.tolist()):
                        if done[i] is None:
                            if constraint:
                                constraint.accept(i, token)
                            done[i] = self._step(i, token, generated, requests[i].stop, budgets[i], eos_ids, window, tokenizer)
                    if all(d is not None for d in done):
                        break
                    step_ids = nxt.unsqueeze(-1)
                    step_pos = step_pos[:, -1:] + 1
                    mask = torch.cat([mask, torch.ones_like(step_ids)], dim=-1)
        finally:
            model.train(was_training)
        return [d for d in done]  # type: ignore[misc]

    def _choose(self, logits: Any) -> Any:
        import torch

        if self.temperature == 0:
            return logits.argmax(-1)
        if self._generator is None:
            self._generator = torch.Generator(device=logits.device).manual_seed(self.seed)
        probs = torch.softmax(logits / self.temperature, dim=-1)
        if self.top_p < 1:
            sorted_p, order = probs.sort(-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < self.top_p  # the most likely token always stays
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
        return torch.multinomial(probs, 1, generator=self._generator).squeeze(-1)

    @staticmethod
    def _step(i: int, token: int, generated: list[list[int]], stop: list[str], budget: int,
              eos_ids: set[int], window: int, tokenizer: Any) -> Generation | None:
        """Append `token` to row i; the row's Generation when it has finished, else None."""
        ids = generated[i]
        if token in eos_ids:
            text = tokenizer.decode(ids, skip_special_tokens=False)
            return Generation(text, "eos", None, len(ids), tuple(ids))
        ids.append(token)
        # A stop string ends within the last `window` tokens (every token is at least one character).
        tail = tokenizer.decode(ids[-window:], skip_special_tokens=False)
        if any(s and s in tail for s in stop):
            head, matched = split_at_stop(tokenizer.decode(ids, skip_special_tokens=False), stop)
            if matched is not None:
                return Generation(head, "stop", matched, len(ids), tuple(ids))
        if len(ids) >= budget:
            return Generation(tokenizer.decode(ids, skip_special_tokens=False), "length", None, len(ids), tuple(ids))
        return None


def _new_cache(model: Any) -> dict:
    """An empty KV cache under the keyword this transformers version's forward takes (5.x renamed
    `past_key_values` to `cache`); the model fills it in place."""
    import inspect

    from transformers import DynamicCache

    params = inspect.signature(model.forward).parameters
    key = "cache" if "cache" in params else "past_key_values"
    return {key: DynamicCache(config=model.config)}


def _dir_digest(path: str) -> str:
    """Short sha256 over a PEFT adapter directory's own files (adapter_config.json and
    adapter_model.*: names and bytes), so a retrained adapter at the same path is a new run;
    "missing" when the path is not a directory."""
    import hashlib

    root = Path(path)
    if not root.is_dir():
        return "missing"
    h = hashlib.sha256()
    for f in sorted(p for p in root.glob("adapter_*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode())
        fd, _ = files.open_regular(f, "adapter file")  # a regular file, hashed in pieces: weights can be GBs
        with open(fd, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:16]
