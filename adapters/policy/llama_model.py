"""A GGUF model and one llama.cpp context over it (llama_lib), with the token bookkeeping of
llama-cpp-python's `Llama` that the embedded policy relied on: the ids in the KV cache
(`ids[:n_tokens]`), prompt evaluation in `n_batch` chunks with logits at each chunk's last
token, and greedy continuation that reuses the longest cached prefix of a prompt."""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Iterator

import numpy as np

from rvt_bench.adapters.policy import llama_lib
from rvt_bench.core.types import AdapterError

N_BATCH = 512  # llama-cpp-python's default logical and physical batch (n_batch = n_ubatch = 512)


class LlamaModel:
    """A GGUF file loaded by llama.cpp (weights memory-mapped; `vocab_only` loads the vocabulary
    and metadata only, ~0.1 s). `use_extra_bufts=False` leaves out ggml's extra buffer types
    (CPU repacking, AMX): the AMX one segfaulted in the first decode on Sapphire Rapids VMs with
    llama-cpp-python 0.3.36's native build. Raises AdapterError when llama.cpp cannot load it."""

    def __init__(self, path: Path, vocab_only: bool = False, use_extra_bufts: bool = False):
        self.lib = lib = llama_lib.load() if vocab_only else llama_lib.load_cpu_backend()
        params = lib.llama_model_default_params()
        params.n_gpu_layers = 0
        params.load_mode = llama_lib.LLAMA_LOAD_MODE_MMAP
        params.vocab_only = vocab_only
        params.use_extra_bufts = use_extra_bufts
        with llama_lib.quiet_stderr():
            self.model = lib.llama_model_load_from_file(str(path).encode(), params)
        if not self.model:
            raise AdapterError(f"llama.cpp could not load {path}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.bos = lib.llama_vocab_bos(self.vocab)

    def close(self) -> None:
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None

    def metadata(self) -> dict[str, str]:
        """GGUF key/value metadata as llama.cpp renders them as strings."""
        out: dict[str, str] = {}
        for i in range(self.lib.llama_model_meta_count(self.model)):
            out[self._meta_str(self.lib.llama_model_meta_key_by_index, i)] = self._meta_str(
                self.lib.llama_model_meta_val_str_by_index, i)
        return out

    def _meta_str(self, fn, i: int) -> str:
        size = 1024
        while True:
            buf = ctypes.create_string_buffer(size)
            n = fn(self.model, i, buf, size)
            if n < size:
                return buf.value.decode("utf-8")
            size = n + 1

    def tokenize(self, data: bytes, add_bos: bool, special: bool = True) -> list[int]:
        """Token ids of `data`. add_bos=True adds BOS where the GGUF says so (add_bos_token);
        special=True parses control-token text (<|im_start|>) as the control tokens."""
        size = len(data) + 2
        while True:
            out = (llama_lib.llama_token * size)()
            n = self.lib.llama_tokenize(self.vocab, data, len(data), out, size, add_bos, special)
            if n >= 0:
                return list(out[:n])
            size = -n

    def piece(self, token: int) -> bytes:
        """The text of one token; control tokens render empty."""
        buf = ctypes.create_string_buffer(64)
        n = self.lib.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self.lib.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
        return buf.raw[:n]

    def detokenize(self, tokens: list[int]) -> bytes:
        """The text of `tokens` as llama-cpp-python's `Llama.detokenize` gives it: the pieces
        joined, a leading space after BOS dropped."""
        text = b"".join(self.piece(t) for t in tokens)
        return text[1:] if tokens and tokens[0] == self.bos and text[:1] == b" " else text

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))


class LlamaContext:
    """One sequence's KV cache over `model`: `ids[:n_tokens]` are the tokens it holds.

    n_threads / n_threads_batch: CPU threads for single-token steps / prompt batches. Flash
    attention is off (measured slower for 1-5 token steps at ~1.5k context)."""

    def __init__(self, model: LlamaModel, n_ctx: int, n_threads: int, n_threads_batch: int):
        lib = self.lib = model.lib
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = min(n_ctx, N_BATCH)
        params.n_threads, params.n_threads_batch = n_threads, n_threads_batch
        params.flash_attn_type = llama_lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        with llama_lib.quiet_stderr():
            self.ctx = lib.llama_init_from_model(model.model, params)
        if not self.ctx:
            raise AdapterError(f"llama.cpp could not create a context of n_ctx={n_ctx}")
        self.model = model
        self.n_ctx = lib.llama_n_ctx(self.ctx)
        self.n_batch = lib.llama_n_batch(self.ctx)
        self.memory = lib.llama_get_memory(self.ctx)
        self.batch = lib.llama_batch_init(self.n_batch, 0, 1)
        self.ids = np.zeros(self.n_ctx, dtype=np.intc)
        self.n_tokens = 0

    def close(self) -> None:
        if self.ctx:
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.ctx)
            self.ctx = None

    def truncate(self, n: int) -> None:
        """Keep the first n tokens of the KV cache."""
        self.lib.llama_memory_seq_rm(self.memory, -1, n, -1)
        self.n_tokens = n

    def decode(self, tokens: list[int], logits_all: bool) -> int:
        """Evaluate `tokens` after the cache's n_tokens in one batch (len <= n_batch), with logits
        at every position (`logits_all`) or at the last; returns the position of the first."""
        n_past, batch = self.n_tokens, self.batch
        self.lib.llama_memory_seq_rm(self.memory, -1, n_past, -1)
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = n_past + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = logits_all
        batch.logits[len(tokens) - 1] = True
        rc = self.lib.llama_decode(self.ctx, batch)
        if rc != 0:
            raise AdapterError(f"llama.cpp decode failed (code {rc}) at position {n_past} of n_ctx={self.n_ctx}")
        self.ids[n_past:n_past + len(tokens)] = tokens
        self.n_tokens = n_past + len(tokens)
        return n_past

    def eval(self, tokens: list[int]) -> None:
        """Evaluate a prompt's `tokens` in n_batch chunks, logits at each chunk's last token."""
        for i in range(0, len(tokens), self.n_batch):
            self.decode(tokens[i:i + self.n_batch], logits_all=False)

    def logits(self, i: int) -> np.ndarray:
        """The logits after the i-th token of the last batch (-1: its last), a view of n_vocab floats."""
        return np.ctypeslib.as_array(self.lib.llama_get_logits_ith(self.ctx, i), shape=(self.model.n_vocab,))

    def prefill(self, tokens: list[int]) -> int:
        """Evaluate `tokens` reusing the longest cached prefix of all but its last token (which is
        always evaluated, for fresh logits); returns the number of tokens reused."""
        reused = common_prefix(self.ids[:self.n_tokens], tokens[:-1])
        self.truncate(reused)
        self.eval(tokens[reused:])
        return reused

    def greedy(self, tokens: list[int]) -> Iterator[int]:
        """Greedy continuation of `tokens` (prefix reuse as `prefill`), one token per step."""
        self.prefill(tokens)
        while True:
            token = int(np.argmax(self.logits(-1)))
            yield token
            self.decode([token], logits_all=False)


def common_prefix(a: np.ndarray, b: list[int]) -> int:
    """Length of the common prefix of two token sequences."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.nonzero(a[:n] != np.asarray(b[:n], dtype=np.intc))[0]
    return int(diff[0]) if len(diff) else n
