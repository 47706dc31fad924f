"""ReasonVOS (VideoLISA, NeurIPS 2024) loader: reasoning video object segmentation from the
release's meta_expressions.json, JPEGImages/ and Annotations/. Format, what the reference
evaluator scores and skips: docs/benchmarks/reasonvos.md.

Reference: showlab/VideoLISA@146f2bc `evaluation/reason_vos/eval_reason_vos.py` (scoring) and
`benchmark_check.py` (the layout).
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.core import files, masks, png
from rvt_bench.core.types import RLE, DatasetFormatError, Sample, Target
from rvt_bench.loaders.base import Dataset, layout_hint, read_json, require_dir, require_file, require_keys

PUBLISHED = "https://github.com/showlab/VideoLISA/blob/main/BENCHMARK.md (Google Drive link there)"
LAYOUT = (
    "ReasonVOS/\n"
    "  meta_expressions.json   {\"videos\": {<video>: {\"source\", \"frames\", \"expressions\": [{obj_id, exp_id, exp_text, is_sent}]}}}\n"
    "  JPEGImages/<video>/<frame>.jpg\n"
    "  Annotations/<source>_<video>_<obj_id>/<frame>.png"
)
EXPRESSION_KEYS = ("obj_id", "exp_id", "exp_text")


class ReasonVOSDataset(Dataset):
    """ReasonVOS as a sequence of video Samples, one per expression.

    root: the ``ReasonVOS`` directory (LAYOUT). split: only "test" (the release is one split).
    Order: videos and expressions in meta_expressions.json's order. Each Sample: id
    "<source>_<video>_<obj_id>_<exp_id>" (the reference's key in its result JSON), modality "video",
    task "segmentation", query = exp_text; frames: the frames the reference scores, i.e. the
    Annotations/<source>_<video>_<obj_id>/ PNGs sorted by name (`sorted(os.listdir)`, names ending
    in "png"), each as JPEGImages/<video>/<stem>.jpg; frame_ids = the PNG stems;
    target.masks = per frame RLE of the PNG read as cv2 IMREAD_GRAYSCALE, foreground where nonzero;
    meta = {"video", "source", "vid_key" (= <source>_<video>_<obj_id>), "obj_id", "exp_id" (str),
    "is_sent"}.

    Data errors (the expression is left out and listed, as the reference leaves it out): its
    video name or <source>_<video>_<obj_id> leads out of its folder ('..', absolute), its
    Annotations folder is missing (the reference prints "... not found, not take into metric
    computation"), holds no PNG, a PNG is unreadable or of another size than the first (the
    reference fails on it), a frame's JPEG is missing. A repeated expression key is kept once (the
    reference's dict keeps one). Raises DatasetFormatError for a missing root or meta file, another
    split, or a meta file without "videos".
    """

    name = "reasonvos"

    def __init__(self, root: str | Path, split: str = "test") -> None:
        super().__init__()
        if split != "test":
            raise DatasetFormatError(f"reasonvos: the release has one split, 'test'; got {split!r}")
        self.root = require_dir(Path(root), dataset=self.name, layout=LAYOUT, published=PUBLISHED)
        meta_path = require_file(self.root / "meta_expressions.json", dataset=self.name, layout=LAYOUT, published=PUBLISHED)
        meta = read_json(meta_path)
        if not isinstance(meta, dict) or not isinstance(meta.get("videos"), dict):
            raise DatasetFormatError(f"reasonvos: {meta_path} has no \"videos\" mapping; {layout_hint(LAYOUT, PUBLISHED)}")
        tracks: dict[str, tuple[list[str], list[RLE]] | DatasetFormatError] = {}
        seen: set[str] = set()
        for video, record in meta["videos"].items():
            where = f"{meta_path} video {video!r}"
            if not isinstance(record, dict) or "source" not in record or not isinstance(record.get("expressions"), list):
                self.record_error(str(video), f"{where}: expected {{\"source\", \"expressions\": [...]}}")
                continue
            for k, exp in enumerate(record["expressions"]):
                vid_key = f"{record['source']}_{video}_{exp.get('obj_id') if isinstance(exp, dict) else '?'}"
                sample_id = f"{vid_key}_{exp.get('exp_id') if isinstance(exp, dict) else k}"
                if sample_id in seen:
                    self.warn(f"reasonvos: expression {sample_id} appears twice in {meta_path}; kept once, as the reference's result dict")
                    continue
                seen.add(sample_id)
                with self.sample_errors(sample_id):
                    require_keys(exp, EXPRESSION_KEYS, f"{where} expression {k}")
                    # the video's name is refused first: an absolute or '..' name would otherwise fail as a
                    # missing annotation folder, hiding why (the hostile-dataset kit)
                    frame_dir = files.inside(self.root / "JPEGImages", str(video), f"{where}: video name")
                    if vid_key not in tracks:
                        try:
                            tracks[vid_key] = self._track(vid_key)
                        except DatasetFormatError as exc:
                            tracks[vid_key] = exc
                    track = tracks[vid_key]
                    if isinstance(track, DatasetFormatError):
                        raise track
                    stems, rles = track
                    frames = [frame_dir / f"{s}.jpg" for s in stems]
                    missing = [str(f) for f in frames if not f.is_file()]
                    if missing:
                        raise DatasetFormatError(f"frame {missing[0]} does not exist ({len(missing)} of {len(frames)} missing)")
                    self._samples.append(Sample(
                        id=sample_id, dataset=self.name, split=split, modality="video", frames=[str(f) for f in frames],
                        frame_ids=list(stems), query=str(exp["exp_text"]), task="segmentation",
                        target=Target(masks=list(rles)),
                        meta={"video": str(video), "source": str(record["source"]), "vid_key": vid_key,
                              "obj_id": exp["obj_id"], "exp_id": str(exp["exp_id"]), "is_sent": exp.get("is_sent")}))
        self.require_some_samples(str(meta_path))

    def _track(self, vid_key: str) -> tuple[list[str], list[RLE]]:
        """(stems, RLEs) of Annotations/<vid_key>/, the PNGs sorted by name, as the reference reads them."""
        folder = files.inside(self.root / "Annotations", vid_key, "annotation folder <source>_<video>_<obj_id>")
        if not folder.is_dir():
            raise DatasetFormatError(f"annotation folder {folder} not found (the reference skips this expression: "
                                     "\"not found, not take into metric computation\")")
        names = sorted(n for n in (p.name for p in folder.iterdir()) if n.endswith("png"))
        if not names:
            raise DatasetFormatError(f"annotation folder {folder} holds no PNG")
        stems, rles, size = [], [], None
        for name in names:
            if not name.endswith(".png"):
                raise DatasetFormatError(f"annotation {folder / name}: a name ending in 'png' without '.png'")
            shape, box, crop = png.read_gray(folder / name)
            if size is None:
                size = shape
            elif shape != size:
                raise DatasetFormatError(f"annotation {folder / name} is {list(shape)} [H, W], the first PNG of "
                                         f"{folder} is {list(size)}")
            stems.append(name[:-4])
            rles.append(masks.encode_box(crop, box, shape))
        return stems, rles

