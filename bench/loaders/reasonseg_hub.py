"""ReasonSeg by hub id (`dataset.hf_dataset=ID`, rvt_bench.loaders.hub): LISA's own files in a hub
repository (folders or zips of <split>/<name>.jpg + .json), read by ReasonSegDataset as from
dataset.root, or Seg-Zero's parquet copy (`Ricky06662/ReasonSeg_val`, `Ricky06662/ReasonSeg_test`,
built by Seg-Zero's evaluation_scripts/create_reasonseg_hf.py), read here. What the parquet copy
changes and its measured effect: docs/benchmarks/reasonseg.md "Data by hub id".
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders import hub

if TYPE_CHECKING:
    from rvt_bench.loaders.reasonseg import ReasonSegDataset

SEGZERO_COLUMNS = ("image", "text", "mask", "image_id", "ann_id", "img_height", "img_width")
SEGZERO_LABEL = "Seg-Zero hub copy"
SEGZERO_DIFFERENCES = (
    "its masks are boolean: LISA's ignore regions (label 255) count as target",
    "masks of EXIF-rotated images (orientation 5-8) were rasterised at the un-rotated size",
    "no is_sentence: no short / long query split (query_length=all only)",
    "one text per image (text[0], as LISA validates)",
)


def load(ds: "ReasonSegDataset", hf_dataset: str, revision: str | None) -> Path | None:
    """Read hub copy `hf_dataset` into `ds`: Seg-Zero parquet rows become its samples (None is
    returned); LISA's files are found in the snapshot, extracted from zips when needed, and their
    root (the folder holding <split>/) is returned for the ordinary reader. Sets ds.data_source and,
    for the parquet copy, ds.warnings. Raises DatasetFormatError when the snapshot holds neither."""
    snap, resolved = hub.snapshot(ds.name, hf_dataset, revision)
    source = hub.DataSource(hf_dataset, resolved)
    parquet = sorted(snap.rglob("*.parquet"))
    if parquet:
        source.format, source.official, source.label = "segzero-parquet", False, SEGZERO_LABEL
        _read_segzero(ds, hf_dataset, _split_files(parquet, ds.split), hub.work_dir(hf_dataset, resolved) / "images")
        left_out = sum(1 for e in ds.errors if "EXIF" in e["message"])
        source.differences = [*SEGZERO_DIFFERENCES[:1], f"{SEGZERO_DIFFERENCES[1]} ({left_out} such rows left out)",
                              *SEGZERO_DIFFERENCES[2:]]
        ds.data_source = source.to_json()
        ds.warn(f"reasonseg: {hf_dataset} (revision {resolved[:12]}) is Seg-Zero's Hugging Face copy, not LISA's "
                f"release: {'; '.join(source.differences)}. gIoU/cIoU are not comparable with numbers computed on "
                f"LISA's files (measured effect: docs/benchmarks/reasonseg.md 'Data by hub id'); for LISA's protocol "
                f"use dataset.root with the official release")
        return None
    roots = _lisa_roots(snap, ds.split) or _lisa_roots(hub.extract_archives(ds.name, snap, hub.work_dir(
        hf_dataset, resolved) / "extracted") or snap, ds.split)
    if not roots:
        raise DatasetFormatError(
            f"reasonseg: {hf_dataset} (revision {resolved[:12]}) holds neither Seg-Zero's parquet files nor LISA's "
            f"<split>/<name>.jpg + .json for split {ds.split!r} (also looked inside its zip archives)")
    source.format, source.official = "lisa-files", None  # LISA publishes no checksums to tell
    ds.data_source = source.to_json()
    return roots[0]


def _lisa_roots(base: Path, split: str) -> list[Path]:
    return hub.find_dirs(base, lambda d: (d / split).is_dir() and any((d / split).glob("*.json")))


def _split_files(files: list[Path], split: str) -> list[Path]:
    """The parquet files of one split: `<split>-*.parquet` when the repository has them, else the
    only split Seg-Zero's copies have ("test", in the val copy too), else all."""
    for prefix in (f"{split}-", "test-"):
        chosen = [f for f in files if f.name.startswith(prefix)]
        if chosen:
            return chosen
    return files


def _check_split(ds: "ReasonSegDataset", hf_dataset: str) -> None:
    # Seg-Zero's copies say their split in the name only (the file split is "test" in both)
    name = hf_dataset.rstrip("/").rsplit("/", 1)[-1].lower()
    for split in ("val", "test", "train"):
        if name.endswith(f"_{split}") and ds.split != split:
            raise DatasetFormatError(f"reasonseg: {hf_dataset} holds the {split} split, not {ds.split!r}: "
                                     f"set dataset.split={split} (or the repository of split {ds.split})")


def _read_segzero(ds: "ReasonSegDataset", hf_dataset: str, files: list[Path], images: Path) -> None:
    """Samples of Seg-Zero's parquet rows, sorted by image_id as LISA's files are: id = image_id,
    the image written once to `images`, target = the boolean mask (no ignore region)."""
    _check_split(ds, hf_dataset)
    if ds.query_length != "all":
        raise DatasetFormatError(f"reasonseg: {hf_dataset} has no is_sentence field: query_length must be 'all', "
                                 f"got {ds.query_length!r}")
    if ds.all_texts:
        raise DatasetFormatError(f"reasonseg: {hf_dataset} keeps one text per image: all_texts=true is not possible")
    images.mkdir(parents=True, exist_ok=True)
    samples: list[Sample] = []
    for path in files:
        pf = hub.parquet_file(path)
        missing = [c for c in SEGZERO_COLUMNS if c not in pf.schema_arrow.names]
        if missing:
            raise DatasetFormatError(f"reasonseg: {path} lacks the columns {missing} of Seg-Zero's copy "
                                     f"(expected {list(SEGZERO_COLUMNS)})")
        for batch in pf.iter_batches(batch_size=8, columns=list(SEGZERO_COLUMNS)):
            for i in range(batch.num_rows):
                stem = str(batch.column("image_id")[i].as_py())
                with ds.sample_errors(stem):
                    samples.append(_row_sample(ds, batch, i, stem, images, path))
    ds._samples.extend(sorted(samples, key=lambda s: s.id))
    ds.require_some_samples(", ".join(str(f) for f in files))


def _row_sample(ds: "ReasonSegDataset", batch, i: int, stem: str, images: Path, path: Path) -> Sample:
    height, width = int(batch.column("img_height")[i].as_py()), int(batch.column("img_width")[i].as_py())
    rows = batch.column("mask")[i].values  # list<bool> per image row
    if rows is None or len(rows) != height:
        raise DatasetFormatError(f"{path} row {stem}: mask has {0 if rows is None else len(rows)} rows, img_height is {height}")
    flat = rows.flatten().to_numpy(zero_copy_only=False)
    if flat.size != height * width:
        raise DatasetFormatError(f"{path} row {stem}: mask holds {flat.size} values, not img_height x img_width = "
                                 f"{height} x {width}")
    image = batch.column("image")[i].as_py() or {}
    if not image.get("bytes"):
        raise DatasetFormatError(f"{path} row {stem}: no image bytes")
    given = str(image.get("path") or f"{stem}.jpg")
    name = Path(given).name
    if name in ("", ".", "..") or "\x00" in name:  # the image is written under `images` by this name
        raise DatasetFormatError(f"{path} row {stem}: image path {given[:120]!r} cannot name an image file")
    target = images / name
    if not target.is_file() or target.stat().st_size != len(image["bytes"]):
        tmp = target.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_bytes(image["bytes"])
        tmp.replace(target)
    oriented = frame_size(target)
    if oriented != (height, width):
        raise DatasetFormatError(
            f"{path} row {stem}: the mask is {height} x {width} but the EXIF-oriented image is {oriented[0]} x "
            f"{oriented[1]} (Seg-Zero rasterised it on the stored, un-rotated image; Seg-Zero's evaluation drops "
            f"such a row)")
    text = batch.column("text")[i].as_py()
    if not isinstance(text, str) or not text.strip():
        raise DatasetFormatError(f"{path} row {stem}: 'text' must be a non-empty string, got {text!r}")
    mask = flat.reshape(height, width).astype(bool, copy=False)
    return Sample(id=stem, dataset=ds.name, split=ds.split, modality="image", frames=[str(target)], frame_ids=[stem],
                  query=text, task="segmentation", target=Target(masks=[masks.encode(np.ascontiguousarray(mask))],
                                                                 ignore=[None]),
                  meta={"name": stem})
