"""Small offline fixtures of the benchmarks' Hugging Face Hub copies, in each copy's exact format,
and a local Hugging Face cache holding them under their hub ids (no network is ever used).

- `write_lisa_reasonseg(base)`: LISA's ReasonSeg files (<split>/<stem>.jpg + LabelMe .json) with
  ignore shapes (label "ignore" -> 255), several texts, short and long queries, and one JPEG with
  EXIF orientation 6 (stored 24 x 32, shown 32 x 24).
- `segzero_parquet(lisa_root, split, out)`: the same split converted as Seg-Zero's
  evaluation_scripts/create_reasonseg_hf.py does (dvlab-research/Seg-Zero @ 42a33455): the label map
  rasterised at the stored (un-rotated) PIL size, `.astype(bool)` (ignore pixels become target),
  text[0], image bytes and basename embedded; written as push_to_hub writes it
  (data/test-00000-of-00001.parquet, one split named "test", the datasets 3.x schema metadata).
- `reasonseg_predictions(lisa_root, split, out)`: prediction PNGs (precomputed "reasonseg" layout).
- `revos_release(base)`: ReVOS in VISA's layout (the visa_parity raw fixture's generator), zipped.
- `hub_cache(cache, repo_id, files)`: a Hugging Face hub cache (datasets--owner--name/refs/main,
  snapshots/<sha>/...) that huggingface_hub.snapshot_download(..., local_files_only=True) reads.
"""
from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

from rvt_bench.core.masks import rasterize_labelme

SHA = "0123456789abcdef0123456789abcdef01234567"
HF_META = {"info": {"features": {
    "image": {"_type": "Image"}, "text": {"dtype": "string", "_type": "Value"},
    "mask": {"feature": {"feature": {"dtype": "bool", "_type": "Value"}, "_type": "Sequence"}, "_type": "Sequence"},
    "image_id": {"dtype": "string", "_type": "Value"}, "ann_id": {"dtype": "string", "_type": "Value"},
    "img_height": {"dtype": "int64", "_type": "Value"}, "img_width": {"dtype": "int64", "_type": "Value"}}}}
CARD = """---
dataset_info:
  features:
  - {name: image, dtype: image}
  - {name: text, dtype: string}
  - name: mask
    sequence:
      sequence: bool
  - {name: image_id, dtype: string}
  - {name: ann_id, dtype: string}
  - {name: img_height, dtype: int64}
  - {name: img_width, dtype: int64}
  splits:
  - {name: test, num_examples: %d}
configs:
- config_name: default
  data_files:
  - {split: test, path: data/test-*}
---
"""

# (stem, H, W, exif orientation, shapes as (label, box x0, y0, x1, y1), texts, is_sentence)
IMAGES = {
    "val": [
        ("100637969_a7173095de_o", 24, 32, 1, [("target", 4, 4, 20, 16), ("ignore", 16, 10, 28, 20)],
         ["the cesspit", "the pit"], False),
        ("100706138_4dd951b10b_o", 20, 28, 1, [("target", 2, 2, 12, 14)],
         ["When celebrating birthdays, what shows the age?"], True),
        ("101677526_e9a3ba3ae1_o", 24, 32, 6, [("target", 3, 3, 14, 12), ("ignore", 10, 8, 20, 18)],
         ["the rotated thing"], False),
        ("106484289_d257ea9e9d_o", 22, 30, 1, [("target", 6, 5, 24, 18), ("Ignore region", 0, 0, 8, 8)],
         ["What keeps the rain off?"], True),
    ],
    "test": [
        ("2149402_8a2f1e4b7c_o", 24, 32, 1, [("target", 5, 5, 22, 18), ("ignore", 18, 12, 30, 22)], ["the kettle"], False),
        ("2207518_fe0a2c4d11_o", 20, 26, 1, [("target", 1, 1, 10, 10)], ["What would you sit on after a long walk?"], True),
        ("3311026_77e3ab90c2_o", 26, 30, 1, [], ["the absent thing"], False),
    ],
}


def _box(x0: int, y0: int, x1: int, y1: int) -> list[list[float]]:
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def write_lisa_reasonseg(base: Path) -> Path:
    """LISA's ReasonSeg layout under base/ReasonSeg; returns that root."""
    root = Path(base) / "ReasonSeg"
    rng = np.random.default_rng(20261202)
    for split, images in IMAGES.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        for stem, h, w, orientation, shapes, texts, is_sentence in images:
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            exif = Image.Exif()
            if orientation != 1:
                exif[0x0112] = orientation
            Image.fromarray(pixels).save(root / split / f"{stem}.jpg", quality=90, exif=exif)
            shown_w, shown_h = (h, w) if orientation in (5, 6, 7, 8) else (w, h)  # polygons live on the shown image
            labelme = [{"label": label, "points": _box(min(x0, shown_w - 1), min(y0, shown_h - 1), min(x1, shown_w - 1),
                                                      min(y1, shown_h - 1)), "shape_type": "polygon"}
                       for label, x0, y0, x1, y1 in shapes]
            (root / split / f"{stem}.json").write_text(json.dumps(
                {"text": texts, "is_sentence": is_sentence, "shapes": labelme}), encoding="utf-8")
    return root


def segzero_rows(lisa_root: Path, split: str) -> list[dict]:
    """Seg-Zero's create_reasonseg_hf.py rows of one split: sorted json files, text[0], the label map
    of the stored-size canvas as bool (255 -> True), the JPEG's bytes and basename."""
    rows = []
    for json_path in sorted((Path(lisa_root) / split).glob("*.json")):
        img_path = json_path.with_suffix(".jpg")
        anno = json.loads(json_path.read_text(encoding="utf-8"))
        width, height = Image.open(img_path).size  # line 122: PIL's stored size, EXIF not applied
        mask = rasterize_labelme(anno["shapes"], height, width).astype(bool)
        rows.append({"image": {"bytes": img_path.read_bytes(), "path": img_path.name}, "text": anno["text"][0],
                     "mask": mask.tolist(), "image_id": json_path.stem, "ann_id": json_path.stem,
                     "img_height": height, "img_width": width})
    return rows


def segzero_parquet(lisa_root: Path, split: str, out: Path) -> Path:
    """The hub repository of Seg-Zero's copy of `split` (README.md + data/test-00000-of-00001.parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("text", pa.string()),
                        ("mask", pa.list_(pa.list_(pa.bool_()))), ("image_id", pa.string()), ("ann_id", pa.string()),
                        ("img_height", pa.int64()), ("img_width", pa.int64())],
                       metadata={"huggingface": json.dumps(HF_META)})
    rows = segzero_rows(lisa_root, split)
    (out / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / "data" / "test-00000-of-00001.parquet",
                   row_group_size=100)
    (out / "README.md").write_text(CARD % len(rows), encoding="utf-8")
    return out


def reasonseg_predictions(lisa_root: Path, split: str, out: Path) -> Path:
    """One PNG per image (<stem>.png, the EXIF-oriented size): the target shifted one pixel right and
    down, plus the left half of every ignore region (what a model may well segment there)."""
    from rvt_bench.core.frames import frame_size

    out.mkdir(parents=True, exist_ok=True)
    for json_path in sorted((Path(lisa_root) / split).glob("*.json")):
        h, w = frame_size(json_path.with_suffix(".jpg"))
        labels = rasterize_labelme(json.loads(json_path.read_text(encoding="utf-8"))["shapes"], h, w)
        pred = np.roll(np.roll(labels == 1, 1, 0), 1, 1)
        ignore = labels == 255
        cols = np.where(ignore.any(0))[0]
        if cols.size:
            pred[:, : (cols[0] + cols[-1]) // 2 + 1] |= ignore[:, : (cols[0] + cols[-1]) // 2 + 1]
        Image.fromarray(pred.astype(np.uint8) * 255).save(out / f"{json_path.stem}.png")
    return out


def zip_dir(folder: Path, archive: Path) -> Path:
    """`folder` packed into `archive` with the folder's name as its top directory, as a hub zip is."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, Path(folder.name) / f.relative_to(folder))
    return archive


def hub_cache(cache: Path, repo_id: str, files: Path, sha: str = SHA) -> Path:
    """Put the repository files of `files` (a folder) into a Hugging Face hub cache at `cache`
    under dataset `repo_id`, revision main = `sha`; returns the snapshot folder."""
    repo = Path(cache) / ("datasets--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / sha
    shutil.copytree(files, snap)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(sha)
    return snap


LMMS_REFCOCO_META = {"info": {"features": {
    "question_id": {"dtype": "string", "_type": "Value"}, "image": {"_type": "Image"},
    "question": {"dtype": "string", "_type": "Value"},
    "answer": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "segmentation": {"feature": {"dtype": "float32", "_type": "Value"}, "_type": "Sequence"},
    "bbox": {"feature": {"dtype": "float32", "_type": "Value"}, "_type": "Sequence"},
    "iscrowd": {"dtype": "int8", "_type": "Value"}, "file_name": {"dtype": "string", "_type": "Value"}}}}
LMMS_REFCOCO_CARD = """---
dataset_info:
  features:
  - {name: question_id, dtype: string}
  - {name: image, dtype: image}
  - {name: question, dtype: string}
  - {name: answer, sequence: string}
  - {name: segmentation, sequence: float32}
  - {name: bbox, sequence: float32}
  - {name: iscrowd, dtype: int8}
  - {name: file_name, dtype: string}
  splits:
%s
configs:
- config_name: default
  data_files:
%s
---
"""
LMMS_EXTRA_ID = "999999"  # a row of the copy that is no ref of the REFER split


def lmms_refcoco_rows(refer_root: Path, split: str) -> list[dict]:
    """lmms-lab/RefCOCO's rows of `split` (testA / testB) made from the REFER fixture (refcoco, unc):
    one row per ref in the refs file's order, question_id = the ref's ann_id, answer = its sentences'
    raw text, segmentation = the FIRST polygon of the annotation only (a ref whose annotation is an
    RLE or empty has no row: a ref missing on the hub), bbox, iscrowd, the image's bytes and name;
    plus one row (question_id LMMS_EXTRA_ID) that is no ref of the split."""
    import pickle

    from rvt_bench.loaders.refcoco import refer_split_matches

    root = Path(refer_root)
    refs = pickle.loads((root / "refcoco" / "refs(unc).p").read_bytes())
    inst = json.loads((root / "refcoco" / "instances.json").read_text())
    anns = {a["id"]: a for a in inst["annotations"]}
    images = {im["id"]: im for im in inst["images"]}
    image_dir = root / "images" / "mscoco" / "images" / "train2014"
    rows = []
    for ref in refs:
        ann = anns[ref["ann_id"]]
        seg = ann["segmentation"]
        if not refer_split_matches(split, ref["split"]) or not seg or not isinstance(seg[0], list):
            continue
        name = images[ref["image_id"]]["file_name"]
        rows.append({"question_id": str(ref["ann_id"]), "image": {"bytes": (image_dir / name).read_bytes(), "path": name},
                     "question": "Provide a short description for this region.",
                     "answer": [s["raw"] for s in ref["sentences"]], "segmentation": [float(v) for v in seg[0]],
                     "bbox": [float(v) for v in ann["bbox"]], "iscrowd": int(ann["iscrowd"]), "file_name": name})
    first = rows[0]
    rows.append({**first, "question_id": LMMS_EXTRA_ID, "answer": ["the thing on the hub only"],
                 "segmentation": [1.0, 1.0, 9.0, 1.0, 9.0, 9.0, 1.0, 9.0]})
    return rows


def lmms_refcoco_repo(refer_root: Path, out: Path, splits: tuple[str, ...] = ("testA", "testB")) -> Path:
    """The hub repository lmms-lab/RefCOCO in its exact format (README.md card +
    data/<split>-00000-of-00001.parquet, the columns and types of its card, datasets' schema metadata)
    for `splits`, from the REFER fixture (lmms_refcoco_rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("question_id", pa.string()), ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                        ("question", pa.string()), ("answer", pa.list_(pa.string())),
                        ("segmentation", pa.list_(pa.float32())), ("bbox", pa.list_(pa.float32())),
                        ("iscrowd", pa.int8()), ("file_name", pa.string())],
                       metadata={"huggingface": json.dumps(LMMS_REFCOCO_META)})
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in splits:
        rows = lmms_refcoco_rows(refer_root, split)
        counts[split] = len(rows)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / "data" / f"{split}-00000-of-00001.parquet",
                       row_group_size=100)
    (out / "README.md").write_text(LMMS_REFCOCO_CARD % (
        "\n".join(f"  - name: {s}\n    num_bytes: {(out / 'data' / f'{s}-00000-of-00001.parquet').stat().st_size}\n"
                  f"    num_examples: {n}" for s, n in counts.items()),
        "\n".join(f"  - {{split: {s}, path: data/{s}-*}}" for s in counts)), encoding="utf-8")
    return out
