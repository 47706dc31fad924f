"""Content-addressed disk cache of vision-tool outputs, so that a second run or another sweep point
with the same perception does no model work.

A cache key is the SHA-256 of the canonical JSON of (video digest, tool, model fingerprint
{model_id, revision, ...}, params). The video digest (``video_digest``) hashes the bytes of the
sample's frame files in temporal order, so a renamed or re-split dataset still hits and an edited
frame misses. A value is a dict whose leaves are JSON scalars, lists, dicts or NumPy arrays; it is
stored as one ``.npz`` file (arrays as entries, the rest as a JSON entry) under
``<root>/<key[:2]>/<key>.npz``.

Concurrency: a value is written to a temporary file in the same directory and moved into place
with ``os.replace`` (atomic on POSIX), so concurrent shards computing the same key each publish a
complete file and a reader never sees a partial one; the last writer wins with identical content.
An unreadable entry (torn by a crash of an older writer, or foreign) is logged, treated as a miss
and overwritten.

The value a caller gets back on a miss is the stored-and-decoded value, never the raw computed
one, so a first run and a cache hit see bit-identical data (e.g. float16 depth maps in both).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rvt_bench.core.store import write_atomic
from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError

log = logging.getLogger(__name__)

CACHE_VERSION = 1
_JSON_ENTRY = "__json__"
_ARRAY_TAG = "__ndarray__"


def video_digest(frames: list[str]) -> str:
    """SHA-256 hex digest of the frame files' bytes in order (with each file's length, so that
    concatenations cannot collide). Raises AdapterError naming the file when one cannot be read."""
    h = hashlib.sha256()
    h.update(f"frames:{len(frames)}".encode())
    for path in frames:
        try:
            data = files.read_bytes(path, "frame")
        except (OSError, DatasetFormatError) as exc:
            raise AdapterError(f"cannot read frame {path} to address the perception cache: {exc}") from exc
        h.update(f"\n{len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()


def cache_key(video: str, tool: str, model: dict, params: dict) -> str:
    """SHA-256 hex key of (video digest, tool, model fingerprint, params); dict order does not
    matter. Raises AdapterError when model or params hold something that is not JSON."""
    record = {"v": CACHE_VERSION, "video": video, "tool": tool, "model": model, "params": params}
    try:
        canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (TypeError, ValueError) as exc:
        raise AdapterError(f"cache key of tool {tool!r}: model/params are not JSON ({exc})") from exc
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class CacheStats:
    """Counts since the cache object was made: ``hits``, ``misses`` (computed and stored),
    ``corrupt`` (unreadable entries that were recomputed)."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0


class ToolCache:
    """The on-disk cache (see module docstring).

    root:    directory of the entries (created on first write); Hydra config
             ``perception.cache.root``.
    enabled: False turns every lookup into a miss that is not stored (for timing the models).
    """

    def __init__(self, root: str | os.PathLike, enabled: bool = True):
        self.root = Path(root)
        self.enabled = bool(enabled)
        self.stats = CacheStats()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def get(self, key: str) -> dict | None:
        """The stored value of ``key``, or None when absent, disabled or unreadable."""
        if not self.enabled:
            return None
        path = self.path(key)
        if not path.exists():
            return None
        try:
            return _decode(files.read_bytes(path, "perception cache entry"))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, DatasetFormatError) as exc:
            log.warning("perception cache entry %s is unreadable (%s); recomputing", path, exc)
            self.stats.corrupt += 1
            return None

    def put(self, key: str, value: dict) -> dict:
        """Store ``value`` atomically and return it as a later ``get`` will (decoded from the bytes
        written). Raises AdapterError when the value is not a dict of JSON/NumPy leaves."""
        blob = _encode(value)
        decoded = _decode(blob)
        if not self.enabled:
            return decoded
        write_atomic(self.path(key), blob)
        return decoded

    def get_or_compute(self, key: str, compute: Callable[[], dict]) -> tuple[dict, bool]:
        """(value, hit): the stored value when present, else ``compute()`` stored and decoded."""
        found = self.get(key)
        if found is not None:
            self.stats.hits += 1
            return found, True
        self.stats.misses += 1
        return self.put(key, compute()), False


def _encode(value: dict) -> bytes:
    if not isinstance(value, dict):
        raise AdapterError(f"perception cache values must be dicts, got {type(value).__name__}")
    arrays: dict[str, np.ndarray] = {}

    def strip(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            name = f"a{len(arrays)}"
            arrays[name] = v
            return {_ARRAY_TAG: name}
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise AdapterError(f"perception cache value has a non-str key among {list(v)[:5]}")
            return {k: strip(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [strip(x) for x in v]
        if isinstance(v, (np.floating, np.integer, np.bool_)):
            return v.item()
        if v is None or isinstance(v, (str, int, float, bool)):
            return v
        raise AdapterError(f"perception cache value holds a {type(v).__name__}, expected JSON or ndarray")

    meta = json.dumps(strip(value), separators=(",", ":"), allow_nan=True).encode()
    buf = io.BytesIO()
    np.savez_compressed(buf, **{_JSON_ENTRY: np.frombuffer(meta, dtype=np.uint8)}, **arrays)
    return buf.getvalue()


def _decode(blob: bytes) -> dict:
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        meta = json.loads(npz[_JSON_ENTRY].tobytes().decode())
        arrays = {k: npz[k] for k in npz.files if k != _JSON_ENTRY}

    def fill(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {_ARRAY_TAG}:
                return arrays[v[_ARRAY_TAG]]
            return {k: fill(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fill(x) for x in v]
        return v

    return fill(meta)
