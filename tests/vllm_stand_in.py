"""vLLM as tests can have it on a CPU: a transformers model behind vLLM's two faces.

- `ModelSampler` continues token ids the way vLLM's sampler reports it: token by token, the text
  cut before the earliest stop string while `token_ids` keep every sampled token (the stop
  string's included), an end-of-sequence token kept last in `token_ids` with stop_reason None,
  and each sampled token's log-probability under the model (after temperature, as vLLM's
  `--logprobs-mode processed_logprobs`). What it samples is either the model's greedy choice or a
  scripted text (`script(prompt_text) -> continuation`) that the model scores token by token, so
  tests get protocol-following rollouts whose logprobs are still the model's own.
- `CompletionsServer`: a loopback HTTP server answering GET /health, GET /v1/models and
  POST /v1/completions with vLLM's response fields (stop_reason, token_ids, prompt_token_ids,
  logprobs.token_logprobs with "token_id:N" tokens), per vllm/entrypoints/openai/completion.
- `FakeLLM`: the `vllm.LLM.generate` surface (RequestOutput / CompletionOutput / Logprob shapes)
  plus `fake_vllm_module()`, a stand-in `vllm` module with SamplingParams, for the engine policy.

None of this is vLLM; it reproduces the output conventions rvt_bench.adapters.policy.vllm_output reads.
"""
from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from typing import Callable

from tests.loopback import JSONHandler, Loopback


class ModelSampler:
    """model: a causal LM (eval mode); tokenizer: its tokenizer; script: None = greedy, else
    prompt text -> the continuation text to emit (append tokenizer.eos_token to end the turn)."""

    def __init__(self, model, tokenizer, script: Callable[[str], str] | None = None):
        self.model, self.tokenizer, self.script = model, tokenizer, script
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def complete(self, prompt_ids: list[int], stop: list[str], max_tokens: int, temperature: float) -> dict:
        import torch

        with self.lock:
            self.requests.append({"prompt_ids": list(prompt_ids), "stop": list(stop), "max_tokens": max_tokens})
        tok = self.tokenizer
        scripted = None
        if self.script is not None:
            scripted = tok(self.script(tok.decode(prompt_ids, skip_special_tokens=False)), add_special_tokens=False)["input_ids"]
        ids: list[int] = []
        lps: list[float] = []
        with torch.no_grad():
            while True:
                logits = self.model(input_ids=torch.tensor([list(prompt_ids) + ids])).logits[0, -1].float()
                logp = torch.log_softmax(logits / (temperature or 1.0), -1)
                nxt = scripted[len(ids)] if scripted is not None else int(logits.argmax())
                ids.append(int(nxt))
                lps.append(float(logp[nxt]))
                if nxt == tok.eos_token_id:
                    text = tok.decode(ids[:-1], skip_special_tokens=False)
                    return self._out(text, ids, lps, "stop", None)
                text = tok.decode(ids, skip_special_tokens=False)
                hits = [(text.find(s) + len(s), s) for s in stop if s and s in text]
                if hits:
                    end, s = min(hits)
                    return self._out(text[: end - len(s)], ids, lps, "stop", s)
                if len(ids) >= max_tokens or (scripted is not None and len(ids) == len(scripted)):
                    return self._out(text, ids, lps, "length", None)

    @staticmethod
    def _out(text, ids, lps, finish, stop_reason) -> dict:
        return {"text": text, "token_ids": ids, "logprobs": lps, "finish_reason": finish, "stop_reason": stop_reason}


class CompletionsServer:
    """A loopback vLLM-style completions server over `sampler`; `url` ends with /v1."""

    def __init__(self, sampler: ModelSampler, model_name: str = "tiny"):
        self.sampler, self.model_name = sampler, model_name
        self.bodies: list[dict] = []
        server = self

        class Handler(JSONHandler):
            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self.send_json(200, {"object": "list", "data": [{"id": server.model_name, "object": "model"}]})
                return self.send_json(200, {}) if self.path == "/health" else self.send_json(404, {"error": "not found"})

            def do_POST(self):
                body = self.read_json()
                server.bodies.append(body)
                self.send_json(200, server.complete(body))

        self.loopback = Loopback(Handler)
        self.root = self.loopback.root
        self.url = self.root + "/v1"

    def complete(self, body: dict) -> dict:
        prompt = body["prompt"]
        ids = prompt if isinstance(prompt, list) else self.sampler.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        out = self.sampler.complete(ids, body.get("stop") or [], int(body["max_tokens"]), float(body.get("temperature", 1.0)))
        choice = {"index": 0, "text": out["text"], "finish_reason": out["finish_reason"], "stop_reason": out["stop_reason"],
                  "logprobs": None}
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"text_offset": [0] * len(out["token_ids"]), "token_logprobs": out["logprobs"],
                                  "tokens": [f"token_id:{t}" for t in out["token_ids"]],
                                  "top_logprobs": [{f"token_id:{t}": lp} for t, lp in zip(out["token_ids"], out["logprobs"])]}
        if body.get("return_token_ids"):
            choice["token_ids"], choice["prompt_token_ids"] = out["token_ids"], ids
        n = len(out["token_ids"])
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"], "choices": [choice],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": n + len(ids)}}

    def close(self) -> None:
        self.loopback.close()


# --- the vllm.LLM surface --------------------------------------------------------------------------

@dataclass
class SamplingParams:
    n: int = 1
    max_tokens: int = 16
    stop: list = field(default_factory=list)
    logprobs: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


def fake_vllm_module() -> types.ModuleType:
    """A module to put at sys.modules["vllm"]: SamplingParams only."""
    import importlib.machinery

    mod = types.ModuleType("vllm")
    mod.__spec__ = importlib.machinery.ModuleSpec("vllm", None)  # find_spec("vllm") sees it
    mod.SamplingParams = SamplingParams
    return mod


class FakeLLM:
    """`vllm.LLM.generate(prompts, sampling_params=..., use_tqdm=...)` over a ModelSampler:
    prompts are {"prompt_token_ids": [...]}; returns RequestOutput-shaped objects."""

    def __init__(self, sampler: ModelSampler):
        self.sampler = sampler
        self.calls: list[int] = []  # batch sizes

    def get_tokenizer(self):
        return self.sampler.tokenizer

    def generate(self, prompts, sampling_params=None, use_tqdm=True, lora_request=None):
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        self.calls.append(len(prompts))
        outs = []
        for prompt, p in zip(prompts, params):
            ids = prompt["prompt_token_ids"]
            o = self.sampler.complete(ids, list(p.stop or []), p.max_tokens, p.temperature)
            lps = None
            if p.logprobs is not None:
                lps = [{t: Logprob(lp, 1)} for t, lp in zip(o["token_ids"], o["logprobs"])]
            comp = types.SimpleNamespace(index=0, text=o["text"], token_ids=o["token_ids"], logprobs=lps,
                                         finish_reason=o["finish_reason"], stop_reason=o["stop_reason"], cumulative_logprob=None)
            outs.append(types.SimpleNamespace(prompt_token_ids=ids, outputs=[comp], finished=True))
        return outs
