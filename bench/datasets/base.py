"""What every dataset loader shares: the sequence-of-samples behaviour and checked file access.

A dataset is a class that Hydra instantiates from ``conf/dataset/<name>.yaml`` with plain keyword
arguments (``root``, ``split``, options; an unknown keyword is a TypeError from the constructor).
It reads its index eagerly and then behaves as an immutable, deterministically ordered sequence of
``bench.types.Sample``; frames stay on disk and load lazily through ``bench.frames``.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from bench.types import DatasetFormatError, Sample


class Dataset(Sequence[Sample]):
    """A loaded benchmark split: ``len(ds)``, ``ds[i]``, ``iter(ds)`` over ``Sample`` in a fixed order.

    Subclasses set ``name`` and fill ``self._samples`` in their constructor.
    """

    name: str = ""

    def __init__(self, samples: list[Sample] | None = None) -> None:
        self._samples: list[Sample] = list(samples or [])

    def __len__(self) -> int:
        return len(self._samples)

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        return self._samples[index]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self._samples)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, samples={len(self)})"


def require_dir(path: Path, *, dataset: str, layout: str, published: str) -> Path:
    """Return ``path`` if it is a directory, else raise DatasetFormatError that says which directory
    was expected, the layout expected inside it and where the data is published."""
    if not path.is_dir():
        raise DatasetFormatError(
            f"{dataset}: expected the dataset directory {path} (not found or not a directory).\n"
            f"Expected layout inside it:\n{layout}\nThe data is published at {published}"
        )
    return path


def require_file(path: Path, *, dataset: str, layout: str, published: str) -> Path:
    """Return ``path`` if it is a file, else raise DatasetFormatError like ``require_dir``."""
    if not path.is_file():
        raise DatasetFormatError(
            f"{dataset}: expected the file {path} (not found).\n"
            f"Expected layout:\n{layout}\nThe data is published at {published}"
        )
    return path


def read_json(path: Path, encodings: Sequence[str] = ("utf-8",)) -> Any:
    """Parse a JSON file, trying ``encodings`` in order (LISA reads ReasonSeg as UTF-8, then cp1252).

    Raises DatasetFormatError naming the file when it is missing, undecodable or not JSON.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetFormatError(f"cannot read {path}: {exc}") from exc
    last: Exception | None = None
    for encoding in encodings:
        try:
            return json.loads(raw.decode(encoding))
        except UnicodeDecodeError as exc:
            last = exc
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{path} is not valid JSON: {exc}") from exc
    raise DatasetFormatError(f"{path} is not text in any of {list(encodings)}: {last}")


def require_keys(record: Any, keys: Sequence[str], where: str) -> None:
    """Raise DatasetFormatError naming ``where`` when ``record`` is not a dict holding every key."""
    if not isinstance(record, dict):
        raise DatasetFormatError(f"{where}: expected a JSON object with keys {list(keys)}, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise DatasetFormatError(f"{where}: missing keys {missing}; expected {list(keys)}")
