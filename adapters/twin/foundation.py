"""``foundation`` perception: the twin from real vision foundation models, just in time, cached.

Each plan node is served as follows (backends in adapters/twin/backends/, one per model):
- SAM2: objects on the key frame (``key_frame``: "first" or "middle"), tracked through the video.
  Prompted by OWLv2's key-frame boxes when OWLv2 ran upstream in the plan (e.g. ``{"OWLv2": [],
  "SAM2": ["OWLv2"]}``; instances then take the detections' label and score; no detection = no
  instance), automatic mode otherwise (score = predicted IoU). Instance ids 1..N in prompt order.
- OWLv2: detections on the key frame for the phrases ``sample.meta["phrases"]`` when the dataset
  gives them, else ``vocabulary`` plus the query itself (``use_query``); the plan format carries no
  parameters, so the planner cannot name phrases. Run after SAM2, each instance visible on the key
  frame takes the label and score of the detection it overlaps most (box IoU >= ``match_iou``,
  greedy, one detection per instance); the others keep their label (None after SAM2's automatic
  mode) and their SAM2 score.
- DepthAnything2: a depth map per frame at the frame's (H, W), handed to DepthStats (stored as
  float16 in the cache, and used as stored in every run). Which model: the ``depth`` backend, chosen
  by ``perception/depth=relative`` (default) | ``metric_indoor`` | ``metric_outdoor`` | ``depth_pro``
  (conf/perception/depth/; metric = metres, larger = farther; depth_pro: Depth Pro,
  rvt_bench.adapters.twin.backends.depth_pro).
- DepthStats: per instance, mean and population std (ddof=0) of the depth map over the instance's
  mask pixels pooled across its visible frames; ``frames`` = how many frames contributed. Unit and
  convention are the depth backend's: relative inverse depth, LARGER = NEARER for DepthAnything V2's
  relative checkpoints (the default), metres, larger = farther for its metric ones
  (rvt_bench.adapters.twin.backends.depth_anything) and for Depth Pro, stated in each Depth and in the twin's ``depth_unit``.
- Qwen2.5-VL: a caption per frame, a video summary from up to ``summary_frames`` evenly spaced
  frames, and a caption per instance from a crop around its box on the frame where it is largest.
- SemanticAnalysis: each instance's label, from Qwen2.5-VL on the same crop.
- Trajectory: the shared geometry (rvt_bench.adapters.twin.perception).
- DINOv2: an appearance feature per instance from the same crop, left in ``twin.artifacts["dinov2"]``
  for JiT's scene graph, and each instance's semantic embedding (``Instance.embedding``: the crop's
  patch tokens pooled over the instance's mask); its step lives with its model (rvt_bench.adapters.twin.backends.dinov2), as every
  tool added after the first release does: such steps use the public helpers ``cached``,
  ``backend``, ``frames``, ``key_frame_index`` and ``crop_box``, and need no edit here.

Ablation: ``disable`` names model nodes (registry.model_nodes(): SAM2, DepthAnything2, OWLv2,
Qwen2.5-VL, DINOv2, ...) whose tool is
skipped even when planned; a node whose model is disabled (SemanticAnalysis uses Qwen2.5-VL) or one
of whose required nodes was skipped is skipped too. Skipped nodes leave their twin fields null, are
absent from ``twin.tools`` and are listed in ``twin.artifacts["skipped"]``.

Cache: every model call goes through rvt_bench.adapters.twin.cache.ToolCache keyed by (frames' content,
call, backend fingerprint, params); ``twin.artifacts["cache"]`` maps each call of the build to
"hit" or "miss". A hit reads no frame pixels and loads no model.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from rvt_bench.adapters.twin import geometry
from rvt_bench.adapters.twin.backends.owlv2 import box_iou
from rvt_bench.adapters.twin.cache import ToolCache, cache_key, video_digest
from rvt_bench.adapters.twin.perception import Perception
from rvt_bench.adapters.twin import registry
from rvt_bench.adapters.twin.schema import Depth, Instance, InstanceFrame, Twin
from rvt_bench.core import masks as mask_io
from rvt_bench.core.frames import read_frame
from rvt_bench.core.types import AdapterError, Sample

log = logging.getLogger(__name__)

FOUNDATION_VERSION = 1
# Model nodes, their config keys and which model each tool calls: rvt_bench.adapters.twin.registry (backend, uses).
# The backends of the first release are always in the fingerprint; later ones (DINOv2, for JiT) only
# when configured, so earlier configurations keep their fingerprint (and run directory).
_FIRST_BACKENDS = ("SAM2", "DepthAnything2", "OWLv2", "Qwen2.5-VL")
DEFAULT_VOCABULARY = ("person", "animal", "vehicle", "object")
CROP_MARGIN = 0.1
"""Instance crops for Qwen2.5-VL extend the box by this fraction of its size on each side."""
MIN_CROP = 28
"""Smallest crop side in pixels (one Qwen2.5-VL merged patch)."""


class FoundationPerception(Perception):
    """Perception from foundation models (see module docstring).

    **backends: one per model node, by its registry ``backend`` key (sam2, depth, owlv2, qwen,
        dinov2 and any tool registered later: rvt_bench.adapters.twin.backends.*; Hydra builds them from
        conf/perception/foundation.yaml); a node whose backend is None or absent fails with
        AdapterError unless it is disabled.
    cache: a ToolCache, or None for no caching.
    disable: model nodes to skip (ablation), a subset of registry.model_nodes().
    key_frame: "first" | "middle" (index T // 2).
    vocabulary, use_query: OWLv2 phrases when the sample gives none.
    match_iou: minimum box IoU to give an instance an OWLv2 label after SAM2.
    summary_frames: most frames shown to Qwen2.5-VL for the video summary.
    segmenter: None (or empty) = the ``sam2`` backend serves the SAM2 node; else a backend with the
        same ``segment`` that serves it instead (conf/perception/segmenter/, e.g. SAM 3's), its
        fingerprint then the node's.
    Raises AdapterError on an unknown backend key, disabled node or key_frame.
    """

    name = "foundation"

    def __init__(self, cache: ToolCache | None = None, disable: list[str] | tuple[str, ...] = (),
                 key_frame: str = "middle", vocabulary: list[str] | tuple[str, ...] = DEFAULT_VOCABULARY,
                 use_query: bool = True, match_iou: float = 0.5, summary_frames: int = 8, segmenter: Any = None,
                 **backends: Any):
        if isinstance(disable, str):  # perception.disable=OWLv2 on the command line
            disable = [disable]
        nodes = registry.model_nodes()
        unknown = sorted(set(disable) - set(nodes))
        if unknown:
            raise AdapterError(f"perception.disable: unknown nodes {unknown}; expected a subset of {list(nodes)}")
        keys = registry.backend_keys()
        unknown = sorted(set(backends) - set(keys))
        if unknown:
            raise AdapterError(f"perception: unknown keys {unknown}; model backends are {list(keys)}")
        if key_frame not in ("first", "middle"):
            raise AdapterError(f"perception.key_frame must be 'first' or 'middle', got {key_frame!r}")
        self.backends = {node: backends.get(key) for key, node in keys.items()}
        if segmenter:  # a backend with SAM2's `segment` (conf/perception/segmenter/) serves the SAM2 node
            if not callable(getattr(segmenter, "segment", None)):
                raise AdapterError(f"perception.segmenter must be a backend with segment(), got {str(segmenter)[:80]}")
            self.backends["SAM2"] = segmenter
        self.cache = cache
        self.disable = frozenset(disable)
        self.key_frame = key_frame
        self.vocabulary = [str(v) for v in vocabulary]
        self.use_query = bool(use_query)
        self.match_iou = float(match_iou)
        self.summary_frames = int(summary_frames)

    def preflight(self) -> None:
        """Check that every enabled tool's weights can be had (ModelBackend.preflight) before the
        first sample; raises AdapterError naming the backend and model id."""
        for node, backend in self.backends.items():
            if backend is not None and node not in self.disable and hasattr(backend, "preflight"):
                backend.preflight()

    def depth_convention(self) -> tuple[str, str] | None:
        """The depth backend's declared (unit, convention) (``declared_convention``, e.g.
        ("m", "larger = farther") for perception/depth=metric_indoor or depth_pro), without loading
        it; None when DepthAnything2 is disabled or its backend declares none."""
        backend = self.backends.get("DepthAnything2")
        declared = getattr(backend, "declared_convention", None)
        if "DepthAnything2" in self.disable or declared is None:
            return None
        return tuple(declared())

    def fingerprint(self) -> dict:
        return {
            "name": self.name, "version": FOUNDATION_VERSION,
            "backends": {node: None if b is None else b.fingerprint() for node, b in self.backends.items()
                         if node in _FIRST_BACKENDS or b is not None},
            "disable": sorted(self.disable), "key_frame": self.key_frame, "vocabulary": self.vocabulary,
            "use_query": self.use_query, "match_iou": self.match_iou, "summary_frames": self.summary_frames,
        }

    def run(self, tool: str, sample: Sample, twin: Twin) -> None:
        """As Perception.run, except that a disabled node (or one whose requirement was skipped) is
        skipped (see module docstring)."""
        skipped = twin.artifacts.setdefault("skipped", [])
        spec = registry.TOOLS.get(tool)
        model = spec.uses if spec else None
        lacking = [r for r in spec.requires if r in skipped] if spec else []
        if (model is not None and model in self.disable) or lacking:
            skipped.append(tool)
            log.info("sample %s: %s skipped (disabled: %s)", sample.id, tool, sorted(self.disable))
            return
        super().run(tool, sample, twin)

    def serves_step(self, spec: registry.ToolSpec) -> bool:
        """Every tool's step: a model-backed step finds its backend through ``backend`` (which names
        the config key when it is missing)."""
        return True

    # --- model nodes ----------------------------------------------------------------------------

    def sam2(self, sample: Sample, twin: Twin) -> None:
        key = self.key_frame_index(twin)
        detections = twin.artifacts.get("owlv2") if "OWLv2" in twin.tools else None
        params = {"key_frame": key, "prompts": detections}

        def compute() -> dict:
            frames = self.frames(sample, twin)
            boxes = None if detections is None else [d["box"] for d in detections]
            tracks = self.backend("SAM2", sample).segment(
                frames, key, boxes=boxes,
                labels=None if detections is None else [d["label"] for d in detections],
                scores=None if detections is None else [d["score"] for d in detections])
            return {"tracks": [{"score": tr.score, "label": tr.label,
                                "masks": [mask_io.encode(m) if m.any() else None for m in tr.masks]}
                               for tr in tracks]}

        value = self.cached("SAM2", sample, twin, params, compute)
        for track in value["tracks"]:
            instance_id = len(twin.instances) + 1
            frames: dict[int, InstanceFrame] = {}
            for t, rle in enumerate(track["masks"]):
                geo = None if rle is None else geometry.mask_geometry(mask_io.decode(rle))
                if geo is None:
                    continue
                ref = f"m{instance_id}_{t}"
                twin.masks[ref] = {"size": [int(v) for v in rle["size"]], "counts": rle["counts"]}
                frames[t] = InstanceFrame(bbox=geo[0], centroid=geo[1], area=geo[2], mask=ref)
            if frames:  # a track SAM2 lost on every frame is no instance
                twin.instances.append(Instance(id=instance_id, frames=frames, label=track["label"],
                                               score=float(track["score"])))

    def owlv2(self, sample: Sample, twin: Twin) -> None:
        key = self.key_frame_index(twin)
        phrases = self._phrases(sample)
        value = self.cached("OWLv2", sample, twin, {"key_frame": key, "phrases": phrases},
                             lambda: {"detections": self.backend("OWLv2", sample).detect(
                                 [self.frames(sample, twin)[key]], phrases)[0]})
        detections = value["detections"]
        twin.artifacts["owlv2"] = detections
        visible = [inst for inst in twin.instances if key in inst.frames]
        if not visible or not detections:
            return
        ious = box_iou(np.array([inst.frames[key].bbox for inst in visible]),
                       np.array([d["box"] for d in detections]))
        pairs = sorted(((ious[i, j], i, j) for i in range(len(visible)) for j in range(len(detections))),
                       key=lambda p: (-p[0], p[1], p[2]))
        used_i: set[int] = set()
        used_j: set[int] = set()
        for iou, i, j in pairs:
            if iou < self.match_iou:
                break
            if i in used_i or j in used_j:
                continue
            used_i.add(i)
            used_j.add(j)
            visible[i].label = detections[j]["label"]
            visible[i].score = float(detections[j]["score"])

    def depth_anything2(self, sample: Sample, twin: Twin) -> None:
        def compute() -> dict:
            backend = self.backend("DepthAnything2", sample)
            maps = backend.estimate(self.frames(sample, twin))
            unit, convention = backend.convention()
            return {"depth": np.stack(maps).astype(np.float16), "unit": unit, "convention": convention}

        value = self.cached("DepthAnything2", sample, twin, {}, compute)
        if tuple(value["depth"].shape[1:]) != twin.size:
            raise AdapterError(f"sample {sample.id}: depth maps are {value['depth'].shape[1:]}, frames {twin.size}")
        twin.artifacts["depth"] = value

    def depth_stats(self, sample: Sample, twin: Twin) -> None:
        depth = twin.artifacts["depth"]
        maps = depth["depth"]
        for inst in twin.instances:
            values = [maps[t][mask_io.decode(twin.masks[fr.mask])].astype(np.float64)
                      for t, fr in sorted(inst.frames.items())]
            pooled = np.concatenate(values) if values else np.zeros(0)
            inst.depth = None if pooled.size == 0 else Depth(
                mean=float(pooled.mean()), std=float(pooled.std()), frames=len(values),
                unit=depth["unit"], convention=depth["convention"])

    def qwen25vl(self, sample: Sample, twin: Twin) -> None:
        backend = self.backend("Qwen2.5-VL", sample)
        chosen = summary_frame_indices(twin.num_frames, self.summary_frames)

        def summarize() -> dict:
            frames = self.frames(sample, twin)
            return {"text": backend.generate([([frames[t] for t in chosen], backend.prompt("summary"))])[0]}

        def caption_frames() -> dict:
            return {"texts": backend.generate([([f], backend.prompt("frame")) for f in self.frames(sample, twin)])}

        twin.video.summary = self.cached("Qwen2.5-VL/summary", sample, twin, {"frames": chosen}, summarize)["text"]
        captions = self.cached("Qwen2.5-VL/frames", sample, twin, {}, caption_frames)
        for frame, text in zip(twin.frames, captions["texts"]):
            frame.caption = text
        for inst, text in zip(twin.instances, self._crop_answers("Qwen2.5-VL/instances", "instance", sample, twin)):
            inst.caption = text

    def semantic_analysis(self, sample: Sample, twin: Twin) -> None:
        for inst, text in zip(twin.instances, self._crop_answers("SemanticAnalysis", "label", sample, twin)):
            inst.label = text.splitlines()[0].strip().rstrip(".") if text.strip() else None

    # --- for tool steps (public: a backend module's step, e.g. rvt_bench.adapters.twin.backends.dinov2) --------

    def cached(self, call: str, sample: Sample, twin: Twin, params: dict, compute: Callable[[], dict]) -> dict:
        """The value of one model call: from the cache when present, else ``compute()`` stored.

        call: the tool name, or "tool/part" for a tool that makes several calls ("Qwen2.5-VL/frames");
            the backend whose fingerprint keys the entry is the one of the tool's ``uses``.
        params: JSON-able inputs of the call besides the frames (key frame, crop boxes, prompts).
        compute: returns a dict of JSON scalars / lists / NumPy arrays (rvt_bench.adapters.twin.cache); on a
            hit it is not called, so it must read frames and models itself (``frames``, ``backend``).
        Records "hit" / "miss" / "off" (no cache) in ``twin.artifacts["cache"][call]``. Raises
        AdapterError when that backend is not configured.
        """
        spec = registry.TOOLS.get(call.split("/")[0])
        node = spec.uses if spec is not None and spec.uses else call.split("/")[0]
        backend = self.backend(node, sample)
        record = twin.artifacts.setdefault("cache", {})
        if self.cache is None:
            record[call] = "off"
            return compute()
        if "video_digest" not in twin.artifacts:
            twin.artifacts["video_digest"] = video_digest(sample.frames)
        key = cache_key(twin.artifacts["video_digest"], call, backend.fingerprint(), params)
        value, hit = self.cache.get_or_compute(key, compute)
        record[call] = "hit" if hit else "miss"
        return value

    def backend(self, node: str, sample: Sample) -> Any:
        """The configured backend of model node ``node`` (a registry tool with ``backend``). Raises
        AdapterError naming its config key when it is not configured (``sample`` names the error)."""
        backend = self.backends.get(node)  # None too for a tool registered after this perception was built
        if backend is None:
            raise AdapterError(f"sample {sample.id}: the plan runs {node} but perception 'foundation' has no "
                               f"backend configured for it (set perception.{registry.TOOLS[node].backend} or disable it)")
        return backend

    def frames(self, sample: Sample, twin: Twin) -> list[np.ndarray]:
        """The sample's frames as (H, W, 3) uint8 RGB, read once per build (call it only on cache
        misses, inside ``compute``). Raises AdapterError when a frame is not the twin's (H, W)."""
        if "frames" not in twin.artifacts:
            frames = [read_frame(p) for p in sample.frames]
            for path, frame in zip(sample.frames, frames):
                if tuple(frame.shape[:2]) != twin.size:
                    raise AdapterError(f"sample {sample.id}: frame {path} is {frame.shape[:2]}, expected {twin.size}")
            twin.artifacts["frames"] = frames
        return twin.artifacts["frames"]

    def key_frame_index(self, twin: Twin) -> int:
        """Index of the frame SAM2 / OWLv2 look at first: 0 for ``key_frame`` "first", else T // 2."""
        return 0 if self.key_frame == "first" else twin.num_frames // 2

    # --- helpers --------------------------------------------------------------------------------

    def _crop_answers(self, call: str, prompt: str, sample: Sample, twin: Twin) -> list[str]:
        """Qwen2.5-VL's answer to ``prompt`` on each instance's crop (frame of largest area)."""
        if not twin.instances:
            return []
        backend = self.backend("Qwen2.5-VL", sample)
        crops = [crop_box(inst, twin.size) for inst in twin.instances]

        def compute() -> dict:
            frames = self.frames(sample, twin)
            return {"texts": backend.generate([([frames[t][y1:y2, x1:x2]], backend.prompt(prompt))
                                               for t, (x1, y1, x2, y2) in crops])}

        return self.cached(call, sample, twin, {"crops": crops}, compute)["texts"]

    def _phrases(self, sample: Sample) -> list[str]:
        given = sample.meta.get("phrases")
        if given:
            if not isinstance(given, list) or not all(isinstance(p, str) and p.strip() for p in given):
                raise AdapterError(f"sample {sample.id}: meta['phrases'] must be a list of non-empty str, "
                                   f"got {given!r}")
            return list(given)
        phrases = list(self.vocabulary)
        if self.use_query and sample.query.strip():
            phrases.append(sample.query.strip())
        if not phrases:
            raise AdapterError(f"sample {sample.id}: OWLv2 has no phrases (empty vocabulary, no query)")
        return phrases


def summary_frame_indices(num_frames: int, most: int) -> list[int]:
    """min(num_frames, most) frame indices evenly spaced from the first to the last frame."""
    k = max(1, min(num_frames, most))
    return [0] if k == 1 else sorted({round(i * (num_frames - 1) / (k - 1)) for i in range(k)})


def crop_box(inst: Instance, size: tuple[int, int]) -> tuple[int, tuple[int, int, int, int]]:
    """(frame index, (x1, y1, x2, y2) integer pixel crop) around the instance's box on the frame
    where its area is largest (earliest on ties), grown by CROP_MARGIN per side and to at least
    MIN_CROP px, clamped to the frame of ``size`` (H, W) px. Crop a frame as ``frame[y1:y2, x1:x2]``."""
    height, width = size
    t = max(sorted(inst.frames), key=lambda k: inst.frames[k].area)
    x1, y1, x2, y2 = inst.frames[t].bbox
    mx, my = CROP_MARGIN * (x2 - x1), CROP_MARGIN * (y2 - y1)
    box = [x1 - mx, y1 - my, x2 + mx, y2 + my]
    for lo, hi, limit in ((0, 2, width), (1, 3, height)):
        short = MIN_CROP - (box[hi] - box[lo])
        if short > 0:
            box[lo] -= short / 2
            box[hi] += short / 2
        box[lo], box[hi] = max(0.0, box[lo]), min(float(limit), box[hi])
    return t, (int(np.floor(box[0])), int(np.floor(box[1])), int(np.ceil(box[2])), int(np.ceil(box[3])))
