"""Benchmark data by Hugging Face Hub id (`dataset.hf_dataset=ID`): the repository's files,
downloaded once through `huggingface_hub.snapshot_download` into the Hugging Face cache, pinned to
one commit, and handed to the benchmark's own loader. Which copies exist and how each differs from
the official release: docs/benchmarks/<name>.md "Data by hub id".

`hf_dataset` is a hub dataset id ("owner/name") or a local directory laid out as the hub repository
(a copy, or a test fixture). A hub id resolves to the commit sha of `hf_revision` (a branch, tag or
sha; None = main); a local directory to "local:" + a digest of its files. The harness pins the
resolved revision in the run's config before the run's fingerprint is taken (`pin`), so a run
directory never mixes two versions of the data.
"""
from __future__ import annotations

import hashlib
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError

_SHA = re.compile(r"^[0-9a-f]{40}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DIGEST_EDGE = 1 << 20  # bytes read at each end of a local file for its digest


@dataclass
class DataSource:
    """Where a run's data came from, as manifest.json, metrics.json and the leaderboard row record it.

    hf_dataset: the hub id or local directory given; revision: the commit sha (or "local:<digest>").
    format:     the file format found in it ("lisa-files", "segzero-parquet", "visa-files", ...).
    official:   True when the files are the official release (checked, e.g. by sha256), False when
                they differ from it, None when it cannot be told.
    differences: one line per way the copy differs from the official release (what changes scores).
    label:      a short name of a non-official copy for tables ("Seg-Zero hub copy"); "" otherwise.
    not_comparable: why a run on this copy is not comparable with published numbers (the run's
                every metric is then marked so in tables: rvt_bench.harness.results.mark_not_comparable);
                "" when it is (kept out of to_json then).
    """

    hf_dataset: str
    revision: str
    format: str = ""
    official: bool | None = None
    differences: list[str] = field(default_factory=list)
    label: str = ""
    not_comparable: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {"hf_dataset": self.hf_dataset, "revision": self.revision, "format": self.format,
               "official": self.official, "differences": list(self.differences), "label": self.label}
        if self.not_comparable:
            out["not_comparable"] = self.not_comparable
        return out


def is_local(hf_dataset: str) -> bool:
    """Whether `hf_dataset` names a local directory rather than a hub id."""
    return Path(hf_dataset).expanduser().is_dir() or not _ID.match(hf_dataset)


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _not_cached(dataset: str, hf_dataset: str, revision: str | None, why: str) -> DatasetFormatError:
    return DatasetFormatError(
        f"{dataset}: the Hugging Face dataset {hf_dataset!r} (revision {revision or 'main'}) is not in the local "
        f"Hugging Face cache and {why}; download it once where the hub can be reached "
        f"(huggingface-cli download --repo-type dataset {hf_dataset}) or set dataset.hf_dataset to a local copy")


def resolve_revision(dataset: str, hf_dataset: str, revision: str | None = None) -> str:
    """The commit sha `revision` (None: main) of hub dataset `hf_dataset`, from the local cache when
    it holds that revision, else from the hub; "local:<digest>" for a local directory. Raises
    DatasetFormatError (one line naming the id and HF_HUB_OFFLINE) when neither the cache nor the
    hub can say, and for a local path that does not exist."""
    if is_local(hf_dataset):
        path = Path(hf_dataset).expanduser()
        if not path.is_dir():
            raise DatasetFormatError(f"{dataset}: dataset.hf_dataset={hf_dataset!r} is neither a local directory nor a "
                                     f"hub dataset id (owner/name)")
        return "local:" + local_digest(path)
    if revision is not None and _SHA.match(revision):
        return revision
    from huggingface_hub import HfApi, snapshot_download

    try:  # the cache knows a branch's commit (refs/<branch>) without the network
        return Path(snapshot_download(hf_dataset, repo_type="dataset", revision=revision, local_files_only=True)).name
    except Exception:  # huggingface_hub raises several types for "not in the cache"
        pass
    if offline():
        raise _not_cached(dataset, hf_dataset, revision, "HF_HUB_OFFLINE is set")
    try:
        return str(HfApi().dataset_info(hf_dataset, revision=revision, timeout=30).sha)
    except Exception as exc:  # no network, unknown or gated repository
        raise _not_cached(dataset, hf_dataset, revision, f"the hub cannot be reached or refuses it "
                                                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from exc


def local_digest(path: Path) -> str:
    """12 hex of sha256 over a directory's files: relative path, size, first and last MiB of each."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.relative_to(path).parts):
        size = f.stat().st_size
        h.update(f"{f.relative_to(path).as_posix()}\0{size}\0".encode())
        with files.open_binary(f, "hub file") as fh:  # a FIFO or a device among them is refused, not read
            h.update(fh.read(_DIGEST_EDGE))
            if size > 2 * _DIGEST_EDGE:
                fh.seek(-_DIGEST_EDGE, os.SEEK_END)
                h.update(fh.read(_DIGEST_EDGE))
    return h.hexdigest()[:12]


def snapshot(dataset: str, hf_dataset: str, revision: str | None = None,
             allow_patterns: list[str] | None = None) -> tuple[Path, str]:
    """(local directory holding the repository's files at the resolved revision, the revision).
    A hub id is downloaded through huggingface_hub.snapshot_download into the Hugging Face cache
    (only `allow_patterns`, when given; nothing is fetched when the cache has it); a local directory
    is used in place. Raises DatasetFormatError as `resolve_revision`."""
    resolved = resolve_revision(dataset, hf_dataset, revision)
    if is_local(hf_dataset):
        if revision is not None and str(revision).startswith("local:") and revision != resolved:
            raise DatasetFormatError(f"{dataset}: the local copy {hf_dataset} changed since this run pinned it "
                                     f"({revision}, now {resolved}); use another run.name for the new files")
        return Path(hf_dataset).expanduser(), resolved
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(hf_dataset, repo_type="dataset", revision=resolved, local_files_only=True,
                                      allow_patterns=allow_patterns)), resolved
    except Exception:
        pass
    if offline():
        raise _not_cached(dataset, hf_dataset, resolved, "HF_HUB_OFFLINE is set")
    try:
        return Path(snapshot_download(hf_dataset, repo_type="dataset", revision=resolved,
                                      allow_patterns=allow_patterns)), resolved
    except Exception as exc:
        raise DatasetFormatError(f"{dataset}: downloading the Hugging Face dataset {hf_dataset!r} failed: "
                                 f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (no network "
                                 f"here? download it once where the hub can be reached: huggingface-cli download "
                                 f"--repo-type dataset {hf_dataset}; HF_HUB_OFFLINE=1 then reads the cache without "
                                 f"retrying)") from exc


def work_dir(hf_dataset: str, revision: str) -> Path:
    """Where files derived from a hub copy (extracted archives, images written out of parquet) are
    kept: <HF_HOME>/rvt_bench/<id or directory>/<revision>, beside the Hugging Face cache."""
    from huggingface_hub import constants

    name = re.sub(r"[^A-Za-z0-9_.-]+", "--", hf_dataset.strip("/"))[-120:]
    return Path(constants.HF_HOME) / "rvt_bench" / name / revision.replace(":", "-")


def extract_archives(dataset: str, directory: Path, into: Path) -> Path | None:
    """Extract every .zip of `directory` (not nested) into `into` once (a marker file records a
    complete extraction; an interrupted one starts again); `into`, or None when there is none.
    Raises DatasetFormatError naming an archive that is not a valid zip or escapes `into`."""
    archives = sorted(directory.rglob("*.zip"))
    if not archives:
        return None
    into.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        marker = into / f".{archive.name}.extracted"
        if marker.is_file():
            continue
        try:
            with files.open_binary(archive, "zip archive") as fh, zipfile.ZipFile(fh) as zf:
                for member in zf.namelist():
                    target = (into / member).resolve()
                    if not target.is_relative_to(into.resolve()):
                        raise DatasetFormatError(f"{dataset}: {archive} holds {member!r}, outside its folder; not extracted")
                zf.extractall(into)
        except zipfile.BadZipFile as exc:
            raise DatasetFormatError(f"{dataset}: {archive} is not a valid zip archive: {exc}") from exc
        marker.write_text("ok\n", encoding="utf-8")
    return into


def find_dirs(base: Path, test, limit: int = 6) -> list[Path]:
    """Directories under `base` (itself included, at most `limit` levels deep, breadth first) for
    which test(dir) is true."""
    out, level = [], [base]
    for _ in range(limit + 1):
        nxt = []
        for d in level:
            if test(d):
                out.append(d)
            nxt += sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        level = nxt
    return out


def parquet_file(path: Path):
    """pyarrow's ParquetFile of `path`, opened through files.open_binary (a regular file: a FIFO or a
    device among a local copy's files is refused in one line, where pyarrow would wait on it)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(files.open_binary(path, "parquet file"))


def sha256_file(path: Path) -> str:
    with files.open_binary(path, "hub file") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def pin(node: Any) -> None:
    """Resolve a dataset node's `hf_revision` in place (OmegaConf node or dict) when `hf_dataset`
    is set and the revision is not a commit sha yet; a node without hf_dataset is left as it is.
    Called by the harness before the run's fingerprint is taken."""
    hf_dataset = node.get("hf_dataset") if hasattr(node, "get") else None
    if not hf_dataset:
        return
    refusal = _hub_refusal(node)
    if refusal:  # a benchmark with no faithful hub copy says so before anything is downloaded
        raise DatasetFormatError(refusal)
    revision = node.get("hf_revision")
    if revision is not None and (_SHA.match(str(revision)) or str(revision).startswith("local:")):
        return
    node["hf_revision"] = resolve_revision(str(node.get("name")), str(hf_dataset), revision)


def _hub_refusal(node: Any) -> str | None:
    """The loader class's ``hub_refusal`` line (a benchmark that reads no hub copy), else None; a
    callable ``hub_refusal(node)`` answers for the node (a benchmark that reads a hub copy only as
    a named variant, e.g. refcoco's dataset.loader.gt=hub_polygon)."""
    import importlib

    loader = node.get("loader") if hasattr(node, "get") else None
    target = loader.get("_target_") if hasattr(loader, "get") else None
    if not isinstance(target, str) or "." not in target:
        return None
    module, _, attr = target.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attr, None)
    except ImportError:
        return None
    refusal = getattr(found, "hub_refusal", None)
    if callable(refusal):
        refusal = refusal(node)
    return refusal if isinstance(refusal, str) else None
