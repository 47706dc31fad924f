"""What every dataset loader shares: the sequence-of-samples behaviour and checked file access.

A dataset is a class that Hydra instantiates from ``conf/dataset/<name>.yaml`` with plain keyword
arguments (``root``, ``split``, options; an unknown keyword is a TypeError from the constructor).
It reads its index eagerly and then behaves as an immutable, deterministically ordered sequence of
``rvt_bench.core.types.Sample``; frames stay on disk and load lazily through ``rvt_bench.core.frames``.

Bad data is handled at two levels, the same way in every loader:
- a problem that makes the whole dataset unusable (missing root, missing index / meta file, unknown
  split, a split holding no annotation, a configuration that matches nothing) raises
  ``rvt_bench.core.types.DatasetFormatError`` from the constructor, naming the file and what was expected;
- a problem confined to one sample (an unreadable image, a malformed annotation file or record, a
  corrupt or wrongly sized mask) leaves that sample out: it is appended to ``dataset.errors`` as
  ``{"sample_id": str, "kind": "data", "message": str}`` (``sample_id`` is the id the sample would
  have had, or the annotation file / record when no id can be formed) and logged as a warning, and
  loading goes on. The runner lists ``dataset.errors`` as data errors, apart from ``n`` (README
  "Data errors: one rule"), like a frame found undecodable before prediction.
- if every sample of the split fails, the constructor raises DatasetFormatError quoting the first
  few reasons: a dataset made only of errors is a configuration problem, not a result.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, overload

from rvt_bench.core.files import UTF8_BOM, read_json  # noqa: F401  (loaders read every JSON file through it)
from rvt_bench.core.printable import printable
from rvt_bench.core.types import DATA, DatasetFormatError, Sample

log = logging.getLogger(__name__)

ERROR_KIND = DATA  # the failure kind (rvt_bench.core.types.FailureKind) of samples that could not be built from the data
ALL_FAILED_SHOWN = 5  # reasons quoted when every sample failed

class Dataset(Sequence[Sample]):
    """A loaded benchmark split: ``len(ds)``, ``ds[i]``, ``iter(ds)`` over ``Sample`` in a fixed order.

    Subclasses set ``name`` and fill ``self._samples`` in their constructor, building each sample
    inside ``with self.sample_errors(sample_id):`` (or calling ``record_error``) so that a sample
    that cannot be built lands in ``errors``, and end with ``self.require_some_samples(source)``.

    ``errors``: list of ``{"sample_id": str, "kind": "data", "message": str}``, one per sample left
    out because its data is bad, in load order (empty when every sample loaded).
    ``warnings``: one line per way the data differs from the benchmark's official release (a hub
    copy that is not the release: rvt_bench.loaders.hub); the run keeps them in metrics.json.
    ``data_source``: rvt_bench.loaders.hub.DataSource.to_json() of data read by hub id, else None.
    """

    name: str = ""

    def __init__(self, samples: list[Sample] | None = None) -> None:
        self._samples: list[Sample] = list(samples or [])
        self.errors: list[dict[str, str]] = []
        self.warnings: list[str] = []
        self.data_source: dict | None = None

    def warn(self, message: str) -> None:
        """Keep a warning about the data (``warnings``) and log it."""
        self.warnings.append(message)
        log.warning("%s", message)

    def record_error(self, sample_id: str, message: str) -> None:
        """Leave out sample ``sample_id``: append it to ``errors`` and log a warning."""
        self.errors.append({"sample_id": str(sample_id), "kind": ERROR_KIND, "message": str(message)})
        log.warning("%s: sample %s left out (data error): %s", self.name, sample_id, message)

    @contextmanager
    def sample_errors(self, sample_id: str) -> Iterator[None]:
        """Run the block that builds sample(s) ``sample_id``; a DatasetFormatError raised in it is
        recorded with ``record_error`` and swallowed, so loading continues with the next sample.
        Other exceptions propagate (they are bugs, not bad data)."""
        try:
            yield
        except DatasetFormatError as exc:
            self.record_error(sample_id, str(exc))

    def require_some_samples(self, source: str) -> None:
        """Raise DatasetFormatError when samples were attempted from ``source`` and all of them failed,
        quoting the first ALL_FAILED_SHOWN reasons."""
        if self._samples or not self.errors:
            return
        shown = "\n".join(f"  {printable(e['sample_id'])}: {printable(e['message'])}" for e in self.errors[:ALL_FAILED_SHOWN])
        more = len(self.errors) - ALL_FAILED_SHOWN
        raise DatasetFormatError(
            f"{self.name}: every one of the {len(self.errors)} samples of {source} failed to load; first reasons:\n"
            f"{shown}" + (f"\n  ... and {more} more" if more > 0 else "")
        )

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


def layout_hint(layout: str, published: str) -> str:
    """The expected layout (one entry per line, indented under its root) and where the data is
    published, on one line: a stop is one line on stderr."""
    entries = [" ".join(ln.split()) for ln in layout.splitlines() if ln.strip()]
    root = entries.pop(0) if entries and entries[0].endswith("/") and len(layout.splitlines()) > 1 else ""
    return f"expected layout{' of ' + root if root else ''}: {'; '.join(entries)}; the data is published at {published}"


def require_dir(path: Path, *, dataset: str, layout: str, published: str) -> Path:
    """Return ``path`` if it is a directory, else raise DatasetFormatError that says which directory
    was expected, the layout expected inside it and where the data is published."""
    if not path.is_dir():
        raise DatasetFormatError(
            f"{dataset}: expected the dataset directory {path} (not found or not a directory); "
            f"{layout_hint(layout, published)}"
        )
    return path


def require_file(path: Path, *, dataset: str, layout: str, published: str) -> Path:
    """Return ``path`` if it exists (that it is a regular file is checked when it is read:
    rvt_bench.core.files), else raise DatasetFormatError like ``require_dir``."""
    if not path.exists():
        raise DatasetFormatError(f"{dataset}: expected the file {path} (not found); {layout_hint(layout, published)}")
    return path


def require_keys(record: Any, keys: Sequence[str], where: str) -> None:
    """Raise DatasetFormatError naming ``where`` when ``record`` is not a dict holding every key."""
    if not isinstance(record, dict):
        raise DatasetFormatError(f"{where}: expected a JSON object with keys {list(keys)}, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise DatasetFormatError(f"{where}: missing keys {missing}; expected {list(keys)}")


def existing_splits(names: Sequence[str]) -> str:
    """``names`` as a sorted list for "the splits that exist are ..." messages ("none" when empty)."""
    return str(sorted(set(names))) if names else "none"
