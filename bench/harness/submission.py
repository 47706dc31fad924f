"""The zip a benchmark's evaluation server takes, written from a run's predictions or a folder of
prediction PNGs, and checked before upload (MeViS valid, Ref-YouTube-VOS valid: their GT is not public).

    python -m rvt_bench.harness.submission mevis DATA_ROOT PRED submission.zip [--split valid]
    python -m rvt_bench.harness.submission --check refytvos DATA_ROOT submission.zip

DATA_ROOT: the benchmark's data (dataset.root); PRED: a run directory (predictions*.jsonl), one
.jsonl file of predictions, or a folder of PNGs in the benchmark's declared `predictions` layout
(<video>/<exp_id>/<frame>.png). The archive's layout is the benchmark's declaration
(conf/dataset/<name>.yaml `submission.path`, a template over sample meta keys and {frame_id}): one
8-bit gray PNG per frame of every expression, 255 = the object, 0 = background (ReferFormer's
inference_ytvos.py); MeViS: <video>/<exp_id>/<frame>.png (VISA tools/zip_mp_mevis.py),
Ref-YouTube-VOS: Annotations/<video>/<exp_id>/<frame>.png (VISA tools/zip_mp_refytvos.py,
ReferFormer's `zip -r submission.zip Annotations`). Docs: docs/benchmarks/mevis.md,
docs/benchmarks/refytvos.md.

An expression without a usable prediction (missing, failed, wrong frame count or size) stops the
export with one line naming the first few, unless --empty-missing writes empty masks for them (and
names them). An entry name that is not a plain relative path inside the archive (a video or
expression id holding "../", "/..", a backslash or a control character: unzipped, it would land
outside the folder) stops the export with one line naming the expressions, --empty-missing or not. --check reads an archive back: every expected entry present, nothing else, each a PNG
of its frame's size; exit status 0 when it passes, 1 with one line per problem (at most 20) when not.
"""
from __future__ import annotations

import argparse
import io
import sys
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from PIL import Image

from rvt_bench.core import files, masks, png
from rvt_bench.core.files import FileLimitError
from rvt_bench.core.frames import frame_size
from rvt_bench.core import benchmark as benchmark_decl
from rvt_bench.core.benchmark import PredictionLayout
from rvt_bench.core.store import prediction_files, read_predictions
from rvt_bench.core.types import DatasetFormatError, RunStoreError, RvtBenchError, Sample

SHOWN = 20  # problems listed before "... and N more"
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed entry times: the same predictions give the same archive bytes


class SubmissionError(RvtBenchError):
    """The export or the check cannot go on; the message is one line saying what and what to do."""

    kind = "submission"


def samples(benchmark: str, root: str | Path, split: str) -> tuple[list[Sample], PredictionLayout]:
    """(the split's samples, the archive's layout) of benchmark `benchmark`'s declaration
    (conf/dataset/<benchmark>.yaml: its loader on `root`, its `submission.path` template over sample
    meta keys and {frame_id}). Raises SubmissionError when there is no such benchmark or it declares
    no submission."""
    from rvt_bench.loaders.config import from_yaml

    path = benchmark_decl.dataset_file(benchmark)
    if path is None:
        raise SubmissionError(f"no benchmark {benchmark!r} (no conf/dataset/{benchmark}.yaml)")
    block = (benchmark_decl.declaration(benchmark) or {}).get("submission")
    if block is None:
        raise SubmissionError(f"benchmark {benchmark!r} has no server submission (its declaration has no `submission`); "
                              "score it with rvt-bench")
    try:
        layout = benchmark_decl.prediction_layout("submission", block, f"{path}: ")
    except benchmark_decl.DeclarationError as exc:
        raise SubmissionError(str(exc)) from exc
    if not layout.per_frame:
        raise SubmissionError(f"{path}: submission.path must hold {{{benchmark_decl.FRAME_FIELD}}} (one PNG per frame)")
    return list(from_yaml(str(path), root=str(root), split=split)), layout


def entry_names(sample: Sample, layout: PredictionLayout) -> list[str]:
    """The archive names of a sample's PNGs (the declared template, e.g. <video>/<exp_id>/<frame>.png),
    one per frame. Raises DatasetFormatError when the sample lacks a meta key the template needs, or
    when a name is not a plain relative path inside the archive (`name_problem`: a video or
    expression id holding "../" would write outside the folder the archive is unzipped in)."""
    try:
        names = layout.names(sample.meta, sample.frame_ids)
    except KeyError as exc:
        raise DatasetFormatError(f"sample {sample.id}: the submission layout needs meta key {exc}") from exc
    for name in names:
        problem = name_problem(name)
        if problem is not None:
            raise DatasetFormatError(f"sample {sample.id}: archive entry {name[:200]!r} is {problem}")
    return names


def name_problem(name: str) -> str | None:
    """Why the zip entry `name` is not a plain relative path inside the archive (None when it is):
    absolute ("/x", "C:x"), climbing out (a ".." component), an empty or "." component, a
    backslash (a separator to Windows extractors) or a control character (zipfile cuts a name at NUL)."""
    if name.startswith("/") or (len(name) > 1 and name[0].isalpha() and name[1] == ":") or ".." in name.split("/"):
        return "a path outside the archive's root"
    if not name or any(part in ("", ".") for part in name.split("/")):
        return "not a plain relative path (an empty or '.' component)"
    if "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "not a plain relative path (a backslash or a control character)"
    return None


def png_bytes(mask: np.ndarray) -> bytes:
    """An (H, W) bool mask as an 8-bit gray PNG, 255 = the object."""
    out = io.BytesIO()
    Image.fromarray(mask.astype(np.uint8) * 255, mode="L").save(out, format="PNG", optimize=False)
    return out.getvalue()


def _frame_masks(sample: Sample, pred_root: Path, predictions: dict | None, layout: PredictionLayout) -> list[np.ndarray]:
    """The sample's predicted (H, W) bool masks, one per frame; DatasetFormatError saying why not."""
    sizes = [frame_size(f) for f in sample.frames]
    if predictions is not None:
        pred = predictions.get(sample.id)
        if pred is None:
            raise DatasetFormatError("no prediction record")
        if pred.error is not None:
            raise DatasetFormatError(f"failed: {pred.error.get('message', pred.error.get('kind'))}"[:200])
        rles = pred.masks or []
        if len(rles) != sample.num_frames:
            raise DatasetFormatError(f"{len(rles)} masks for {sample.num_frames} frames")
        out = []
        for k, (rle, size) in enumerate(zip(rles, sizes)):
            problem = None if rle is None else masks.rle_problem(rle, size)
            if problem is not None:
                raise DatasetFormatError(f"frame {k}: {problem}")
            out.append(np.zeros(size, dtype=bool) if rle is None else masks.decode(rle))
        return out
    out = []
    for name, size in zip(entry_names(sample, layout), sizes):
        path = files.inside(pred_root, name, f"sample {sample.id}: prediction PNG")
        if not path.is_file():
            raise DatasetFormatError(f"{path} does not exist")
        shape, box, crop = png.read_gray(path)
        if shape != size:
            raise DatasetFormatError(f"{path} is {list(shape)} [H, W], its frame {list(size)}")
        mask = np.zeros(shape, dtype=bool)
        if box is not None:
            mask[box[0]:box[1], box[2]:box[3]] = crop != 0
        out.append(mask)
    return out


def export(benchmark: str, root: str | Path, pred: str | Path, out: str | Path, split: str = "valid",
           empty_missing: bool = False) -> dict:
    """Write the server's zip of `pred` (module docstring) to `out` (atomically: a temporary file
    renamed). Returns {"expressions", "entries", "empty": ids written as empty masks}. Raises
    SubmissionError when an expression has no usable prediction (without empty_missing), when an
    expression's entry name is not a plain relative path inside the archive (`name_problem`: the
    whole export is refused, --empty-missing or not: the server expects that entry), when `pred`
    does not exist, or its predictions file is unreadable. No zip is left behind on a refusal."""
    pred = Path(pred)
    if not pred.exists():
        raise SubmissionError(f"predictions {pred} do not exist (a run directory, a .jsonl file or a folder of PNGs)")
    jsonl = [pred] if pred.is_file() else prediction_files(pred)
    try:
        predictions = read_predictions(jsonl) if jsonl else None
    except RunStoreError as exc:
        raise SubmissionError(str(exc)) from exc
    chosen, layout = samples(benchmark, root, split)
    declared = [lay for lay in benchmark_decl.prediction_layouts(benchmark).values() if lay.per_frame]
    source = declared[0] if declared else layout  # a PNG folder: the benchmark's declared prediction layout
    problems, unsafe, empty, written = [], [], [], 0
    out = Path(out)
    tmp = out.with_name(f".{out.name}.partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for sample in chosen:
            try:
                names = entry_names(sample, layout)
            except DatasetFormatError as exc:
                unsafe.append(str(exc))
                continue
            try:
                frames = _frame_masks(sample, pred, predictions, source)
            except DatasetFormatError as exc:
                if not empty_missing:
                    problems.append(f"{sample.id}: {exc}")
                    continue
                empty.append(sample.id)
                frames = [np.zeros(frame_size(f), dtype=bool) for f in sample.frames]
            for name, mask in zip(names, frames):
                archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), png_bytes(mask), zipfile.ZIP_DEFLATED)
                written += 1
    if unsafe:
        tmp.unlink()
        shown = "; ".join(unsafe[:3]) + (f"; ... and {len(unsafe) - 3} more" if len(unsafe) > 3 else "")
        raise SubmissionError(f"{len(unsafe)} of {len(chosen)} expressions cannot be named in the archive, no zip written "
                              f"({shown}); the server's archive holds plain relative paths only: fix those ids in the "
                              f"dataset's meta")
    if problems:
        tmp.unlink()
        shown = "; ".join(problems[:3]) + (f"; ... and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise SubmissionError(f"{len(problems)} of {len(chosen)} expressions have no usable prediction, no zip written "
                              f"({shown}); predict them, or pass --empty-missing to submit them as empty masks")
    tmp.replace(out)
    return {"expressions": len(chosen), "entries": written, "empty": empty}


def check(benchmark: str, root: str | Path, archive_path: str | Path, split: str = "valid") -> list[str]:
    """The problems of a submission zip (empty list = it passes): entries missing, unexpected
    (other names, folders, paths with ".." or a leading "/"), or not a PNG of the frame's size."""
    chosen, layout = samples(benchmark, root, split)
    expected, problems = {}, []
    for sample in chosen:
        try:
            names = entry_names(sample, layout)
        except DatasetFormatError as exc:
            problems.append(str(exc))
            continue
        for name, frame in zip(names, sample.frames):
            expected[name] = frame
    try:  # through the checked reader: a FIFO or a device given as the archive is refused, nothing hangs
        archive = zipfile.ZipFile(files.open_binary(archive_path, "submission zip"))
    except (OSError, zipfile.BadZipFile, FileLimitError) as exc:
        return problems + [f"{archive_path}: not a readable zip ({exc})"]
    with archive:
        names = archive.namelist()
        for name in names:
            if name.endswith("/"):
                continue  # a folder entry (zip -r writes them): harmless
            problem = name_problem(name)
            if problem is not None:
                problems.append(f"{name[:200]}: {problem}")
            elif name not in expected:
                problems.append(f"{name}: not a frame of any expression of the split (expected {layout.path})")
        missing = sorted(set(expected) - set(names))
        problems += [f"{name}: missing" for name in missing]
        for name in names:
            if name in expected:
                problems += _entry_problem(archive, name, frame_size(expected[name]))
    return problems


def _entry_problem(archive: zipfile.ZipFile, name: str, size: tuple[int, int]) -> list[str]:
    """The problem of one expected entry: too large, not a PNG, not of the frame's (H, W) by its
    header, or not decodable (decoded only once its header passed dataset.limits)."""
    limit = files.limits().max_file_mb
    if archive.getinfo(name).file_size > limit * 2 ** 20:  # read nothing a frame's mask cannot need
        return [f"{name}: {archive.getinfo(name).file_size} bytes uncompressed, over dataset.limits.max_file_mb={limit:g}"]
    data = archive.read(name)
    declared = files.image_size(data) if data.startswith(b"\x89PNG\r\n\x1a\n") else None
    if declared is None:
        return [f"{name}: not a PNG"]
    if (declared[1], declared[0]) != tuple(size):
        return [f"{name}: {[declared[1], declared[0]]} [H, W], its frame is {list(size)}"]
    try:
        files.check_image_pixels(data, name, "mask PNG")
        if png.decode_gray8_box(data) is None:
            Image.open(io.BytesIO(data)).load()
    except (DatasetFormatError, OSError, ValueError) as exc:
        return [f"{name}: cannot be decoded ({exc})"]
    return []


def _lines(items: Sequence[str]) -> Iterable[str]:
    yield from items[:SHOWN]
    if len(items) > SHOWN:
        yield f"... and {len(items) - SHOWN} more"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rvt_bench.harness.submission", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check an archive: BENCHMARK DATA_ROOT ZIP")
    parser.add_argument("--split", default="valid", help="the split (default: valid)")
    parser.add_argument("--empty-missing", action="store_true", help="write empty masks for expressions without a prediction")
    parser.add_argument("benchmark", help="mevis | refytvos")
    parser.add_argument("root", help="the benchmark's data (dataset.root)")
    parser.add_argument("paths", nargs="+", help="PRED OUT.zip (export) or ZIP (--check)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            if len(args.paths) != 1:
                parser.error("--check takes BENCHMARK DATA_ROOT ZIP")
            problems = check(args.benchmark, args.root, args.paths[0], args.split)
            if problems:
                print(f"{args.paths[0]}: {len(problems)} problem(s); the server would refuse or misscore it:", file=sys.stderr)
                for line in _lines(problems):
                    print(f"  {line}", file=sys.stderr)
                return 1
            print(f"{args.paths[0]}: every frame of every expression of {args.benchmark} {args.split} is there, "
                  "as a PNG of its frame's size")
            return 0
        if len(args.paths) != 2:
            parser.error("export takes BENCHMARK DATA_ROOT PRED OUT.zip")
        done = export(args.benchmark, args.root, args.paths[0], args.paths[1], args.split, args.empty_missing)
    except (SubmissionError, DatasetFormatError) as exc:
        print(f"submission: {exc}", file=sys.stderr)
        return 2
    empty = done["empty"]
    print(f"{args.paths[1]}: {done['expressions']} expressions, {done['entries']} PNGs"
          + (f"; {len(empty)} written as empty masks: {', '.join(empty[:5])}{' ...' if len(empty) > 5 else ''}" if empty else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
