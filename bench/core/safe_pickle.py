"""Benchmark pickles read without running code: a restricted unpickler for data files such as
REFER's ``refs(unc).p`` (RefCOCO/+/g) and VISA's Ref-DAVIS17 ``mask_dict.pkl``.

A pickle may name any importable callable and have the unpickler call it (``__reduce__``); a
benchmark file must never be able to run code. ``load`` accepts only the opcodes that build plain
containers and numbers (dict, list, tuple, str, bytes, int, float, bool, None; these need no global)
and these globals:

- ``builtins.set``, ``frozenset``, ``bytearray``, ``complex`` (protocol 0-2 pickles build them by name);
- ``_codecs.encode(str, "latin1")``: how a protocol 2 pickle written by Python 3 stores ``bytes``
  (pycocotools RLE ``counts`` in VISA's mask dict); any other codec is refused when it is called.

Any other global (``os.system``, ``numpy.core.multiarray._reconstruct``, a class), a persistent id or
an extension code raises ``DatasetFormatError`` naming the file and the global, before anything is
called. Truncated or malformed input is DatasetFormatError too. Nothing else is imported.
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from rvt_bench.core.types import DatasetFormatError

_BUILTINS = {"set": set, "frozenset": frozenset, "bytearray": bytearray, "complex": complex}


def _latin1_encode(text: Any, encoding: str = "utf-8", *rest: Any) -> bytes:
    """``_codecs.encode`` restricted to what Python 3 writes for bytes in protocol 0-2: (str, "latin1")."""
    if rest or not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"_codecs.encode is accepted only as (str, 'latin1'), got encoding {encoding!r}")
    return text.encode("latin1")


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__") and name in _BUILTINS:
            return _BUILTINS[name]
        if module == "_codecs" and name == "encode":
            return _latin1_encode
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed (only plain containers and numbers)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed (only plain containers and numbers)")


def loads(data: bytes, *, source: str = "<bytes>") -> Any:
    """Unpickle ``data`` with only plain containers and numbers (module docstring).

    Raises DatasetFormatError "<source>: not a plain-data pickle (...)" for any forbidden global,
    persistent id or extension, and "<source>: not a readable pickle (...)" for malformed input.
    """
    try:
        return _Restricted(io.BytesIO(data), encoding="latin1").load()
    except pickle.UnpicklingError as exc:
        raise DatasetFormatError(f"{source}: not a plain-data pickle ({exc}); a benchmark pickle may hold only "
                                 f"containers and numbers, and nothing in it is imported or called") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
            MemoryError, RecursionError, UnicodeError) as exc:
        raise DatasetFormatError(f"{source}: not a readable pickle ({type(exc).__name__}: {exc})") from None


def load(path: str | Path) -> Any:
    """``loads`` of the file at ``path``. Raises DatasetFormatError as ``loads``, and when the
    file cannot be read (naming it)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetFormatError(f"{path}: cannot read the pickle ({exc.strerror or exc})") from None
    return loads(data, source=str(path))
