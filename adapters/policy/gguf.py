"""Embedded offline policy: a small GGUF model from an installed package, run on the CPU.

Two runtimes, chosen by `runtime`:
- "llama_cpp" (default): llama.cpp's C API from a prebuilt wheel (rvt_bench.adapters.policy.llama_lib);
  greedy decoding token by token (gguf_instance), so that the stop string that matched,
  end-of-turn and the length limit are told apart exactly; n_parallel instances decode a batch
  in parallel (gguf_pool); grammar decoding with prompt-lookup drafts (gguf_grammar).
- "transformers": `AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)` (dequantised to
  float32), greedy `generate` with `stop_strings=` (gguf_transformers).
Both render prompts with the GGUF's chat template (rvt_bench.adapters.policy.chat), so a prompt is the same
string in both; only tokenisation and arithmetic differ.

Models load on the first `generate` (or `render`, which needs the GGUF's metadata), never at
construction: a resumed run with nothing left to do loads nothing.
"""
from __future__ import annotations

import logging
from pathlib import Path

from rvt_bench.adapters.policy import llama_lib
from rvt_bench.adapters.policy.base import Generation, Policy, Request, check_decoding
from rvt_bench.adapters.policy.chat import render_chat
from rvt_bench.adapters.policy.gguf_files import REQUANTIZE_TYPES, get_model, requantize_gguf, resolve_gguf
from rvt_bench.adapters.policy.gguf_instance import LlamaInstance
from rvt_bench.adapters.policy.gguf_pool import generate_parallel
from rvt_bench.adapters.policy.gguf_transformers import TransformersRuntime
from rvt_bench.adapters.policy.llama_model import LlamaModel
from rvt_bench.core.types import AdapterError

log = logging.getLogger(__name__)

RUNTIMES = ("llama_cpp", "transformers")


class GGUFPolicy(Policy):
    """A GGUF model of rvt_bench.adapters.policy.gguf_files.MODELS behind the Policy interface.

    model:         registry key ("smollm2", "gemma3_270m").
    runtime:       "llama_cpp" | "transformers".
    n_ctx:         context window in tokens (prompt + generation); a longer prompt raises AdapterError.
    n_threads:     CPU threads generating tokens (llama_cpp: None = half the cores; transformers uses
                   torch's setting when None).
    n_threads_batch: CPU threads evaluating prompts (llama_cpp only; None = n_threads, or all cores
                   when both are None). A 135M model generates no faster on 2 threads than on 1, and
                   on a busy machine much slower.
    seed:          RNG seed of the transformers runtime (decoding is greedy; llama.cpp's greedy
                   decoding draws no random numbers).
    chat_template: None = the GGUF's `tokenizer.chat_template`; else a Jinja2 template or a name
                   from rvt_bench.adapters.policy.chat.NAMED_TEMPLATES, required when the GGUF has none.
    cache_dir:     where chunked models are assembled and weights requantised (None = ~/.cache/rvt-bench/gguf,
                   moved by RVT_BENCH_CACHE or XDG_CACHE_HOME: rvt_bench.core.paths.cache_root).
    decoding:      "free" | "grammar": constrain each continuation to the request's GBNF grammar
                   (llama.cpp's grammar sampler; the transformers runtime: xgrammar).
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
    prefix_cache:  True (default): a prompt reuses the KV cache of the longest prefix its instance
                   already holds (llama_cpp: the shared system prompt and worked example once per
                   instance, a rollout's earlier rounds; transformers: the same, from a copy of the
                   cached prefix), so each call prefills only its new tokens; False: every prompt
                   is prefilled whole (for timing what the cache saves,
                   perf/demo_cost.py). Prefilling whole evaluates the prompt in other batch shapes
                   than the cached path did, which rounds differently: greedy text can change (5
                   of the demo's 10 rollouts did), so the setting is in the fingerprint where it
                   differs from what the runtime did before it existed (llama_cpp: off; the
                   transformers runtime, which prefilled whole before: on).
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
        prefix_cache: bool = True,
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
        self._pool: list[LlamaInstance] = []
        self.requantize = requantize
        if requantize is not None and runtime != "llama_cpp":
            raise AdapterError("policy requantize is a llama_cpp option (runtime=llama_cpp)")
        if requantize is not None and requantize not in REQUANTIZE_TYPES:
            raise AdapterError(f"policy requantize={requantize!r}: expected null or one of {list(REQUANTIZE_TYPES)}")
        if not isinstance(prefix_cache, bool):
            raise AdapterError(f"policy prefix_cache={prefix_cache!r}: expected true or false")
        self.prefix_cache = prefix_cache
        self._path: Path | None = None
        self._meta: dict[str, str] | None = None
        self._backend: LlamaInstance | TransformersRuntime | None = None

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
            # llama_cpp: a rollout's next prompt continues from the ids the model sampled (tokenize),
            # computed by llama.cpp's release llama_lib.BUILD (another build rounds differently).
            **({"continuation": "sampled_ids", "llama_cpp": llama_lib.BUILD} if self.runtime == "llama_cpp" else {}),
            # Only when set, so the fingerprints (run names) of configurations without them stay.
            **({"requantize": self.requantize} if self.requantize else {}),
            **self._cache_fingerprint(),
        }

    def _cache_fingerprint(self) -> dict:
        """llama_cpp reused its KV cache in every run before the setting: only off is named. The
        transformers runtime prefilled every prompt whole before it: on is named (its cached path
        evaluates new tokens in other shapes, which may round otherwise)."""
        if self.runtime == "llama_cpp":
            return {} if self.prefix_cache else {"prefix_cache": False}
        return {"prefix_cache": True} if self.prefix_cache else {}

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        template = self.chat_template or self.metadata().get("tokenizer.chat_template")
        if not template:
            raise AdapterError(
                f"{self.spec.filename} has no tokenizer.chat_template; set chat_template in the policy config"
            )
        return render_chat(template, messages, assistant_prefix)

    def preflight(self) -> None:
        """The weights package, the runtime's libraries (llama.cpp's CPU backend on this CPU) and the
        chat template, checked once before the first sample; raises AdapterError naming what is missing."""
        if self.runtime == "llama_cpp":
            llama_lib.load_cpu_backend()
        super().preflight()

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
        return generate_parallel(self._instances(), requests)

    def close(self) -> None:
        instances = [b for b in (self._pool or [self._backend]) if isinstance(b, LlamaInstance)]
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
                path = requantize_gguf(path, self.requantize, self.cache_dir)
            self._path = path
        return self._path

    def metadata(self) -> dict[str, str]:
        """GGUF key/value metadata (strings), read with a vocabulary-only llama.cpp load (~0.1 s)."""
        if self._meta is None:
            vocab = LlamaModel(self.model_path(), vocab_only=True)
            self._meta = vocab.metadata()
            vocab.close()
        return self._meta

    def _instances(self) -> list[LlamaInstance]:
        """The n_parallel llama.cpp instances (the first is the one `generate` uses), loaded once."""
        first = self._load()
        if not self._pool:
            assert isinstance(first, LlamaInstance)
            self._pool = [first] + [LlamaInstance(self.model_path(), self.n_ctx, self.n_threads, self.n_threads_batch,
                                                  self.prefix_cache)
                                    for _ in range(self.n_parallel - 1)]
        return self._pool

    def _load(self) -> LlamaInstance | TransformersRuntime:
        if self._backend is None:
            path = self.model_path()
            log.info("loading %s with %s", path, self.runtime)
            if self.runtime == "llama_cpp":
                self._backend = LlamaInstance(path, self.n_ctx, self.n_threads, self.n_threads_batch, self.prefix_cache)
            else:
                self._backend = TransformersRuntime(path, self.n_ctx, self.n_threads, self.seed, self.metadata(),
                                                   self.prefix_cache)
        return self._backend
