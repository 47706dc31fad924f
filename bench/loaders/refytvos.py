"""Ref-YouTube-VOS (Seo et al., ECCV 2020) loader: referring video object segmentation from the
release's meta_expressions/<split>/meta_expressions.json and <split>/JPEGImages/. Its `valid` GT is
not public: predictions go to the CodaLab server as a zip (``python -m rvt_bench.harness.submission
refytvos ...``). Format and the submission: docs/benchmarks/refytvos.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders import video_meta
from rvt_bench.loaders.base import Dataset, existing_splits, layout_hint, read_json, require_dir, require_keys

PUBLISHED = "https://youtube-vos.org/dataset/rvos/ (data and server: competitions.codalab.org/competitions/29139)"
LAYOUT = (
    "  meta_expressions/<split>/meta_expressions.json\n"
    "  <split>/JPEGImages/<video>/<frame>.jpg"
)


class RefYTVOSDataset(Dataset):
    """A Ref-YouTube-VOS split as a sequence of video Samples, one per expression, without GT.

    root: the ``ref-youtube-vos`` directory (ReferFormer's docs/data.md layout); split: "valid"
    (default) or "test". exclude_test: leave out of `valid` the videos that
    meta_expressions/test/meta_expressions.json lists (the competition's valid file holds the 305
    test videos too; ReferFormer's inference_ytvos.py keeps the 202 valid ones the server scores),
    when that file exists; otherwise a warning says the test videos are in.

    Order: videos sorted by name (ReferFormer's order), expressions in the meta's order. Each
    Sample: id "<video>/<exp_id>", modality "video", task "segmentation", frames =
    <split>/JPEGImages/<video>/<frame>.jpg in the meta's order, ``target.masks`` None (no public GT),
    ``meta = {"video", "exp_id"}``. Raises DatasetFormatError when the meta file or frame folder is
    missing or malformed as a whole, or every expression failed; a bad video or expression goes to
    ``errors``.
    """

    name = "refytvos"

    def __init__(self, root: str | Path | None, split: str = "valid", exclude_test: bool = True) -> None:
        super().__init__()
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the ref-youtube-vos directory ({PUBLISHED})")
        self.root, self.split = Path(root), split
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        meta_path = self.root / "meta_expressions" / split / "meta_expressions.json"
        if not meta_path.is_file():
            present = [p.parent.name for p in self.root.glob("meta_expressions/*/meta_expressions.json")]
            raise DatasetFormatError(f"{self.name}: no split {split!r}: expected the file {meta_path} (not found); "
                                     f"splits present: {existing_splits(present)}; {layout_hint(layout, PUBLISHED)}")
        self.frames_dir = require_dir(self.root / split / "JPEGImages", dataset=self.name, layout=layout,
                                      published=PUBLISHED)
        videos = _videos(meta_path)
        left_out: set[str] = set()
        test_path = self.root / "meta_expressions" / "test" / "meta_expressions.json"
        if split == "valid" and exclude_test:
            if test_path.is_file():
                left_out = set(_videos(test_path))
            else:
                self.warn(f"refytvos: {test_path} not found: the valid split keeps every video of {meta_path}, which "
                          "holds the test videos too (the server scores the 202 valid ones)")
        video_meta.record_repeated(self, meta_path, videos)
        for video in sorted(v for v in videos if v not in left_out):
            info = videos[video]
            try:
                self._samples.extend(self._video_samples(video, info, meta_path))
            except DatasetFormatError as exc:
                for sample_id in video_meta.video_error_ids(video, info):
                    self.record_error(sample_id, str(exc))
        self.require_some_samples(str(meta_path))

    def _video_samples(self, video: str, info: Any, meta_path: Path) -> list[Sample]:
        where = f"{meta_path} video {video!r}"
        frame_ids, frames = video_meta.video_frames(self.frames_dir, video, info, where)
        video_meta.record_repeated_expressions(self, video, info["expressions"], where)
        samples = []
        for exp_id, exp in info["expressions"].items():
            sample_id = f"{video}/{exp_id}"
            with self.sample_errors(sample_id):
                video_meta.require_expression(exp, (), f"{where} expression {exp_id!r}")
                samples.append(Sample(id=sample_id, dataset=self.name, split=self.split, modality="video",
                                      frames=frames, frame_ids=frame_ids, query=exp["exp"], task="segmentation",
                                      target=Target(), meta={"video": video, "exp_id": str(exp_id)}))
        return samples


def _videos(meta_path: Path) -> dict:
    meta = read_json(meta_path, duplicates="mark")
    require_keys(meta, ("videos",), str(meta_path))
    if not isinstance(meta["videos"], dict):
        raise DatasetFormatError(f"{meta_path}: 'videos' must be an object {{<video>: {{...}}}}, "
                                 f"got {type(meta['videos']).__name__}")
    return meta["videos"]
