"""``provided`` perception: twins shipped with a dataset, one JSON file per sample.

A file holds ``Twin.to_dict()`` (rvt_bench.adapters.twin.schema, ``version`` TWIN_VERSION; masks inline as COCO
RLE under ``masks``, referenced by id from each instance frame) for the sample's frames in order.
Its path is the sample's own ``meta["twin_path"]`` when the dataset names one (the RVTBench loader
does), else ``root / path_template.format(id=..., dataset=..., split=..., video=...)``; ``video`` is
``sample.meta["video"]`` when present, else the sample id (so per-expression samples of one video
can share a twin). Only the planned tools' fields are copied into the twin being built:
- SAM2: instances (ids, per-frame bbox/centroid/area/mask) and their masks;
- OWLv2: each instance's label and score; SemanticAnalysis: label;
- DepthAnything2: nothing visible (a marker for DepthStats); DepthStats: each instance's depth as
  the file states it (unit and convention included);
- Qwen2.5-VL: video summary, frame captions, instance captions;
- Trajectory: the shared geometry (rvt_bench.adapters.twin.perception), recomputed from the centroids.
A field that is null in the file stays null.
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.adapters.twin.perception import Perception
from rvt_bench.adapters.twin.schema import Instance, Twin
from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError, ParseError, Sample

PROVIDED_VERSION = 1


class ProvidedPerception(Perception):
    """Perception read from per-sample twin files (see module docstring).

    root: directory of the files. path_template: relative path of a sample's file. segmenter: refused
    (the instances are the file's).
    Raises AdapterError naming the file when it is missing, is not a valid twin of this version, or
    does not match the sample (frame count, frame ids, or [H, W] of the frames).
    """

    name = "provided"

    def __init__(self, root: str | None = None, path_template: str = "{video}.json", segmenter: object = None):
        self.refuse_segmenter(segmenter)
        self.root = Path(root) if root else None
        self.path_template = path_template

    def fingerprint(self) -> dict:
        return {"name": self.name, "version": PROVIDED_VERSION, "root": str(self.root),
                "path_template": self.path_template}

    def path(self, sample: Sample) -> Path:
        if sample.meta.get("twin_path"):
            return Path(sample.meta["twin_path"])
        if self.root is None:
            raise AdapterError(f"sample {sample.id}: the dataset names no twin file (meta['twin_path']); "
                               "set perception.root (and perception.path_template)")
        video = str(sample.meta.get("video", sample.id))
        try:
            rel = self.path_template.format(id=sample.id, dataset=sample.dataset, split=sample.split, video=video)
        except (KeyError, IndexError) as exc:
            raise AdapterError(f"perception.path_template {self.path_template!r} uses an unknown field {exc}; "
                               "known: id, dataset, split, video") from exc
        return self.root / rel

    def _source(self, sample: Sample, twin: Twin) -> Twin:
        """The sample's provided twin, read and checked once per build."""
        if "provided" in twin.artifacts:
            return twin.artifacts["provided"]
        path = self.path(sample)
        try:  # a regular file of bounded size and depth (rvt_bench.core.files), like every data file
            record = files.read_json(path, what="provided twin")
        except DatasetFormatError as exc:
            raise AdapterError(f"sample {sample.id}: {exc}") from exc
        try:
            source = Twin.from_dict(record)
        except ParseError as exc:
            raise AdapterError(f"sample {sample.id}: provided twin {path}: {exc}") from exc
        ids = [f.frame_id for f in source.frames]
        if ids != list(sample.frame_ids):
            raise AdapterError(f"sample {sample.id}: provided twin {path} has frame ids {ids[:5]}... "
                               f"({len(ids)}), expected {list(sample.frame_ids)[:5]}... ({sample.num_frames})")
        if list(source.size) != list(twin.size) or source.num_frames != twin.num_frames:
            raise AdapterError(f"sample {sample.id}: provided twin {path} is {source.num_frames} frames of "
                               f"{list(source.size)}, expected {twin.num_frames} of {list(twin.size)}")
        for inst in source.instances:
            for t, fr in inst.frames.items():
                if not 0 <= t < twin.num_frames or fr.mask not in source.masks:
                    raise AdapterError(f"sample {sample.id}: provided twin {path}: instance {inst.id} frame {t} "
                                       f"refers to mask {fr.mask!r}, which is missing or out of range")
        twin.artifacts["provided"] = source
        return source

    def _pairs(self, sample: Sample, twin: Twin) -> list[tuple[Instance, Instance]]:
        """(instance being built, provided instance) by id."""
        by_id = {inst.id: inst for inst in self._source(sample, twin).instances}
        return [(inst, by_id[inst.id]) for inst in twin.instances if inst.id in by_id]

    def sam2(self, sample: Sample, twin: Twin) -> None:
        source = self._source(sample, twin)
        for inst in source.instances:
            twin.instances.append(Instance(id=inst.id, frames=dict(inst.frames)))
            for fr in inst.frames.values():
                twin.masks[fr.mask] = dict(source.masks[fr.mask])

    def owlv2(self, sample: Sample, twin: Twin) -> None:
        for inst, given in self._pairs(sample, twin):
            inst.label, inst.score = given.label, given.score

    def semantic_analysis(self, sample: Sample, twin: Twin) -> None:
        for inst, given in self._pairs(sample, twin):
            inst.label = given.label

    def depth_anything2(self, sample: Sample, twin: Twin) -> None:
        self._source(sample, twin)
        twin.artifacts["depth"] = "provided"

    def depth_stats(self, sample: Sample, twin: Twin) -> None:
        for inst, given in self._pairs(sample, twin):
            inst.depth = given.depth

    def qwen25vl(self, sample: Sample, twin: Twin) -> None:
        source = self._source(sample, twin)
        twin.video.summary = source.video.summary
        for frame, given in zip(twin.frames, source.frames):
            frame.caption = given.caption
        for inst, given in self._pairs(sample, twin):
            inst.caption = given.caption
