"""``oracle`` perception: the twin built from the dataset's own annotations.

A perception upper bound and the offline default. Each tool is stood in for as follows:
- SAM2: one instance per annotated object visible in at least one frame, its masks as annotated;
  ids 1..N follow the annotation ids (numeric ids numerically, then the rest as strings), an order
  unrelated to which object is the target, so the twin does not reveal the answer.
- DepthAnything2: no dense map exists; the annotated per-frame depth of each object (metres,
  larger = farther) is handed to DepthStats.
- DepthStats: per instance, mean and population std (ddof=0) *across frames* of the annotated
  per-frame depth, over the frames where the instance is visible and its depth is known (the
  within-frame spread is unknown to the annotations); None when no such frame exists.
- OWLv2: label = annotated category (None when the dataset has none), score = 1.0.
- SemanticAnalysis: label = annotated category (None when the dataset has none).
- Qwen2.5-VL: the annotations hold no captions, so every caption and the summary are
  "unavailable" (never invented).
- Trajectory: the shared geometry of rvt_bench.adapters.twin.perception.
"""
from __future__ import annotations

import numpy as np

from rvt_bench.adapters.twin import geometry
from rvt_bench.adapters.twin.perception import Perception
from rvt_bench.adapters.twin.schema import Depth, Instance, InstanceFrame, Twin
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import AdapterError, InstanceAnnotation, Sample

UNAVAILABLE = "unavailable"
ORACLE_VERSION = 1


class OraclePerception(Perception):
    """Perception from ``sample.annotations`` (see module docstring). No arguments (Hydra
    ``_target_: rvt_bench.adapters.twin.oracle.OraclePerception``; a ``segmenter`` is refused). Raises AdapterError when the sample has
    no annotations or an annotation does not cover the sample's frames."""

    name = "oracle"

    def __init__(self, segmenter: object = None):
        self.refuse_segmenter(segmenter)

    def fingerprint(self) -> dict:
        return {"name": self.name, "version": ORACLE_VERSION}

    def sam2(self, sample: Sample, twin: Twin) -> None:
        ids: dict[int, str] = {}
        for ann in _ordered(sample):
            frames: dict[int, InstanceFrame] = {}
            instance_id = len(ids) + 1
            for t, rle in enumerate(ann.masks):
                if rle is None:
                    continue
                if [int(v) for v in rle["size"]] != list(twin.size):
                    raise AdapterError(
                        f"sample {sample.id}: annotation {ann.id!r} frame {t} mask has size {rle['size']}, "
                        f"expected {list(twin.size)}"
                    )
                geo = geometry.mask_geometry(mask_io.decode(rle))
                if geo is None:
                    continue
                ref = f"m{instance_id}_{t}"
                twin.masks[ref] = {"size": [int(v) for v in rle["size"]], "counts": rle["counts"]}
                frames[t] = InstanceFrame(bbox=geo[0], centroid=geo[1], area=geo[2], mask=ref)
            if frames:  # an object never visible is no instance a segmenter could report
                twin.instances.append(Instance(id=instance_id, frames=frames, score=1.0))
                ids[instance_id] = ann.id
        twin.artifacts["oracle_annotation_ids"] = ids

    def depth_anything2(self, sample: Sample, twin: Twin) -> None:
        twin.artifacts["depth"] = {ann.id: ann.depth for ann in _annotations(sample)}

    def depth_stats(self, sample: Sample, twin: Twin) -> None:
        depth = twin.artifacts["depth"]
        for inst, ann_id in self._matched(sample, twin):
            per_frame = depth.get(ann_id) or []
            values = [per_frame[t] for t in sorted(inst.frames) if t < len(per_frame) and per_frame[t] is not None]
            inst.depth = None if not values else Depth(
                mean=float(np.mean(values)), std=float(np.std(values)), frames=len(values))

    def owlv2(self, sample: Sample, twin: Twin) -> None:
        labels = {ann.id: ann.label for ann in _annotations(sample)}
        for inst, ann_id in self._matched(sample, twin):
            inst.label = labels[ann_id] or None
            inst.score = 1.0

    def semantic_analysis(self, sample: Sample, twin: Twin) -> None:
        labels = {ann.id: ann.label for ann in _annotations(sample)}
        for inst, ann_id in self._matched(sample, twin):
            inst.label = labels[ann_id] or None

    def qwen25vl(self, sample: Sample, twin: Twin) -> None:
        _annotations(sample)
        twin.video.summary = UNAVAILABLE
        for frame in twin.frames:
            frame.caption = UNAVAILABLE
        for inst in twin.instances:
            inst.caption = UNAVAILABLE

    def _matched(self, sample: Sample, twin: Twin) -> list[tuple[Instance, str]]:
        """Twin instances paired with their annotation ids (empty before SAM2 ran)."""
        _annotations(sample)
        ids = twin.artifacts.get("oracle_annotation_ids", {})
        return [(inst, ids[inst.id]) for inst in twin.instances if inst.id in ids]


def _annotations(sample: Sample) -> list[InstanceAnnotation]:
    if not sample.annotations:
        raise AdapterError(
            f"sample {sample.id} ({sample.dataset}/{sample.split}) has no instance annotations; "
            "oracle perception needs them (use a model-based perception backend)"
        )
    for ann in sample.annotations:
        if len(ann.masks) != sample.num_frames:
            raise AdapterError(
                f"sample {sample.id}: annotation {ann.id!r} has {len(ann.masks)} masks, "
                f"expected one per frame ({sample.num_frames})"
            )
        if ann.depth is not None and len(ann.depth) != sample.num_frames:
            raise AdapterError(
                f"sample {sample.id}: annotation {ann.id!r} has {len(ann.depth)} depth values, "
                f"expected one per frame ({sample.num_frames})"
            )
    return sample.annotations


def _ordered(sample: Sample) -> list[InstanceAnnotation]:
    anns = _annotations(sample)
    keys = [str(a.id) for a in anns]
    if len(set(keys)) != len(keys):
        raise AdapterError(f"sample {sample.id}: duplicate annotation ids {sorted(keys)}")
    return sorted(anns, key=lambda a: (0, int(a.id), "") if str(a.id).isdigit() else (1, 0, str(a.id)))
