"""A VLM served by any OpenAI-compatible multimodal chat server (vLLM, SGLang, LMDeploy, Ollama),
through the chat completions endpoint: images go as base64 data URLs in ``image_url`` parts, a
video as its sampled frames (rvt_bench.adapters.vlm.frames), each after a text label.

Reproducing the baseline rows on a GPU (docs/models.md): e.g.
    vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{"image": 16}'
    python run_bench.py +dataset=revos dataset.root=DIR +model=vlm model.model=Qwen/Qwen2.5-VL-7B-Instruct

Retries follow rvt_bench.core.http (HTTP 408, 429, 502-504, timeouts, resets; a 500 is not retried); requests of a batch run
``max_concurrency`` at a time (the server batches them).
"""
from __future__ import annotations

import os
from typing import Any

from rvt_bench.adapters.policy.base import decoding_fingerprint
from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest
from rvt_bench.adapters.vlm.frames import data_url
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core.http import call_with_retries
from rvt_bench.core.threads import map_threads
from rvt_bench.core.types import AdapterError


class OpenAIChatVLM(VLMBackend):
    """Chat completions with images.

    model: the served model name. base_url: e.g. "http://localhost:8000/v1". api_key: None = the
    OPENAI_API_KEY environment variable, else "EMPTY". image_format: "png" (lossless) or "jpeg".
    temperature, top_p, seed: sent with every request (0 = greedy). extra_body: extra request fields
    (e.g. vLLM's {"top_k": 1}). timeout_s, max_retries, backoff_s, backoff_max_s: see rvt_bench.core.http.
    max_concurrency: requests in flight at once.
    """

    def __init__(self, model: str, base_url: str, api_key: str | None = None, image_format: str = "png",
                 temperature: float = 0.0, top_p: float = 1.0, seed: int | None = 0, extra_body: dict | None = None,
                 timeout_s: float = 300.0, max_retries: int = 4, backoff_s: float = 1.0, backoff_max_s: float = 30.0,
                 max_concurrency: int = 8):
        if not model or model == "???":
            raise AdapterError("vlm openai backend: `model.model` is required (the served model name)")
        if int(max_concurrency) < 1 or int(max_retries) < 0:
            raise AdapterError(f"vlm openai backend: need max_concurrency >= 1 and max_retries >= 0, "
                               f"got {max_concurrency}, {max_retries}")
        self.model, self.base_url = str(model), str(base_url)
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.image_format = image_format
        self.temperature, self.top_p, self.seed = float(temperature), float(top_p), seed
        self.extra_body = dict(extra_body or {})
        self.timeout_s, self.max_retries = float(timeout_s), int(max_retries)
        self.backoff_s, self.backoff_max_s = float(backoff_s), float(backoff_max_s)
        self.batch_size = int(max_concurrency)
        self.name = f"openai:{model}"
        self._client: Any = None

    def fingerprint(self) -> dict:
        return {"backend": "openai", "model": self.model, "image_format": self.image_format,
                "extra_body": self.extra_body, "decoding": decoding_fingerprint(self.temperature, self.top_p, self.seed)}

    def preflight(self) -> None:
        from rvt_bench.adapters.policy.openai_compat import served_models

        names = served_models(self.base_url, api_key=self.api_key, timeout_s=min(self.timeout_s, 30.0),
                              what="model.base_url")
        if self.model not in names:
            raise AdapterError(f"vlm: model.model={self.model!r} is not served at {self.base_url}; it serves {names}")
        # One request WITH an image, so a text-only server is refused here, before any sample, not
        # once per sample (its answer, e.g. HTTP 500 "image input is not supported", is not retried).
        import numpy as np

        probe = VLMRequest(None, [("text", "Image:"), ("image", np.full((32, 32, 3), 128, np.uint8)),
                                  ("text", "Reply with one word.")], 1)
        try:
            self._generate(probe)
        except AdapterError as exc:
            raise AdapterError(f"vlm: model.model={self.model!r} at model.base_url={self.base_url} cannot answer a "
                               f"request with an image (is it a vision-language model?): {exc}") from exc

    def generate(self, requests: list[VLMRequest]) -> list[Reply | AdapterError]:
        if len(requests) <= 1 or self.batch_size == 1:
            return [self._safe(r) for r in requests]
        # daemon threads: a stop signal does not wait for the requests in flight (rvt_bench.core.threads)
        return map_threads(self._safe, requests, self.batch_size, "vlm")

    def messages(self, request: VLMRequest) -> list[dict]:
        """The chat messages of a request (system, its earlier `turns`, the user turn): text parts as
        {"type": "text"}, images as {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}."""
        def parts(content):
            return [{"type": "text", "text": value} if kind == "text"
                    else {"type": "image_url", "image_url": {"url": data_url(value, self.image_format)}}
                    for kind, value in content]

        out = [{"role": "system", "content": request.system}] if request.system else []
        out += [{"role": role, "content": parts(content)} for role, content in request.turns]
        return out + [{"role": "user", "content": parts(request.content)}]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None

    def _safe(self, request: VLMRequest) -> Reply | AdapterError:
        try:
            return self._generate(request)
        except AdapterError as exc:
            return exc

    def _generate(self, request: VLMRequest) -> Reply:
        import openai

        if self._client is None:
            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout_s,
                                         max_retries=0)
        messages = self.messages(request)
        resp = call_with_retries(
            lambda: self._client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=int(request.max_new_tokens),
                temperature=self.temperature, top_p=self.top_p, seed=self.seed,
                extra_body=self.extra_body or None),
            what=f"vlm {self.model}", base_url=self.base_url, max_retries=self.max_retries,
            backoff_s=self.backoff_s, backoff_max_s=self.backoff_max_s, error=AdapterError)
        try:
            choice = resp.choices[0]
            text = choice.message.content or ""
            finish = choice.finish_reason
            if not isinstance(text, str):  # the client does not check the body's types
                raise TypeError(f"message.content is a JSON {type(text).__name__}, not a string")
        except (AttributeError, IndexError, TypeError) as exc:
            raise AdapterError(f"vlm {self.model}: malformed chat response from {self.base_url}: {exc}") from exc
        usage = getattr(resp, "usage", None)
        n_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        return Reply(text=text, finish_reason="length" if finish == "length" else "stop", n_tokens=n_tokens,
                     prompt_tokens=prompt_tokens if type(prompt_tokens) is int and prompt_tokens >= 0 else None)
