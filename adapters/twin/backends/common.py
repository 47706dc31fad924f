"""What every model backend of the twin shares: device/dtype choice, lazy loading, fingerprints.

A backend wraps one foundation model (SAM2, DepthAnything V2, OWLv2, Qwen2.5-VL). It is cheap to
construct (Hydra builds it from conf/perception/*.yaml): the weights load on the first call, from
``model_id`` (a Hugging Face hub id, or a local directory) at ``revision``. Tests and offline runs
inject tiny random-weight models through ``from_components`` / each backend's ``tiny``.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any, Iterator

from rvt_bench.core.types import AdapterError, first_line


def resolve_device(device: str) -> str:
    """"auto" -> "cuda" when torch sees a GPU, else "cpu"; any other string is returned as is."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> Any:
    """"auto" -> torch.bfloat16 on CUDA, torch.float32 elsewhere; else the torch dtype of that name
    ("float32", "float16", "bfloat16"). Raises AdapterError on another name."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype):
        raise AdapterError(f"unknown torch dtype {dtype!r}; expected auto, float32, float16 or bfloat16")
    return value


def local_revision(model_id: str) -> str | None:
    """For a local model directory: "local-" + SHA-256 (16 hex) of its files' relative names, sizes
    and modification times, so that retrained weights at the same path miss the cache. None for a
    hub id (not an existing directory)."""
    root = Path(model_id)
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return "local-" + h.hexdigest()[:16]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's CPU RNG seeded, restoring the caller's RNG state afterwards
    (tiny random models are then the same in every process)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class ModelBackend:
    """Base of the model backends.

    model_id: hub id or local directory. revision: hub revision (branch, tag or commit); for a local
    directory the effective revision is ``local_revision``. device: "auto" | "cpu" | "cuda[:i]".
    dtype: "auto" | "float32" | "float16" | "bfloat16". params: the knobs that change outputs
    (thresholds, prompts, sizes), part of the fingerprint and hence of every cache key.
    """

    name = "backend"
    loads_in_dtype = False
    """True where ``load`` already builds the model in ``dtype`` (``from_pretrained(dtype=...)``, as
    the authors' code loads it): components() then only moves it to the device. A later
    ``.to(dtype=bfloat16)`` would also cast the float32 rotary ``inv_freq`` buffers that
    from_pretrained keeps, and every position's angle would move."""

    def __init__(self, model_id: str, revision: str = "main", device: str = "auto", dtype: str = "auto",
                 **params: Any):
        self.model_id = str(model_id)
        self.revision = str(revision)
        self.device_spec = device
        self.dtype_spec = dtype
        self.params = dict(params)
        self._components: tuple[Any, Any] | None = None
        self._placed = False

    @classmethod
    def from_components(cls, model: Any, processor: Any, model_id: str, revision: str, **kwargs: Any):
        """A backend around an already built (model, processor), e.g. a tiny random model; the
        model is moved to the backend's device and put in eval mode on first use."""
        backend = cls(model_id=model_id, revision=revision, **kwargs)
        backend._components = (model, processor)
        return backend

    @property
    def device(self) -> str:
        return resolve_device(self.device_spec)

    def fingerprint(self) -> dict:
        """{backend, model_id, revision, params}: what identifies this backend's outputs."""
        revision = local_revision(self.model_id) or self.revision
        return {"backend": self.name, "model_id": self.model_id, "revision": revision, "params": self.params}

    def components(self) -> tuple[Any, Any]:
        """(model, processor), loaded on first use and placed on ``device``; raises AdapterError
        naming the model id when loading fails (e.g. no network for a hub id not in the HF cache)."""
        if self._components is None:
            try:
                model, processor = self.load()
            except (OSError, ValueError) as exc:
                raise AdapterError(f"{self.name}: cannot load {self.model_id!r} at revision "
                                   f"{self.revision!r}: {exc}") from exc
            if self.loads_in_dtype:
                model = model.to(self.device)
            else:
                model = model.to(self.device, dtype=resolve_dtype(self.dtype_spec, self.device))
            self._components = (model.eval(), processor)
            self._placed = True
        elif not self._placed:
            model, processor = self._components
            self._components = (model.to(self.device).eval(), processor)
            self._placed = True
        return self._components

    def preflight(self) -> None:
        """Check, without loading anything, that the weights can be had: already built, a local
        directory that exists, or a hub id in the local Hugging Face cache, else a hub that answers.
        Raises AdapterError (one line, naming the model id and the setting) otherwise, so a run
        without the weights and without network stops before its first sample."""
        if self._components is not None or os.path.isdir(self.model_id):
            return
        if os.path.isabs(self.model_id) or self.model_id.startswith("."):
            raise AdapterError(f"{self.name}: model directory {self.model_id} does not exist")
        from huggingface_hub import HfApi, snapshot_download

        try:
            snapshot_download(self.model_id, revision=self.revision, local_files_only=True)
            return
        except Exception:  # huggingface_hub raises several types for "not in the cache"
            pass
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        reason = "HF_HUB_OFFLINE is set"
        if not offline:
            try:
                HfApi().model_info(self.model_id, revision=self.revision, timeout=10)
                return
            except Exception as exc:  # no network, unknown repo, gated repo
                reason = f"the hub cannot be reached or refuses it: {first_line(exc)}"
        raise AdapterError(f"{self.name}: the weights of {self.model_id!r} (revision {self.revision!r}) are not in the "
                           f"local Hugging Face cache and {reason}; download them once on a machine with network "
                           f"(huggingface-cli download {self.model_id}) or set the backend's model_id to a local directory")

    def load(self) -> tuple[Any, Any]:
        """Load (model, processor) from ``model_id`` / ``revision``; subclasses implement."""
        raise NotImplementedError

    def hub_kwargs(self) -> dict:
        """Keyword arguments for ``from_pretrained``: the revision (ignored for a local directory)."""
        return {} if os.path.isdir(self.model_id) else {"revision": self.revision}
