"""Build a sample's digital twin just in time: only the planned tools run, in the plan's order."""
from __future__ import annotations

from rvt_bench.adapters.twin.perception import Perception
from rvt_bench.adapters.twin.registry import TOOLS
from rvt_bench.adapters.twin.schema import FrameInfo, Twin, VideoInfo
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import AdapterError, Sample


def build_twin(sample: Sample, order: list[str], perception: Perception) -> Twin:
    """Run the tools of ``order`` (a topological order from rvt_bench.adapters.twin.dag.validate_dag) through
    ``perception`` and return the twin.

    The video and frame tiers are always filled: size [H, W] from the first mask of the sample's
    annotations or target (else the first frame's header), fps from ``sample.meta["fps"]`` (None when
    absent; timestamps = index / fps seconds). Raises AdapterError when ``order`` names an unknown
    tool, repeats one, or puts a tool before one it requires; and whatever the backend raises.
    """
    done: set[str] = set()
    for tool in order:
        if tool not in TOOLS:
            raise AdapterError(f"sample {sample.id}: plan order names unknown tool {tool!r}")
        if tool in done:
            raise AdapterError(f"sample {sample.id}: plan order runs {tool!r} twice")
        lacking = [r for r in TOOLS[tool].requires if r not in done]
        if lacking:
            raise AdapterError(f"sample {sample.id}: plan order runs {tool!r} before {lacking}")
        done.add(tool)

    fps = sample.meta.get("fps")
    if fps is not None and (not isinstance(fps, (int, float)) or fps <= 0):
        raise AdapterError(f"sample {sample.id}: meta['fps'] must be a positive number, got {fps!r}")
    height, width = _size(sample)
    twin = Twin(
        video=VideoInfo(size=[height, width], num_frames=sample.num_frames,
                        fps=None if fps is None else float(fps)),
        frames=[
            FrameInfo(index=t, frame_id=fid, timestamp=None if fps is None else t / float(fps))
            for t, fid in enumerate(sample.frame_ids)
        ],
    )
    for tool in order:
        perception.run(tool, sample, twin)
    return twin


def _size(sample: Sample) -> tuple[int, int]:
    """(H, W) of the sample's frames, from a mask when one exists (no image read needed)."""
    candidates = [m for ann in sample.annotations or [] for m in ann.masks]
    candidates += list(sample.target.masks or [])
    for rle in candidates:
        if rle is not None:
            return int(rle["size"][0]), int(rle["size"][1])
    if not sample.frames:
        raise AdapterError(f"sample {sample.id} has no frames")
    return frame_size(sample.frames[0])
