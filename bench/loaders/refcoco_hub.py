"""RefCOCO's hub copy `lmms-lab/RefCOCO` read as the named variant `dataset.loader.gt=hub_polygon`
(with `dataset.hf_dataset=lmms-lab/RefCOCO`): NOT LISA's protocol. What it is, how it differs and how
to measure the difference (perf/measure_hub_refcoco.py): docs/benchmarks/refcoco.md "Hub copy".

The copy (dataset card at revision a5dff0b3194715fda69b2d6a0d2aaafb41eaa407; its data files were last
changed in e15256ece129a21d62e216f95f98ba2e808f96a0) is lmms-eval's region-captioning set: parquet
files ``data/{val,test,testA,testB}-*.parquet`` with the columns question_id (string; lmms-eval
reads it as the COCO annotation id), image ({bytes, path}), question (string), answer (list of
strings: the ref's sentences), segmentation (list of float32: ONE flat polygon x0, y0, x1, y1, ...),
bbox (list of float32, COCO x, y, w, h), iscrowd (int8), file_name (string). Its testA (1975 rows)
and testB (1810 rows) have the number of refs of RefCOCO (unc) testA / testB: a row is a ref. Its
val (8811 rows) and test (5000 rows) match no RefCOCO (unc) split (val has 3811 refs; unc has no
test split): they are refused.

Samples: one per sentence of ``answer`` (LISA scores every sentence), id = ``<question_id>_<j>``
(never a REFER sent_id, so a prediction folder made for LISA's protocol is not read by mistake),
query = ``sentence.strip().lower()`` (LISA), GT = the row's one polygon filled at the image's size
by pycocotools as LISA fills a polygon (no ignore region), scored by the refcoco protocol unchanged.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rvt_bench.core import masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders import hub

if TYPE_CHECKING:
    from rvt_bench.loaders.refcoco import RefCOCODataset

HUB_ID = "lmms-lab/RefCOCO"
REVISION = "a5dff0b3194715fda69b2d6a0d2aaafb41eaa407"  # the card read for this loader (data files of e15256e)
VARIANT = "hub_polygon"  # dataset.loader.gt
SPLITS = ("testA", "testB")  # the hub splits whose rows are RefCOCO (unc) refs
COLUMNS = ("question_id", "image", "answer", "segmentation", "bbox", "iscrowd", "file_name")
LABEL = "lmms-lab hub copy, one polygon"
DIFFERENCES = (
    "ONE polygon per ref (LISA sums all of the annotation's polygons)",
    "the refs and sentences are the hub rows' (which match RefCOCO's: perf/measure_hub_refcoco.py)",
    "no ignore region (LISA's summed GT ignores value-255 pixels and counts overlaps as neither class)",
    "sample ids are <question_id>_<j>, not REFER sent_ids",
)
NOT_COMPARABLE = (f"dataset.loader.gt={VARIANT}: {HUB_ID} read with one polygon per ref, not LISA's protocol; "
                  f"the comparable run reads the REFER layout (docs/benchmarks/refcoco.md 'Hub copy')")
_COCO_NAME = re.compile(r"(\d+)\.[A-Za-z]+$")


def split_refusal(split: str) -> str | None:
    """One line when dataset.split cannot be read from the hub copy, else None (checked before
    anything is downloaded: rvt_bench.loaders.hub.pin through RefCOCODataset.hub_refusal)."""
    from rvt_bench.loaders.refcoco import parse_split

    try:
        ds, split_by, sub = parse_split(split)
    except DatasetFormatError as exc:
        return str(exc)
    if ds != "refcoco" or split_by != "unc":
        return (f"refcoco: dataset.loader.gt={VARIANT} reads {HUB_ID}, which holds RefCOCO (unc) only, not "
                f"{ds} ({split_by}): set dataset.split=refcoco/testA or refcoco/testB")
    if sub in ("val", "test"):
        return (f"refcoco: {HUB_ID}'s {sub} split is refused: its rows (val 8811, test 5000) do not match RefCOCO's "
                f"refs (unc val has 3811 refs, unc has no test split); only refcoco/testA and refcoco/testB (one row "
                f"per ref) are read (docs/benchmarks/refcoco.md 'Hub copy')")
    if sub not in SPLITS:
        return f"refcoco: {HUB_ID} has no {sub} split; dataset.loader.gt={VARIANT} reads refcoco/testA or refcoco/testB"
    return None


def image_id(file_name: str) -> Any:
    """COCO's image id in a train2014 file name (COCO_train2014_000000123456.jpg -> 123456), else the name."""
    m = _COCO_NAME.search(Path(file_name).name)
    return int(m.group(1)) if m else str(file_name)


def load(ds: "RefCOCODataset", hf_dataset: str, revision: str | None) -> None:
    """Read the hub copy's rows of ds.split into ds (samples, errors, data_source, one warning).
    Raises DatasetFormatError for a split that cannot be read, a copy without the split's parquet
    files, missing columns, or when no row gives a sample."""
    refusal = split_refusal(ds.split)
    if refusal:
        raise DatasetFormatError(refusal)
    sub = ds.split.rsplit("/", 1)[-1]
    snap, resolved = hub.snapshot(ds.name, hf_dataset, revision, allow_patterns=[f"data/{sub}-*.parquet", "README.md"])
    files = sorted((snap / "data").glob(f"{sub}-*.parquet")) if (snap / "data").is_dir() else []
    if not files:
        raise DatasetFormatError(f"refcoco: {hf_dataset} (revision {resolved[:12]}) has no data/{sub}-*.parquet "
                                 f"({HUB_ID}'s layout)")
    images = hub.work_dir(hf_dataset, resolved) / "images"
    images.mkdir(parents=True, exist_ok=True)
    rows = read_rows(files)
    order = sorted(range(len(rows)), key=lambda k: (_order(rows[k]["image_id"]), k))
    for k in order:
        _add_row(ds, rows[k], k, images)
    ds.require_some_samples(", ".join(str(f) for f in files))
    source = hub.DataSource(hf_dataset, resolved, "lmms-parquet", official=False, differences=list(DIFFERENCES),
                            label=LABEL, not_comparable=NOT_COMPARABLE)
    ds.data_source = source.to_json()
    ds.warn(f"refcoco: {hf_dataset} (revision {resolved[:12]}) read as the variant dataset.loader.gt={VARIANT}: these "
            f"numbers are NOT LISA's protocol (one polygon per ref, the hub's refs and sentences) and not comparable "
            f"with papers' RefCOCO numbers (docs/benchmarks/refcoco.md 'Hub copy')")


def read_rows(files: list[Path]) -> list[dict]:
    """The rows of the parquet files in order, as dicts of COLUMNS plus "image_id" (from file_name)
    and "row" (file:index). Raises DatasetFormatError for a file without COLUMNS."""
    rows = []
    for path in files:
        pf = hub.parquet_file(path)
        missing = [c for c in COLUMNS if c not in pf.schema_arrow.names]
        if missing:
            raise DatasetFormatError(f"refcoco: {path} lacks the columns {missing} of {HUB_ID} "
                                     f"(expected {list(COLUMNS)})")
        n = 0
        for batch in pf.iter_batches(batch_size=16, columns=list(COLUMNS)):
            for row in batch.to_pylist():
                row["row"] = f"{path.name}:{n}"
                row["image_id"] = image_id(str(row.get("file_name") or ""))
                rows.append(row)
                n += 1
    return rows


def polygon_mask(segmentation, height: int, width: int):
    """The hub row's one flat polygon filled at height x width as LISA fills a polygon (pycocotools),
    bool [H, W]; an empty list is an empty mask. Raises DatasetFormatError for a malformed polygon."""
    from rvt_bench.loaders.refcoco import lisa_gt

    if not isinstance(segmentation, list):
        raise DatasetFormatError(f"segmentation must be a flat list of polygon coordinates, got {type(segmentation).__name__}")
    target, _ = lisa_gt([segmentation] if segmentation else [], height, width, "sum")
    return target


def write_image(row: dict, images: Path) -> Path:
    """The row's image bytes written once under `images`, named by content: ``<sha256[:16]>_<name>``
    (name: the file name's last part, or question_id.jpg), so rows sharing a file name but not their
    bytes never share (or overwrite) a file, and rows sharing the bytes share it; its path.
    Raises DatasetFormatError for missing bytes or a name that cannot be a file ("", ".", "..", a NUL,
    too long for the file system, any OSError writing it)."""
    image = row.get("image") or {}
    if not isinstance(image, dict) or not image.get("bytes"):
        raise DatasetFormatError("no image bytes")
    data = image["bytes"]
    if not isinstance(data, (bytes, bytearray)):
        raise DatasetFormatError(f"image bytes must be bytes, got {type(data).__name__}")
    given = str(row.get("file_name") or image.get("path") or f"{row.get('question_id')}.jpg")
    name = given.replace("\\", "/").rsplit("/", 1)[-1]
    if name in ("", ".", "..") or "\x00" in name:
        raise DatasetFormatError(f"file_name {given[:120]!r} cannot name an image file")
    digest = hashlib.sha256(data).hexdigest()[:16]
    target = images / f"{digest}_{name}"
    try:
        if not target.is_file() or target.stat().st_size != len(data):
            tmp = target.with_name(f".{digest}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
    except (OSError, ValueError) as exc:
        raise DatasetFormatError(f"the image of file_name {given[:120]!r} cannot be written: {exc}") from None
    return target


def _add_row(ds: "RefCOCODataset", row: dict, k: int, images: Path) -> None:
    qid = str(row.get("question_id"))
    answer = row.get("answer")
    if not isinstance(answer, list) or not answer or not all(isinstance(a, str) for a in answer):
        ds.record_error(f"{qid}_0", f"{row['row']}: 'answer' must be a non-empty list of sentences, got {answer!r}"[:300])
        return
    ids = [f"{qid}_{j}" for j in range(len(answer))]
    try:
        path = write_image(row, images)
        height, width = frame_size(path)
        target = polygon_mask(row.get("segmentation"), height, width)
    except DatasetFormatError as exc:
        for sid in ids:
            ds.record_error(sid, f"{row['row']} (question_id {qid}): {exc}")
        return
    gt = Target(masks=[masks.encode(target)], ignore=[None])
    for j, (sid, sent) in enumerate(zip(ids, answer)):
        ds._samples.append(Sample(
            id=sid, dataset=ds.name, split=ds.split, modality="image", frames=[str(path)],
            frame_ids=[Path(path.name.split("_", 1)[1]).stem],  # the file name, without write_image's digest
            query=sent.strip().lower(), task="segmentation", target=gt,
            meta={"image_id": row["image_id"], "ann_id": qid, "question_id": qid, "sent_id": sid,
                  "ref_split": ds.split.rsplit("/", 1)[-1], "is_sentence": False, "ref_index": k, "sent_index": j},
        ))


def _order(image_id) -> tuple:
    return (0, image_id, "") if isinstance(image_id, int) else (1, 0, str(image_id))
