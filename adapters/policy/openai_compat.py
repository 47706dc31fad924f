"""A DT-R1 policy served by any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp server),
through the openai client's completions endpoint (`/v1/completions`): the rollout is one assistant
turn that grows, so the prompt is rendered here and sent as text, with `stop` at the closing tags.

vLLM serves a GRPO checkpoint directly: `vllm serve BASE --enable-lora --lora-modules dtr1=DIR`,
then `policy.model=dtr1`. Which stop string ended a completion comes from the choice's
`stop_reason` (vLLM) or `matched_stop` (SGLang); a server that reports neither (Ollama) gets it
inferred from the text: the closing tag of the last block the text opened and did not close
(a rollout pauses exactly there); with no such block, the turn ended ("eos").

With `token_ids=true` (vLLM only: GRPO's server mode, rvt_bench.adapters.dtr1.training) prompts go as token
ids (Request.prompt_ids) and each completion comes back with vLLM's `token_ids` and the sampled
tokens' `logprobs`, read by rvt_bench.adapters.policy.vllm_output.from_vllm; the server should run with
`--logprobs-mode processed_logprobs` so they include temperature.

Retries: HTTP 408, 429, 502, 503, 504, timeouts and connection errors are retried `max_retries` times after
`backoff_s * 2**attempt` seconds (capped at backoff_max_s); the openai client's own retries are
off so this loop is the only one. generate_batch sends up to `max_concurrency` requests at once
(the server batches them).
"""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

from rvt_bench.adapters.policy.base import BatchPolicy, Generation, Request, check_decoding, split_at_stop, decoding_fingerprint
from rvt_bench.adapters.policy.chat import render_chat
from rvt_bench.adapters.policy.vllm_output import from_vllm
from rvt_bench.core.http import call_with_retries
from rvt_bench.core.threads import map_threads
from rvt_bench.core.types import AdapterError, ServerUnreachableError, first_line

log = logging.getLogger(__name__)


class OpenAIPolicy(BatchPolicy):
    """An OpenAI-compatible completions endpoint behind the Policy interface.

    model:          the served model name (with vLLM --lora-modules, the adapter's name).
    base_url:       e.g. "http://localhost:8000/v1".
    api_key:        None = the OPENAI_API_KEY environment variable, else "EMPTY" (servers without auth).
    tokenizer:      directory or hub id whose chat template renders prompts (only the tokenizer
                    files are read; a hub id is read from the local cache first), or a loaded
                    tokenizer; None: `chat_template`, or else the server's own template.
    chat_template:  a Jinja2 template or a name of rvt_bench.adapters.policy.chat.NAMED_TEMPLATES; overrides
                    the tokenizer's. With neither tokenizer nor chat_template (the default), the
                    server renders its own chat template (POST /apply-template on llama.cpp's
                    server; /tokenize with the messages, then /detokenize on vLLM and SGLang), so
                    nothing is fetched from the hub.
    bos_token:      the template's `bos_token` variable when chat_template is given (else the
                    tokenizer's own).
    extra_body:     extra request fields, e.g. {"add_special_tokens": false} so vLLM does not add
                    a second BOS to a prompt whose template already wrote it.
    temperature, top_p, seed: sampling settings sent with every request (0 = greedy).
    timeout_s:      per-request timeout in seconds.
    max_retries, backoff_s, backoff_max_s: see the module docstring.
    max_concurrency: requests in flight at most in generate_batch.
    token_ids:      send prompts as token ids and read back the sampled ids and their logprobs
                    (vLLM's `return_token_ids`); needs `tokenizer`.
    decoding:       "free" | "grammar": send each request's protocol grammar (GBNF) as the
                    server's structured-output field `grammar_field`.
    grammar_field:  "structured_outputs" (vLLM >= 0.12: {"structured_outputs": {"grammar": G}}),
                    "guided_grammar" (older vLLM: {"guided_grammar": G}), "ebnf" (SGLang: {"ebnf": G}) or
                    "grammar" (llama.cpp's server: {"grammar": G}).
    Raises AdapterError for a missing model or template, and, naming the server, when a request
    fails past its retries or the response is malformed.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        tokenizer: str | None = None,
        chat_template: str | None = None,
        bos_token: str = "",
        extra_body: dict | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        timeout_s: float = 300.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        max_concurrency: int = 8,
        token_ids: bool = False,
        decoding: str = "free",
        grammar_field: str = "structured_outputs",
    ):
        if not model or model == "???":
            raise AdapterError("openai policy: `model` is required (the served model or LoRA name)")
        if token_ids and not tokenizer:
            raise AdapterError("openai policy: token_ids=true needs `tokenizer` (prompts are sent as its token ids)")
        if max_retries < 0 or max_concurrency < 1:
            raise AdapterError(f"openai policy: need max_retries >= 0, max_concurrency >= 1; got {max_retries}, {max_concurrency}")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.tokenizer_id = tokenizer if isinstance(tokenizer, str) or tokenizer is None else getattr(tokenizer, "name_or_path", "loaded")
        self._tokenizer: Any = None if isinstance(tokenizer, str) else tokenizer
        self.token_prompts = bool(token_ids)
        self.chat_template = chat_template
        self.bos_token = bos_token
        self.extra_body = dict(extra_body or {})
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_concurrency = int(max_concurrency)
        self.name = f"openai:{model}"
        self.decoding = check_decoding(decoding, self.name)
        if grammar_field not in GRAMMAR_FIELDS:
            raise AdapterError(f"openai policy: grammar_field={grammar_field!r} is not one of {list(GRAMMAR_FIELDS)}")
        self.grammar_field = grammar_field
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._in_flight = threading.BoundedSemaphore(self.max_concurrency)  # across batches and rollout threads
        self._prefill: str | None = None
        # neither a tokenizer nor a template: the server renders its own chat template (no hub access)
        self.server_template = not tokenizer and not chat_template
        # rendering on the server or by a Jinja template; a transformers tokenizer is not shared by threads
        self.thread_safe = (self.server_template or bool(chat_template)) and not self.token_prompts
        self._rendered: dict[str, str] = {}
        self._server_api: str | None = None  # "llama.cpp" | "vllm" (vLLM, SGLang): found on the first render

    # --- Policy interface --------------------------------------------------------------------------

    @property
    def prefill(self) -> str:  # type: ignore[override]
        if self._prefill is None:
            if self.server_template:
                from rvt_bench.adapters.policy.hf import THINK_PREFILL

                probe = self._render_on_server([{"role": "user", "content": "x"}])
                self._prefill = THINK_PREFILL if probe.endswith(THINK_PREFILL) else ""
            elif self.chat_template:
                probe = render_chat(self.chat_template, [{"role": "user", "content": "x"}], bos_token=self.bos_token)
                from rvt_bench.adapters.policy.hf import THINK_PREFILL

                self._prefill = THINK_PREFILL if probe.endswith(THINK_PREFILL) else ""
            else:
                from rvt_bench.adapters.policy.hf import template_prefill

                self._prefill = template_prefill(self._load_tokenizer())
        return self._prefill

    def fingerprint(self) -> dict:
        return {
            "policy": "openai",
            "model": self.model,
            "tokenizer": self.tokenizer_id,
            "chat_template": self.chat_template or ("server" if self.server_template else "tokenizer"),
            "extra_body": self.extra_body,
            "token_ids": self.token_prompts,
            "decoding": decoding_fingerprint(self.temperature, self.top_p, self.seed),
            "constraint": self.decoding,
        }

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        prefill = self.prefill
        if self.chat_template or self.server_template:
            if prefill and not assistant_prefix.startswith(prefill):
                raise AdapterError(f"the assistant turn must start with the template's prefill {prefill!r}")
            rendered = (self._render_on_server(messages) if self.server_template
                        else render_chat(self.chat_template, messages, bos_token=self.bos_token))
            return rendered[: len(rendered) - len(prefill)] + assistant_prefix
        from rvt_bench.adapters.policy.hf import render_with_tokenizer

        return render_with_tokenizer(self._load_tokenizer(), messages, assistant_prefix, prefill)

    def encode(self, text: str) -> list[int]:
        if self.server_template:
            self.prefill  # noqa: B018  (the first render finds out which server this is)
            if self._server_api == "llama.cpp":
                return list(self._post("tokenize", {"content": text, "add_special": False})["tokens"])
            return list(self._post("tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False})["tokens"])
        return self._load_tokenizer()(text, add_special_tokens=False)["input_ids"]

    # --- the server's own chat template -------------------------------------------------------------

    def _render_on_server(self, messages: list[dict]) -> str:
        """`messages` through the served model's chat template with the generation prompt, as text,
        by the server's endpoints beside /v1: llama.cpp's server POST /apply-template {messages}
        -> {prompt}; vLLM and SGLang POST /tokenize {messages, add_generation_prompt} then
        /detokenize {tokens} -> {prompt} (llama.cpp's /tokenize reads text only). The first render
        asks /apply-template; a 404 there means the other kind. Memoised per message list: a
        rollout renders the same messages every round."""
        import json

        key = json.dumps(messages, sort_keys=True)
        if key not in self._rendered:
            if self._server_api in (None, "llama.cpp"):
                out = self._post("apply-template", {"messages": messages}, missing_ok=self._server_api is None)
                self._server_api = "llama.cpp" if out is not None else "vllm"
            if self._server_api == "llama.cpp":
                self._rendered[key] = str(out["prompt"])
            else:
                tokens = self._post("tokenize", {"model": self.model, "messages": messages, "add_generation_prompt": True,
                                                 "add_special_tokens": False})["tokens"]
                self._rendered[key] = str(self._post("detokenize", {"model": self.model, "tokens": tokens})["prompt"])
        return self._rendered[key]

    def _post(self, endpoint: str, body: dict, missing_ok: bool = False) -> dict | None:
        """POST <server root>/<endpoint> (the root is base_url without its /v1). Raises
        ServerUnreachableError when nothing answers, AdapterError naming the settings to use
        instead when the server has no such endpoint (None then, with missing_ok) or answers an error."""
        import json
        import urllib.error
        import urllib.request

        root = self.base_url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        url = f"{root}/{endpoint}"
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(request, timeout=min(self.timeout_s, 60.0)) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405) and missing_ok:
                return None
            if exc.code in (404, 405):
                raise AdapterError(f"openai policy: the server at policy.base_url={self.base_url} has no /{endpoint} "
                                   f"endpoint to render its chat template (vLLM and SGLang have one, llama.cpp's server has "
                                   f"/apply-template): set policy.tokenizer "
                                   f"to a local tokenizer directory or policy.chat_template") from exc
            raise AdapterError(f"openai policy: {url} answered HTTP {exc.code}: {exc.read()[:200]!r}") from exc
        except (urllib.error.URLError, OSError) as exc:  # refused, unreachable, timed out
            raise ServerUnreachableError(f"openai policy: the server at policy.base_url={self.base_url} cannot be "
                                         f"reached (is it running?): {exc}") from exc
        try:
            out = json.loads(text)
        except ValueError as exc:
            raise AdapterError(f"openai policy: {url} returned {text[:200]!r}, not JSON") from exc
        if not isinstance(out, dict) or not {"tokens", "prompt", "content"} & set(out):
            raise AdapterError(f"openai policy: {url} returned {str(out)[:200]}, expected 'tokens' or 'prompt'")
        return out

    def decode_batch(self, requests: list[Request]) -> list[Generation]:
        if len(requests) <= 1 or self.max_concurrency == 1:
            return [self._generate(r) for r in requests]
        # daemon threads: a stop signal does not wait for the requests in flight (rvt_bench.core.threads)
        return map_threads(self._generate, requests, self.max_concurrency, "openai-policy")

    def _generate(self, r: Request) -> Generation:
        stop = list(r.stop)
        if not self.token_prompts:
            return _generation(self._request(r.prompt, stop, int(r.max_new_tokens), r.grammar), stop, int(r.max_new_tokens), self.base_url)
        ids = list(r.prompt_ids) if r.prompt_ids is not None else self.encode(r.prompt)
        choice, _ = self._request(ids, stop, int(r.max_new_tokens), r.grammar)
        extra = getattr(choice, "model_extra", None) or {}
        token_ids = extra.get("token_ids")
        token_logprobs = getattr(getattr(choice, "logprobs", None), "token_logprobs", None)
        if token_ids is None or token_logprobs is None:
            raise AdapterError(f"policy {self.model}: {self.base_url} returned no token_ids/logprobs; "
                               "token_ids=true needs a vLLM server (return_token_ids)")
        tok = self._load_tokenizer()
        return from_vllm(choice.text or "", choice.finish_reason, extra.get("stop_reason"), token_ids, token_logprobs,
                         stop, {tok.eos_token_id} - {None}, f"policy {self.model} at {self.base_url}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None

    # --- requests ----------------------------------------------------------------------------------

    def _load_tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                try:  # a hub id already in the local cache: no network (HF_HUB_OFFLINE or not)
                    self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_id, local_files_only=True)
                except (OSError, ValueError):
                    self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_id)
            except (OSError, ValueError) as exc:
                raise AdapterError(f"openai policy: cannot load the tokenizer {self.tokenizer_id!r} (policy.tokenizer; "
                                   f"a hub id needs the network once, or a local directory): {first_line(exc)}") from exc
        return self._tokenizer

    def preflight(self) -> None:
        """Reach the server first (a server that is down is named before any tokenizer is loaded),
        check it serves policy.model, then render a probe prompt (the server's template, the
        tokenizer's or chat_template)."""
        names = served_models(self.base_url, api_key=self.api_key, timeout_s=min(self.timeout_s, 30.0), what="policy.base_url")
        if self.model not in names:
            raise AdapterError(f"openai policy: policy.model={self.model!r} is not served at {self.base_url}; it serves {names}")
        super().preflight()

    def _request(self, prompt: str | list[int], stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Any:
        import openai

        with self._client_lock:  # rollouts call from several threads; one client, one connection pool
            if self._client is None:
                self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout_s,
                                             max_retries=0)
        extra_body = dict(self.extra_body)
        logprobs = None
        if self.token_prompts:
            # vLLM: the sampled ids, and ids rather than strings in the logprobs' `tokens`.
            extra_body.update(return_token_ids=True, return_tokens_as_token_ids=True)
            logprobs = 0
        if grammar:
            extra_body.update(_grammar_body(self.grammar_field, grammar))
        with self._in_flight:
            resp = call_with_retries(
                lambda: self._client.completions.create(
                    model=self.model, prompt=prompt, stop=stop or None, max_tokens=max_new_tokens,
                    temperature=self.temperature, top_p=self.top_p, seed=self.seed, logprobs=logprobs,
                    extra_body=extra_body or None,
                ),
                what=f"policy {self.model}", base_url=self.base_url, max_retries=self.max_retries,
                backoff_s=self.backoff_s, backoff_max_s=self.backoff_max_s, error=AdapterError,
            )
        try:
            return resp.choices[0], resp.usage
        except (AttributeError, IndexError, TypeError) as exc:
            raise AdapterError(f"policy {self.model}: malformed completion response from {self.base_url}: {exc}") from exc


GRAMMAR_FIELDS = ("structured_outputs", "guided_grammar", "ebnf", "grammar")


def _grammar_body(field: str, grammar: str) -> dict:
    """The request fields that carry a GBNF grammar to the server (see OpenAIPolicy.grammar_field)."""
    return {"structured_outputs": {"grammar": grammar}} if field == "structured_outputs" else {field: grammar}


def _generation(choice_usage: tuple[Any, Any], stop: list[str], max_new_tokens: int, base_url: str) -> Generation:
    """A Generation from one completion choice (OpenAI semantics: the text excludes the stop string)."""
    choice, usage = choice_usage
    text = choice.text or ""
    n_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    # Some servers return the text up to and including a stop string; cut it as the others do.
    head, matched = split_at_stop(text, stop)
    if matched is not None:
        return Generation(head, "stop", matched, n_tokens)
    if choice.finish_reason == "length":
        return Generation(text, "length", None, n_tokens or max_new_tokens)
    if choice.finish_reason != "stop":
        raise AdapterError(f"completion from {base_url} ended with finish_reason {choice.finish_reason!r}; expected 'stop' or 'length'")
    extra = getattr(choice, "model_extra", None) or {}
    reported = extra.get("stop_reason", extra.get("matched_stop", getattr(choice, "stop_reason", None)))
    if isinstance(reported, str) and reported in stop:
        return Generation(text, "stop", reported, n_tokens)
    if "stop_reason" in extra or "matched_stop" in extra:
        return Generation(text, "eos", None, n_tokens)  # the server says: no stop string (EOS token id or None)
    inferred = _inferred_stop(text, stop)
    return Generation(text, "stop" if inferred else "eos", inferred, n_tokens)


def _inferred_stop(text: str, stop: list[str]) -> str | None:
    """For closing-tag stops "</tag>": the one whose "<tag>" was opened last in `text` and not
    closed after; None when every opened block is closed (the model ended its turn)."""
    best: tuple[int, str] | None = None
    for s in stop:
        m = re.fullmatch(r"</(\w+)>", s)
        if not m:
            continue
        opened = text.rfind(f"<{m.group(1)}>")
        if opened >= 0 and text.find(s, opened) < 0 and (best is None or opened > best[0]):
            best = (opened, s)
    return None if best is None else best[1]


def served_models(base_url: str, api_key: str | None = None, timeout_s: float = 30.0, what: str = "base_url") -> list[str]:
    """Model names an OpenAI-compatible server serves (GET {base_url}/models). api_key: None = the
    OPENAI_API_KEY environment variable, else "EMPTY". Raises AdapterError naming `what` and the
    server when it cannot be reached, refuses the key (401/403), or serves nothing."""
    import openai

    key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    try:
        with openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=2) as client:
            names = [m.id for m in client.models.list()]
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise AdapterError(f"the server at {what}={base_url} refused the API key (policy.api_key or "
                           f"$OPENAI_API_KEY): {exc}") from exc
    except openai.APIConnectionError as exc:
        raise ServerUnreachableError(f"the server at {what}={base_url} cannot be reached (is it running?): {exc}") from exc
    except openai.OpenAIError as exc:
        raise AdapterError(f"cannot list the models of {what}={base_url}: {exc}") from exc
    if not names:
        raise AdapterError(f"{what}={base_url} serves no model")
    return names
