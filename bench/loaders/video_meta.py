"""The video entries of a Ref-YouTube-VOS-style ``meta_expressions.json`` ({"videos": {<video>:
{"frames": [...], "expressions": {<exp_id>: {...}}}}}), checked the same way by every loader that
reads one (ReVOS, MeViS, Ref-YouTube-VOS): frame names, frame folder, repeated keys.

Each check raises DatasetFormatError naming the meta file, the video and what was expected; a
loader records it for every expression of the video (``video_error_ids``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.loaders.base import Dataset, require_keys
from rvt_bench.core.types import DatasetFormatError


def video_frames(frames_dir: Path, video: str, info: Any, where: str) -> tuple[list[str], list[str]]:
    """(frame ids, frame paths) of one video entry: ``info["frames"]`` in the meta's order (the
    temporal order), paths ``<frames_dir>/<video>/<frame>.jpg``.

    where: the entry's name in messages ("<meta file> video '<video>'"). Raises DatasetFormatError
    when the entry lacks "frames" or "expressions" or repeats a key, "frames" is not a non-empty
    list, the frame folder does not exist, a video or frame name leads out of its folder, or
    "expressions" is not an object."""
    require_keys(info, ("frames", "expressions"), where)
    if files.repeated_keys(info):
        raise DatasetFormatError(f"{where}: key {files.repeated_keys(info)[0]!r} appears twice")
    if not isinstance(info["frames"], list):
        raise DatasetFormatError(f"{where}: 'frames' must be a list of frame names, got {type(info['frames']).__name__}")
    frame_ids = [str(f) for f in info["frames"]]
    video_dir = files.inside(frames_dir, video, f"{where}: video name")
    if not video_dir.is_dir():
        raise DatasetFormatError(f"{where}: frame directory {video_dir} does not exist")
    frames = [str(files.inside(video_dir, f"{f}.jpg", f"{where}: frame name")) for f in frame_ids]
    if not frames:
        raise DatasetFormatError(f"{where}: 'frames' is empty")
    if not isinstance(info["expressions"], dict):
        raise DatasetFormatError(f"{where}: 'expressions' must be an object {{<exp_id>: {{...}}}}")
    return frame_ids, frames


def video_error_ids(video: str, info: Any) -> list[str]:
    """The sample ids ("<video>/<exp_id>") a video-level problem fails: every expression of the
    entry (repeated ones included), or the video's name when none can be read."""
    expressions = info.get("expressions") if isinstance(info, dict) else None
    ids = [*expressions, *files.repeated_keys(expressions)] if isinstance(expressions, dict) else []
    return [f"{video}/{exp_id}" for exp_id in ids] or [video]


def record_repeated(dataset: Dataset, meta_path: Path, videos: Any) -> None:
    """Record as data errors the expressions of every video entry that a later entry of the same
    name replaced (``read_json(..., duplicates="mark")`` keeps the dropped ones)."""
    for video, earlier in getattr(videos, "dropped", []):
        expressions = earlier.get("expressions") if isinstance(earlier, dict) else None
        for exp_id in expressions if isinstance(expressions, dict) and expressions else [None]:
            dataset.record_error(video if exp_id is None else f"{video}/{exp_id}",
                                 f"{meta_path}: video {video!r} appears twice in 'videos'; this earlier entry is left "
                                 f"out (a JSON reader keeps only the last)")


def record_repeated_expressions(dataset: Dataset, video: str, expressions: Any, where: str) -> None:
    """Record as data errors the expressions that a later one of the same id replaced."""
    for exp_id, _ in getattr(expressions, "dropped", []):
        dataset.record_error(f"{video}/{exp_id}", f"{where}: expression id {exp_id!r} appears twice in 'expressions'; "
                                                  f"this earlier one is left out (a JSON reader keeps only the last)")


def require_expression(exp: Any, keys: tuple[str, ...], where: str) -> str:
    """The text of a meta_expressions.json expression (MeViS, Ref-YouTube-VOS, Ref-SAV, Long-RVOS):
    `exp` must hold "exp" and `keys`; DatasetFormatError naming `where` when a key is missing or
    "exp" is not a non-empty string."""
    require_keys(exp, ("exp", *keys), where)
    if not isinstance(exp["exp"], str) or not exp["exp"].strip():
        raise DatasetFormatError(f"{where}: field 'exp' must be a non-empty string")
    return exp["exp"]
