"""GroundMoRe (Deng et al. CVPR 2025, motion-grounded video reasoning) loader: the test JSON and
per-video frames and masks, sampled and windowed as the authors' evaluation does. Format, the
reference's rules and the prediction layout: docs/benchmarks/groundmore.md.

Reference: dengandong/GroundMoRe@a79cc28 `evaluate_groundmore.py` (its scoring is inline, around
the model's inference; there is no file-based evaluator upstream).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rvt_bench.core import files, masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders.base import Dataset, layout_hint, read_json, require_dir, require_file, require_keys

PUBLISHED = "https://huggingface.co/datasets/groundmore/GroundMoRe (code: github.com/dengandong/GroundMoRe)"
LAYOUT = (
    "GroundMoRe/\n"
    "  groundmore_test.json   {\"videos\": {<video ending _MMSS_MMSS>: {\"questions\": {<exp_id>: {question, answer, obj_id, q_type, action_start, action_end}}}}}\n"
    "  groundmore_videos/<video>/images/<frame files>\n"
    "  groundmore_videos/<video>/masks/frame_<index:06d>.png   object ids as palette indices"
)
QUESTION_KEYS = ("question", "obj_id", "q_type", "action_start", "action_end")
FPS = 6  # the reference's frame rate of the extracted frames


def seconds(text: str) -> int:
    """The reference's `time_str_to_seconds`: "[[H:]M:]S" -> seconds (int). Raises ValueError."""
    parts = [int(p) for p in str(text).split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def action_window(video: str, start: str, end: str) -> tuple[int, int]:
    """(first, last) frame index of the action, inclusive, as the reference computes them: the clip
    starts at MM:SS from the video name's last 9 characters ("..._MMSS_MMSS"), 6 frames a second,
    first = (start - clip start) * 6, last = (end - clip start) * 6 - 1. Raises ValueError."""
    tail = video[-9:].split("_")[0]
    clip_start = seconds(f"{tail[:2]}:{tail[2:]}")
    return (seconds(start) - clip_start) * FPS, (seconds(end) - clip_start) * FPS - 1


def sampled_indices(n_frames: int, num: int) -> list[int]:
    """`np.linspace(0, n - 1, num=num, dtype=int)`: the reference's uniformly sampled frame indices
    (repeated when the video has fewer than `num` frames)."""
    return [int(i) for i in np.linspace(0, n_frames - 1, num=num, dtype=int)]


class GroundMoReDataset(Dataset):
    """GroundMoRe as a sequence of video Samples, one per question.

    root: the directory holding the annotation JSON and the videos (LAYOUT). split: "test".
    annotation: the JSON's name under root ("groundmore_test.json", the reference's; the hub
        release's "test_v2.json"). videos_dir: the videos' folder under root. num_frames: frames
        sampled per question (the reference's 20).
    Order: videos and questions in the JSON's order. Each Sample: id "<video>/<exp_id>", modality
    "video", task "segmentation", query = the question; frames = the `num_frames` frames at
    `sampled_indices(n)` of images/ sorted by name (n = every file there); frame_ids = their stems;
    target.masks, per sampled index k (the reference's rules): inside the action window
    (`action_window`), masks/frame_<k:06d>.png read as PIL `convert("P")` == obj_id, all zero when
    that PNG is missing; outside the window all zero; every mask of the first sampled frame's size.
    meta = {"video", "exp_id", "obj_id", "q_type", "answer", "action_start", "action_end",
    "indices", "card" (the action window in words, for the sample's card), "frame_notes" ("outside
    action" for a sampled frame outside the window, else "")}.

    Data errors (the question is left out and listed): its video's images/ folder is missing (the
    reference prints "Missing frames" and skips it), its video name leads out of the videos folder
    ('..', absolute), a question lacks a key or has an unreadable time, a mask PNG cannot be read,
    breaks dataset.limits (not a regular file, too large, over max_image_pixels: checked before
    any decode) or has another size than the first sampled frame (the reference fails on it).
    Raises DatasetFormatError for a missing root or annotation, another split, or a JSON without
    "videos".
    """

    name = "groundmore"

    def __init__(self, root: str | Path, split: str = "test", annotation: str = "groundmore_test.json",
                 videos_dir: str = "groundmore_videos", num_frames: int = 20) -> None:
        super().__init__()
        if split != "test":
            raise DatasetFormatError(f"groundmore: the evaluated split is 'test' (its JSON is dataset.loader.annotation); got {split!r}")
        self.root = require_dir(Path(root), dataset=self.name, layout=LAYOUT, published=PUBLISHED)
        path = require_file(files.inside(self.root, annotation, "groundmore annotation"), dataset=self.name,
                            layout=LAYOUT, published=PUBLISHED)
        data = read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("videos"), dict):
            raise DatasetFormatError(f"groundmore: {path} has no \"videos\" mapping; {layout_hint(LAYOUT, PUBLISHED)}")
        videos = files.inside(self.root, videos_dir, "groundmore videos")
        for video, record in data["videos"].items():
            questions = record.get("questions") if isinstance(record, dict) else None
            if not isinstance(questions, dict):
                self.record_error(str(video), f"{path} video {video!r}: expected {{\"questions\": {{...}}}}")
                continue
            frames: list[str] | None = None
            for exp_id, q in questions.items():
                sample_id = f"{video}/{exp_id}"
                with self.sample_errors(sample_id):
                    require_keys(q, QUESTION_KEYS, f"{path} {sample_id}")
                    video_dir = files.inside(videos, str(video), f"{path} video name")
                    if frames is None:
                        frames = self._frames(video_dir / "images")
                    self._samples.append(self._sample(video_dir, str(video), str(exp_id), q, frames,
                                                      int(num_frames), split))
        self.require_some_samples(str(path))

    @staticmethod
    def _frames(folder: Path) -> list[str]:
        if not folder.is_dir():
            raise DatasetFormatError(f"frames folder {folder} not found (the reference prints \"Missing frames\" and "
                                     "skips the question)")
        names = sorted(os.listdir(folder))
        if not names:
            raise DatasetFormatError(f"frames folder {folder} is empty")
        return [str(folder / n) for n in names]

    def _sample(self, video_dir: Path, video: str, exp_id: str, q: dict, frames: list[str], num: int,
                split: str) -> Sample:
        try:
            start, end = action_window(video, q["action_start"], q["action_end"])
            obj_id = int(q["obj_id"])
        except (ValueError, TypeError) as exc:
            raise DatasetFormatError(f"question {video}/{exp_id}: unreadable obj_id or action time "
                                     f"({q['action_start']!r}, {q['action_end']!r}): {exc}") from exc
        indices = sampled_indices(len(frames), num)
        chosen = [frames[i] for i in indices]
        h, w = frame_size(chosen[0])
        gt = []
        for k in indices:
            mask_path = video_dir / "masks" / f"frame_{k:06d}.png"
            if start <= k <= end and mask_path.exists():
                values = files.read_image(mask_path, "mask PNG", mode="P")  # limits checked before the decode
                if values.shape != (h, w):
                    raise DatasetFormatError(f"mask {mask_path} is {list(values.shape)} [H, W], the frames are {[h, w]}")
                gt.append(masks.encode_fast(values == obj_id))
            else:  # outside the action window, or no mask file: the reference's all-zero GT
                gt.append(masks.empty(h, w))
        inside = [start <= k <= end for k in indices]
        card = (f"action window: frames {start}-{end} of the video's {len(frames)} (ground truth empty outside it; "
                f"{sum(inside)} of the {len(indices)} sampled frames inside)")
        return Sample(id=f"{video}/{exp_id}", dataset=self.name, split=split, modality="video", frames=chosen,
                      frame_ids=[Path(f).stem for f in chosen], query=str(q["question"]), task="segmentation",
                      target=Target(masks=gt),
                      meta={"video": video, "exp_id": exp_id, "obj_id": obj_id, "q_type": str(q["q_type"]),
                            "answer": q.get("answer"), "action_start": start, "action_end": end, "indices": indices,
                            "card": card, "frame_notes": ["" if i else "outside action" for i in inside]})
