"""Embedded offline policy: a small GGUF model from an installed package, run on the CPU.

Two runtimes, chosen by `runtime`:
- "llama_cpp" (default): llama-cpp-python, `Llama(model_path, n_ctx, n_threads, seed)`; greedy
  decoding through the low-level `Llama.generate` token loop so that the stop string that matched,
  end-of-turn and the length limit are told apart exactly (create_completion reports all three
  as finish_reason "stop"/"length" and trims the stop string away).
- "transformers": `AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)` (dequantised to
  float32), greedy `generate` with `stop_strings=`.
Both render prompts with the GGUF's chat template (rvt_bench.adapters.policy.chat), so a prompt is the same
string in both; only tokenisation and arithmetic differ.

Models load on the first `generate` (or `render`, which needs the GGUF's metadata), never at
construction: a resumed run with nothing left to do loads nothing.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rvt_bench.adapters.policy.base import Generation, Policy, Request, check_decoding, split_at_stop
from rvt_bench.adapters.policy.chat import render_chat
from rvt_bench.adapters.policy.gguf_files import REQUANTIZE_TYPES, get_model, requantize_gguf, resolve_gguf
from rvt_bench.core.types import AdapterError

log = logging.getLogger(__name__)

RUNTIMES = ("llama_cpp", "transformers")


class GGUFPolicy(Policy):
    """A GGUF model of rvt_bench.adapters.policy.gguf_files.MODELS behind the Policy interface.

    model:         registry key ("smollm2", "gemma3_270m").
    runtime:       "llama_cpp" | "transformers".
    n_ctx:         context window in tokens (prompt + generation); a longer prompt raises AdapterError.
    n_threads:     CPU threads generating tokens (llama_cpp; transformers uses torch's setting when None).
    n_threads_batch: CPU threads evaluating prompts (llama_cpp only; None = n_threads). A 135M model
                   generates no faster on 2 threads than on 1, and on a busy machine much slower.
    seed:          RNG seed (decoding is greedy; the seed only matters to runtime internals).
    chat_template: None = the GGUF's `tokenizer.chat_template`; else a Jinja2 template or a name
                   from rvt_bench.adapters.policy.chat.NAMED_TEMPLATES, required when the GGUF has none.
    cache_dir:     where chunked models are assembled (None = ~/.cache/rvt-bench/gguf).
    decoding:      "free" | "grammar": constrain each continuation to the request's GBNF grammar
                   (llama.cpp's grammar sampler, `LlamaGrammar`; the transformers runtime: xgrammar).
    requantize:    llama_cpp only: None = run the shipped weights; "q8_0" = run them requantised to
                   Q8_0 by llama.cpp (rvt_bench.adapters.policy.gguf_files.requantize_gguf; built once in
                   cache_dir): ~1.5-2x faster prompt evaluation on CPUs, same model up to Q8_0 rounding.
    n_parallel:    llama_cpp only: model instances decoding the requests of a batch at the same time,
                   one OS thread each (llama.cpp releases the GIL); also the batch the harness hands
                   over (`batch_size`). Each request goes to the instance whose KV cache shares the
                   longest prefix with it, so a rollout's continuations stay on its instance. With
                   n_threads = n_threads_batch = 1 and one instance per core, a 135M model on 2
                   cores does about twice the work of 1 instance on 2 threads (no OpenMP team to
                   synchronise; see docs/architecture.md "Embedded policy speed").
    (conf/policy/<name>.yaml may hold a `rollout:` block, DT-R1 limits sized for this model that
    conf/model/dtr1.yaml reads; it is no argument here: rvt_bench.harness.config.adapter_node drops it.)
    """

    def __init__(
        self,
        model: str = "smollm2",
        runtime: str = "llama_cpp",
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        seed: int = 0,
        chat_template: str | None = None,
        cache_dir: str | None = None,
        prefill: str = "",
        decoding: str = "free",
        n_parallel: int = 1,
        requantize: str | None = None,
    ):
        if runtime not in RUNTIMES:
            raise AdapterError(f"unknown policy runtime {runtime!r}; expected one of {RUNTIMES}")
        self.spec = get_model(model)
        self.name = f"gguf:{model}"
        self.runtime = runtime
        self.n_ctx = int(n_ctx)
        self.n_threads = n_threads
        self.n_threads_batch = n_threads_batch
        self.seed = int(seed)
        self.chat_template = chat_template
        self.cache_dir = cache_dir
        # Text the assistant turn starts with, written by the harness as R1-distill templates do
        # with "<think>\n"; the policy continues from it. Part of the fingerprint.
        self.prefill = prefill
        self.decoding = check_decoding(decoding, self.name)
        self.n_parallel = int(n_parallel)
        if self.n_parallel < 1 or (self.n_parallel > 1 and runtime != "llama_cpp"):
            raise AdapterError(f"policy n_parallel={n_parallel}: expected >= 1, and 1 unless runtime=llama_cpp")
        self._pool: list[_LlamaCpp] = []
        self.requantize = requantize
        if requantize is not None and runtime != "llama_cpp":
            raise AdapterError("policy requantize is a llama_cpp option (runtime=llama_cpp)")
        if requantize is not None and requantize not in REQUANTIZE_TYPES:
            raise AdapterError(f"policy requantize={requantize!r}: expected null or one of {list(REQUANTIZE_TYPES)}")
        self._path: Path | None = None
        self._meta: dict[str, str] | None = None
        self._backend: _LlamaCpp | _Transformers | None = None

    # --- Policy interface --------------------------------------------------------------------------

    def fingerprint(self) -> dict:
        return {
            "policy": "gguf",
            "model": self.spec.key,
            "model_id": self.spec.model_id,
            "weights_sha256": self.spec.sha256,
            "runtime": self.runtime,
            "n_ctx": self.n_ctx,
            "decoding": "greedy",
            "constraint": self.decoding,
            "chat_template": self.chat_template or "gguf",
            "prefill": self.prefill,
            # llama_cpp: a rollout's next prompt continues from the ids the model sampled (tokenize).
            **({"continuation": "sampled_ids"} if self.runtime == "llama_cpp" else {}),
            # Only when set, so the fingerprints (run names) of configurations without them stay.
            **({"requantize": self.requantize} if self.requantize else {}),
        }

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        template = self.chat_template or self.metadata().get("tokenizer.chat_template")
        if not template:
            raise AdapterError(
                f"{self.spec.filename} has no tokenizer.chat_template; set chat_template in the policy config"
            )
        return render_chat(template, messages, assistant_prefix)

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Generation:
        if max_new_tokens < 1:
            raise AdapterError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        return self._load().generate(prompt, list(stop), int(max_new_tokens), grammar)

    @property
    def batch_size(self) -> int:
        """Requests per generate_batch the harness should send (= n_parallel)."""
        return self.n_parallel

    def generate_batch(self, requests: list[Request]) -> list[Generation]:
        """`generate` for each request; with n_parallel > 1 the requests are spread over the
        instances (longest shared KV prefix first) and decoded in parallel threads. Each result is
        the greedy continuation of its own prompt, as `generate` gives it."""
        if self.n_parallel == 1 or len(requests) < 2:
            return super().generate_batch(requests)
        for r in requests:
            if r.max_new_tokens < 1:
                raise AdapterError(f"max_new_tokens must be >= 1, got {r.max_new_tokens}")
        pool = self._instances()
        lanes = _assign([[inst.prefix_bytes(r.prompt) for inst in pool] for r in requests])
        results: list[Generation | BaseException | None] = [None] * len(requests)

        done = [threading.Event() for _ in pool]

        def work(lane: int) -> None:
            try:
                for i in lanes[lane]:
                    r = requests[i]
                    try:
                        results[i] = pool[lane].generate(r.prompt, list(r.stop), int(r.max_new_tokens), r.grammar)
                    except BaseException as exc:  # re-raised in the caller's thread, first in request order
                        results[i] = exc
            finally:
                done[lane].set()

        busy = [lane for lane in range(len(pool)) if lanes[lane]]
        for lane in busy:
            threading.Thread(target=work, args=(lane,), daemon=True).start()
        # Waiting on events, not Thread.join: a join interrupted by Ctrl-C marks a thread that is
        # still running as stopped (CPython 3.11's _wait_for_tstate_lock), so a second join returned
        # at once and the caller's cleanup freed a llama.cpp context a thread was decoding in (segfault).
        try:
            for lane in busy:
                done[lane].wait()
        except BaseException:
            # Ctrl-C: the instances stop at their next token, then the caller may free them
            for inst in pool:
                inst.cancel.set()
            for lane in busy:
                done[lane].wait()
            for inst in pool:
                inst.cancel.clear()
            raise
        for res in results:
            if isinstance(res, BaseException):
                raise res
        return results  # type: ignore[return-value]

    def close(self) -> None:
        instances = [b for b in (self._pool or [self._backend]) if isinstance(b, _LlamaCpp)]
        counts = {k: sum(b.counts[k] for b in instances) for k in ("calls", "prompt_evaluated", "prompt_reused", "generated")}
        if counts["calls"]:
            log.info("%s: %d calls, %d prompt tokens evaluated (%d reused from the KV cache), %d tokens generated",
                     self.name, counts["calls"], counts["prompt_evaluated"], counts["prompt_reused"], counts["generated"])
        for b in instances:
            b.close()
        self._backend = None
        self._pool = []

    # --- loading -----------------------------------------------------------------------------------

    def model_path(self) -> Path:
        """The GGUF file the runtime loads (the shipped one, or its requantised copy)."""
        if self._path is None:
            path = resolve_gguf(self.spec.key, self.cache_dir)
            if self.requantize:
                with _quiet_stderr():  # llama.cpp prints a line per tensor
                    path = requantize_gguf(path, self.requantize, self.cache_dir)
            self._path = path
        return self._path

    def metadata(self) -> dict[str, str]:
        """GGUF key/value metadata (strings), read with a vocabulary-only llama.cpp load (~0.1 s)."""
        if self._meta is None:
            Llama = _llama_cpp().Llama
            with _quiet_stderr():
                vocab = Llama(model_path=str(self.model_path()), vocab_only=True, verbose=False)
            self._meta = dict(vocab.metadata)
            vocab.close()
        return self._meta

    def _instances(self) -> "list[_LlamaCpp]":
        """The n_parallel llama.cpp instances (the first is the one `generate` uses), loaded once."""
        first = self._load()
        if not self._pool:
            assert isinstance(first, _LlamaCpp)
            self._pool = [first] + [_LlamaCpp(self.model_path(), self.n_ctx, self.n_threads, self.n_threads_batch, self.seed)
                                    for _ in range(self.n_parallel - 1)]
        return self._pool

    def _load(self) -> "_LlamaCpp | _Transformers":
        if self._backend is None:
            path = self.model_path()
            log.info("loading %s with %s", path, self.runtime)
            if self.runtime == "llama_cpp":
                self._backend = _LlamaCpp(path, self.n_ctx, self.n_threads, self.n_threads_batch, self.seed)
            else:
                self._backend = _Transformers(path, self.n_ctx, self.n_threads, self.seed, self.metadata())
        return self._backend


def _llama_cpp() -> Any:
    """The llama_cpp module, imported with OpenMP's passive wait policy unless the environment sets
    one: llama.cpp's CPU threads are an OpenMP team whose idle members spin by default, and on a
    machine whose cores are busy with other work two spinning threads slowed SmolLM2's prompt
    evaluation ~2x and its generation ~6x (2 loaded cores). libgomp reads the variable once, when
    llama.cpp's libraries load, i.e. at this first import."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp

    return llama_cpp


def _fit_budget(n_prompt: int, max_new_tokens: int, n_ctx: int) -> int:
    room = n_ctx - n_prompt
    if room < 1:
        raise AdapterError(f"prompt of {n_prompt} tokens does not fit the context window n_ctx={n_ctx}")
    return min(max_new_tokens, room)


@contextmanager
def _no_extra_buffer_types() -> Iterator[None]:
    """Load models with llama.cpp's `use_extra_bufts=False`: on CPUs with AMX (Intel Sapphire Rapids
    and later) ggml's AMX matmul, an extra buffer type, segfaults in the first decode of llama-cpp-python
    0.3.36 (seen on this project's 2-core VMs; a Q4_1 SmolLM2 crashes in ggml_backend_amx_mul_mat).
    Llama() has no argument for it, so its default model params are patched for the load only."""
    import llama_cpp.llama as module

    default = module.llama_cpp.llama_model_default_params

    def params() -> Any:
        p = default()
        if hasattr(p, "use_extra_bufts"):  # older llama.cpp builds have no such field
            p.use_extra_bufts = False
        return p

    module.llama_cpp.llama_model_default_params = params
    try:
        yield
    finally:
        module.llama_cpp.llama_model_default_params = default


class _LlamaCpp:
    def __init__(self, path: Path, n_ctx: int, n_threads: int | None, n_threads_batch: int | None, seed: int):
        Llama = _llama_cpp().Llama

        with _quiet_stderr(), _no_extra_buffer_types():  # llama.cpp's C code prints context notes even with verbose=False
            self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                             n_threads_batch=n_threads_batch or n_threads, seed=seed, verbose=False)
        self.n_ctx = n_ctx
        # Work done, for the log line at close: prompt tokens evaluated, prompt tokens whose KV
        # cache was reused from the previous call (the shared system prompt, the turn so far), tokens generated.
        self.counts = {"calls": 0, "prompt_evaluated": 0, "prompt_reused": 0, "generated": 0}
        # The last call's prompt (bytes) and its tokens, the tokens it generated and their text
        # (bytes): a rollout's next prompt is that prompt + the generated text + the harness's insertion.
        self.last: tuple[bytes, list[int], list[int], bytes] = (b"", [], [], b"")
        # set by GGUFPolicy.generate_batch on Ctrl-C: stop generating at the next token
        self.cancel = threading.Event()

    def close(self) -> None:
        """Free llama.cpp's model and context now. An interrupted run's traceback may keep this
        object alive until the interpreter's own teardown, whose order llama.cpp did not survive
        with two instances (exit 139 after Ctrl-C)."""
        self.llm.close()

    def tokenize(self, prompt: str) -> list[int]:
        """The prompt's tokens as `generate` evaluates them: the last call's prompt tokens and the
        tokens it generated, as far as the prompt continues their text, then the rest of the prompt
        tokenised (`_tokenize`). So a rollout continues from the ids the model sampled: re-tokenising
        grammar-decoded text often splits it otherwise, which would both re-evaluate the turn so
        far and show the model ids it never produced."""
        data = prompt.encode("utf-8")
        last_prompt, last_tokens, generated, text = self.last
        if not last_tokens or not data.startswith(last_prompt):
            return self._tokenize(data, bos=True)
        keep, end = len(generated), len(last_prompt) + len(text)  # usually all the generated text is kept
        if not data.startswith(text, len(last_prompt)):
            # only part of it (text after the stop string was dropped): the longest token prefix it keeps
            keep, end = 0, len(last_prompt)
            for i in range(1, len(generated)):
                piece = self.llm.detokenize(generated[:i], prev_tokens=last_tokens)
                if not data.startswith(piece, len(last_prompt)):
                    break
                keep, end = i, len(last_prompt) + len(piece)
        return last_tokens + generated[:keep] + (self._tokenize(data[end:], bos=False) if end < len(data) else [])

    def _tokenize(self, data: bytes, bos: bool) -> list[int]:
        # bos=True defers to the GGUF's add_bos_token; special=True parses the template's
        # control tokens (<|im_start|>, <start_of_turn>) as tokens, as create_completion does.
        return self.llm.tokenize(data, add_bos=bos, special=True)

    def prefix_bytes(self, prompt: str) -> int:
        """How many leading bytes `prompt` shares with the last call's prompt + generated text
        (a request's affinity to this instance's KV cache)."""
        last_prompt, _, _, text = self.last
        return len(os.path.commonprefix([last_prompt + text, prompt.encode("utf-8")]))

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int, grammar: str | None = None) -> Generation:
        import llama_cpp

        llm = self.llm
        tokens = self.tokenize(prompt)
        budget = _fit_budget(len(tokens), max_new_tokens, self.n_ctx)
        reused = _common_prefix(llm._input_ids[: llm.n_tokens], tokens)
        # llama-cpp-python replays one token when the whole prompt is cached (to refresh the logits).
        reused = min(reused, len(tokens) - 1)
        self.counts["calls"] += 1
        self.counts["prompt_reused"] += reused
        self.counts["prompt_evaluated"] += len(tokens) - reused
        out: list[int] = []
        text, matched, reason = "", None, "length"
        # temp=0 selects llama.cpp's greedy sampler; reset=True keeps the KV cache of a shared
        # prefix, so each rollout continuation only evaluates the newly inserted text.
        steps = llm.generate(tokens, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True)
        if grammar:
            steps = _constrained(llm, steps, grammar)
        for token in steps:
            if self.cancel.is_set():
                break
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                reason = "eos"
                break
            out.append(token)
            text = llm.detokenize(out, prev_tokens=tokens).decode("utf-8", errors="ignore")
            head, matched = split_at_stop(text, stop)
            if matched is not None:
                text, reason = head, "stop"
                break
            if len(out) >= budget:
                break
        steps.close()
        self.counts["generated"] += len(out)
        self.last = (prompt.encode("utf-8"), tokens, out, llm.detokenize(out, prev_tokens=tokens) if out else b"")
        return Generation(text=text, stop_reason=reason, matched_stop=matched, n_tokens=len(out))


def _assign(shared: list[list[int]]) -> list[list[int]]:
    """Request indices per instance: pairs (request, instance) are taken longest shared prefix
    first, one request per instance while instances are free; the rest go to the instance with
    the fewest requests. `shared[i][k]`: how much of request i instance k holds (prefix_bytes)."""
    lanes: list[list[int]] = [[] for _ in shared[0]]
    pairs = sorted((-n, i, k) for i, row in enumerate(shared) for k, n in enumerate(row))
    placed: set[int] = set()
    for _, i, k in pairs:
        if i not in placed and not lanes[k]:
            lanes[k].append(i)
            placed.add(i)
    for i in range(len(shared)):
        if i not in placed:
            min(lanes, key=len).append(i)
    return lanes


def _common_prefix(a: Any, b: list[int]) -> int:
    """Length of the common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


_TOP_K = 32  # candidates tried against the grammar before it masks the whole vocabulary
_DRAFT_NGRAM = 3  # prompt-lookup drafting: tokens that must match earlier text before its continuation is proposed
_DRAFT_TOKENS = 4  # tokens proposed at most per draft (batches of 5 were cheapest on 2 busy cores)


def _constrained(llm: Any, steps: Iterator[int], grammar: str) -> Iterator[int]:
    """Greedy decoding under a GBNF `grammar`, token by token: the highest-logit token the grammar
    accepts (llama.cpp's grammar sampler). `steps` (an unconstrained llm.generate) is advanced once
    to evaluate the prompt with its KV-cache prefix reuse; its greedy token is discarded.

    The grammar is applied to the best _TOP_K candidates first and to the whole vocabulary only
    when none of them is allowed: the same token as masking everything (greedy picks the best
    allowed), without a full-vocabulary grammar pass at every step.

    Prompt-lookup drafting (speculative decoding without a draft model): where the last
    _DRAFT_NGRAM tokens occurred earlier in the context, the tokens that followed them there are
    evaluated together with the next token in one batch, and each is kept only while it is the
    token greedy decoding under the grammar chooses from that batch's logits; the rest leave the KV
    cache. The output is greedy decoding's (up to the float rounding of batched evaluation), but a
    135M policy copies much of the prompt (the worked example's plan and code, the query) and
    evaluating copied runs in batches is several times cheaper than token by token.
    Raises AdapterError when llama.cpp cannot parse the grammar."""
    import ctypes

    import llama_cpp
    import numpy as np

    vocab = llm._model.vocab
    smpl = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    if not smpl:
        steps.close()
        raise AdapterError("llama.cpp could not parse the decoding grammar (policy.decoding=grammar)")
    n_vocab = llm.n_vocab()
    data = (llama_cpp.llama_token_data * n_vocab)()
    view = np.frombuffer(data, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))

    def allowed(ids: np.ndarray, logits: np.ndarray) -> int | None:
        n = len(ids)
        view["id"][:n], view["logit"][:n], view["p"][:n] = ids, logits, 0.0
        arr = llama_cpp.llama_token_data_array(data=data, size=n, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(smpl, ctypes.byref(arr))
        kept = view["logit"][:n]
        ok = np.isfinite(kept)
        if not ok.any():
            return None
        return int(view["id"][:n][ok][np.argmax(kept[ok])])

    def choose(i: int) -> int:
        """The greedy allowed token after the i-th token of the last batch; accepted by the grammar."""
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, i), shape=(n_vocab,))
        top = np.argpartition(-logits, _TOP_K)[:_TOP_K].astype(np.intc)
        token = allowed(top, logits[top])
        if token is None:
            token = allowed(np.arange(n_vocab, dtype=np.intc), logits)
        if token is None:
            raise AdapterError("the decoding grammar allows no token here (policy.decoding=grammar)")
        llama_cpp.llama_sampler_accept(smpl, token)
        return token

    try:
        next(steps)  # evaluates the prompt (prefix reuse); the unconstrained choice is dropped
        steps.close()
        token = choose(-1)
        while True:
            yield token
            room = llm.n_ctx() - llm.n_tokens - 1
            draft = _lookup(llm.input_ids[: llm.n_tokens], token, min(_DRAFT_TOKENS, room, llm.n_batch - 1))
            base = _eval_all(llm, [token, *draft])
            for i, proposed in enumerate(draft):
                token = choose(i)
                if token != proposed:
                    # the draft's tokens after i are not the continuation: drop them from the KV cache
                    llm._ctx.kv_cache_seq_rm(-1, base + i + 1, -1)
                    llm.n_tokens = base + i + 1
                    break
                yield token
            else:
                token = choose(len(draft))
    finally:
        llama_cpp.llama_sampler_free(smpl)


def _lookup(context: Any, token: int, limit: int) -> list[int]:
    """Prompt-lookup draft: the up to `limit` tokens that followed the latest earlier occurrence of
    the last _DRAFT_NGRAM tokens of context + [token], or [] when they occur nowhere before."""
    import numpy as np

    if limit < 1 or len(context) < _DRAFT_NGRAM:
        return []
    ids = np.append(np.asarray(context, dtype=np.intc), np.intc(token))
    tail = ids[-_DRAFT_NGRAM:]
    windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], _DRAFT_NGRAM)
    hits = np.nonzero((windows == tail).all(axis=1))[0]
    if not len(hits):
        return []
    start = int(hits[-1]) + _DRAFT_NGRAM
    return [int(t) for t in ids[start:start + limit]]


def _eval_all(llm: Any, tokens: list[int]) -> int:
    """Evaluate `tokens` after the KV cache's llm.n_tokens in one batch, with logits at every
    position (llama_get_logits_ith(ctx, i) for the i-th); returns the position of the first."""
    n_past = llm.n_tokens
    llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past:n_past + len(tokens)] = tokens
    llm.n_tokens = n_past + len(tokens)
    return n_past


class _Transformers:
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
        # Same token sequence as llama.cpp: no tokenizer-added specials, BOS iff the GGUF says so.
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        budget = _fit_budget(len(ids), max_new_tokens, self.n_ctx)
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


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (C-level writes) for the duration; Python's own errors still raise."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
