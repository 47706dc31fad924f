"""The digital twin: what DT-R1's vision tools know about one sample's frames, as typed data.

Three tiers, as in the DT-R1 paper (arXiv 2511.12365):
- ``video``: summary, size [H, W] px, fps, num_frames;
- ``frames``: index, frame_id, timestamp (s), caption;
- ``instances``: id (1..N), label, score, per-frame bbox [x1, y1, x2, y2] / centroid [x, y] / area
  (continuous pixels, see rvt_bench.adapters.twin.geometry) / mask ref, depth {mean, std, unit, convention},
  trajectory, caption, and the semantic embedding (a unit vector, from the DINOv2 tool).
Masks live beside the JSON: ``Twin.masks`` maps a ref ("m<id>_<t>") to a COCO RLE. The policy sees
``to_llm_json`` (compact, no masks, per-frame fields summarised under a character budget); code in
the sandbox sees the unabridged ``to_llm_dict()`` and the decoded masks.
A field a tool has not filled (because the plan did not run it) is None / null, except the
embedding, which is absent from every view until a tool filled it (so twins without it are as they
were before the field existed). The policy sees embeddings as ``similar`` (cosine similarity to each
other instance, 0.01); code sees the full vectors as ``twin["instances"][k]["embedding"]``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import RLE, ParseError

TWIN_VERSION = 1
DEPTH_UNIT = "m"
DEPTH_CONVENTION = "larger = farther"
TRACK_FIELDS = ("x1", "y1", "x2", "y2", "cx", "cy", "area")
TWIN_STYLES = ("full", "compact")  # Twin.to_llm_json styles: the paper's twin, the few-token twin of small policies
SIMILARITY_NOTE = ("similar: cosine similarity of two instances' semantic embeddings (DINOv2, pooled over "
                   "the mask), 1 = alike; the vectors are twin['instances'][k]['embedding'] in <execute>")
DEFAULT_MAX_CHARS = 6000  # ~2.1-2.3k tokens for 16 frames x 10 instances (perf/bench_twin.py)
"""~2k tokens at 4 characters per token (the DT-R1 paper keeps the twin near 2k tokens). Numeric JSON
tokenizes denser: 16 frames x 10 instances at this budget measured ~5.0k SmolLM2 / ~4.6k Gemma 3
tokens (llama.cpp tokenizers of the bundled GGUF models)."""


@dataclass
class VideoInfo:
    """size: [H, W] px. fps: frames per second, None when unknown. summary: None until a captioner ran."""

    size: list[int]
    num_frames: int
    fps: float | None = None
    summary: str | None = None


@dataclass
class FrameInfo:
    """index: 0-based position in the sample's frames; frame_id: the dataset's own frame name;
    timestamp: index / fps in seconds (None when fps is unknown); caption: None until a captioner ran."""

    index: int
    frame_id: str
    timestamp: float | None = None
    caption: str | None = None


@dataclass
class InstanceFrame:
    """One instance in one frame: bbox [x1, y1, x2, y2] px, centroid [x, y] px, area px, mask ref."""

    bbox: list[float]
    centroid: list[float]
    area: int
    mask: str


@dataclass
class Depth:
    """Depth of an instance: mean and std in ``unit`` with ``convention`` as the depth tool reports
    them (oracle and DepthAnything V2's metric checkpoints, perception/depth=metric_*: metres,
    larger = farther; DepthAnything V2's relative checkpoint, the default: "relative", relative
    inverse depth, larger = nearer); ``frames`` = how many frames contributed."""

    mean: float
    std: float
    frames: int
    unit: str = DEPTH_UNIT
    convention: str = DEPTH_CONVENTION


@dataclass
class Trajectory:
    """Centroid motion (rvt_bench.adapters.twin.geometry.trajectory): frames are indices, points [x, y] px."""

    first_frame: int
    last_frame: int
    start: list[float]
    end: list[float]
    displacement: list[float]
    path_length: float


@dataclass
class Instance:
    """One tracked object. frames: {frame index: InstanceFrame} for the frames where it is visible."""

    id: int
    frames: dict[int, InstanceFrame] = field(default_factory=dict)
    label: str | None = None
    score: float | None = None
    depth: Depth | None = None
    trajectory: Trajectory | None = None
    caption: str | None = None
    embedding: list[float] | None = None
    """Semantic embedding: D floats, unit L2 norm (so a dot product is a cosine similarity), from the
    DINOv2 tool pooled over the instance's mask (rvt_bench.adapters.twin.backends.dinov2); None until
    that tool ran."""


@dataclass
class Twin:
    """The digital twin of one sample (see module docstring).

    tools:     the tools that filled it, in the order they ran.
    masks:     mask ref -> COCO RLE of size [H, W].
    artifacts: per-tool data that is not part of the twin (e.g. dense depth maps) handed from one
               tool to a later one during a build; never serialised.
    """

    video: VideoInfo
    frames: list[FrameInfo]
    instances: list[Instance] = field(default_factory=list)
    masks: dict[str, RLE] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    version: int = TWIN_VERSION

    @property
    def num_frames(self) -> int:
        return self.video.num_frames

    @property
    def size(self) -> tuple[int, int]:
        """(H, W) in pixels."""
        return int(self.video.size[0]), int(self.video.size[1])

    def instance_ids(self) -> list[int]:
        return [inst.id for inst in self.instances]

    def instance(self, instance_id: int) -> Instance:
        """The instance with this int id; raises ParseError when there is none (a bool, float or str
        id is no id: a policy answering true or "1" has not followed the protocol)."""
        if isinstance(instance_id, int) and not isinstance(instance_id, bool):
            for inst in self.instances:
                if inst.id == instance_id:
                    return inst
        raise ParseError(f"instance id {instance_id!r} is not in the twin (ids: {self.instance_ids()})")

    def masks_for(self, ids: list[int]) -> list[RLE | None]:
        """Per frame, the union of the masks of ``ids`` (length num_frames); None in frames where
        none of them is visible (rvt_bench.core.types.Target's convention). Raises ParseError on an id that
        is not in the twin (e.g. an id a policy invented)."""
        chosen = [self.instance(i) for i in ids]
        height, width = self.size
        out: list[RLE | None] = []
        for t in range(self.num_frames):
            rles = [self.masks[inst.frames[t].mask] for inst in chosen if t in inst.frames]
            if not rles:
                out.append(None)
            elif len(rles) == 1:
                out.append(dict(rles[0]))
            else:
                out.append(mask_io.union(rles, height, width))
        return out

    def mask_array(self, instance_id: int) -> np.ndarray:
        """(T, H, W) bool masks of one instance (all False where it is not visible)."""
        inst = self.instance(instance_id)
        height, width = self.size
        out = np.zeros((self.num_frames, height, width), dtype=bool)
        for t, fr in inst.frames.items():
            out[t] = mask_io.decode(self.masks[fr.mask])
        return out

    def to_code_payload(self) -> dict:
        """What model-written code sees of the twin, as the plain JSON payload the sandbox loads
        (rvt_bench.adapters.sandbox.process.Sandbox.load): the variable ``twin`` (``to_llm_dict()``
        unabridged) and ``masks`` (instance id -> per-frame COCO RLE, decoded in the sandbox into
        (T, H, W) bool arrays). Each instance with an embedding carries the full vector as
        ``embedding`` (a list of D floats) besides its ``similar``."""
        height, width = self.size
        rles = {str(inst.id): {str(t): self.masks[fr.mask] for t, fr in inst.frames.items()} for inst in self.instances}
        twin = self.to_llm_dict()
        for shown, inst in zip(twin["instances"], self.instances):  # unabridged: same instances, same order
            if inst.embedding is not None:
                shown["embedding"] = list(inst.embedding)
        return {"variables": {"twin": twin},
                "masks": {"shape": [self.num_frames, height, width], "rles": rles}}

    # --- serialisation ------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """Everything but ``artifacts``, JSON-ready (frame keys become str in JSON); an instance
        without embedding has no ``embedding`` key (twin files from before the field are unchanged)."""
        d = asdict(self)
        d.pop("artifacts")
        for inst in d["instances"]:
            if inst.get("embedding") is None:
                inst.pop("embedding", None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Twin":
        """Inverse of to_dict (also after a JSON round trip); raises ParseError on another version
        or a malformed record (an embedding that is not a non-empty list of finite numbers included)."""
        if not isinstance(d, dict) or d.get("version") != TWIN_VERSION:
            raise ParseError(f"twin record has version {d.get('version') if isinstance(d, dict) else None!r}, "
                             f"expected {TWIN_VERSION}")
        try:
            instances = [
                Instance(
                    id=int(i["id"]),
                    frames={int(t): InstanceFrame(**f) for t, f in i["frames"].items()},
                    label=i.get("label"),
                    score=i.get("score"),
                    depth=Depth(**i["depth"]) if i.get("depth") else None,
                    trajectory=Trajectory(**i["trajectory"]) if i.get("trajectory") else None,
                    caption=i.get("caption"),
                    embedding=_embedding(i.get("embedding")),
                )
                for i in d["instances"]
            ]
            return cls(
                video=VideoInfo(**d["video"]),
                frames=[FrameInfo(**f) for f in d["frames"]],
                instances=instances,
                masks=dict(d["masks"]),
                tools=list(d["tools"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ParseError(f"malformed twin record: {exc}") from exc

    def to_llm_dict(self, max_chars: int | None = None) -> dict:
        """The twin as the policy and its code see it: no RLEs; each instance's per-frame fields as
        ``track: {t: [x1, y1, x2, y2, cx, cy, area]}`` (names in ``track_fields``); depth as
        {mean, std, frames} with unit and convention once in ``depth_unit``; numbers rounded (px to
        0.1, depth to 1 mm, timestamps to 1 ms).

        With ``max_chars`` None everything is kept (``detail`` = "full"). Otherwise the JSON
        (compact separators) is brought under max_chars by the first of these that fits:
        "full"; "every_k": every k-th visible frame of each track, first and last always kept
        (``track_stride`` = k, smallest k that fits); "summary": tracks replaced by ``visible``
        [first frame, last frame, count]; "minimal": per instance only id, label, score, visible,
        depth {mean} and trajectory {displacement}; last resort, "minimal" with instances dropped from
        the end (``instances_omitted`` = how many). Video and frame tiers are always kept, so when
        they alone exceed max_chars the result (no instances) is larger than max_chars.

        When instances have embeddings: ``similarity`` at the top says what ``similar`` is, and each
        instance with one has ``similar``: {other id: cosine similarity of the two embeddings,
        rounded to 0.01} (every detail but "minimal"). Without embeddings neither key is present.
        """
        base = {
            "version": self.version,
            "tools": list(self.tools),
            "video": asdict(self.video),
            "frames": [dict(asdict(f), timestamp=_num(f.timestamp, 3)) for f in self.frames],
            "masks": "in <execute>: masks[id] is a (T, H, W) bool array; twin is this dict unabridged",
            "track_fields": list(TRACK_FIELDS),
            "depth_unit": _depth_unit(self.instances),
            "coordinates": "pixels, origin top-left, x right, y down; bbox [x1, y1, x2, y2]",
        }
        similar = _similarities(self.instances)
        if similar:
            base["similarity"] = SIMILARITY_NOTE

        def render(detail: str, stride: int = 1, instances: list[Instance] = self.instances) -> dict:
            out = dict(base, detail=detail)
            if detail == "every_k":
                out["track_stride"] = stride
            out["instances"] = [_llm_instance(inst, detail, stride) for inst in instances]
            if detail != "minimal":
                for shown, inst in zip(out["instances"], instances):
                    if inst.id in similar:
                        shown["similar"] = similar[inst.id]
            if len(instances) < len(self.instances):
                out["instances_omitted"] = len(self.instances) - len(instances)
            return out

        longest = max((len(i.frames) for i in self.instances), default=1)
        candidates = [lambda: render("full")]
        candidates += [lambda k=k: render("every_k", k) for k in range(2, longest)]
        candidates += [lambda: render("summary"), lambda: render("minimal")]
        candidates += [lambda n=n: render("minimal", instances=self.instances[:n])
                       for n in range(len(self.instances) - 1, -1, -1)]
        for make in candidates:
            out = make()
            if max_chars is None or _size(out) <= max_chars:
                return out
        return out

    def to_llm_json(self, max_chars: int = DEFAULT_MAX_CHARS, style: str = "full") -> str:
        """Compact JSON of what goes inside <dt_rep>...</dt_rep>: to_llm_dict(max_chars) (style
        "full", the DT-R1 paper's twin) or to_llm_compact(max_chars) (style "compact", for small
        policies). Raises ValueError for another style."""
        if style == "full":
            return _dumps(self.to_llm_dict(max_chars))
        if style == "compact":
            return _dumps(self.to_llm_compact(max_chars))
        raise ValueError(f"unknown twin style {style!r}; expected one of {TWIN_STYLES}")

    def to_llm_compact(self, max_chars: int | None = None) -> dict:
        """The twin in few tokens, for small policies (style "compact"): only what answering
        needs, no null fields (a field is absent when its tool was not planned), no prose.

        ``{"video": {"size": [H, W], "num_frames": T, "summary"?}, "depth_unit"?, "instances":
        [{"id", "label"?, "box": {t: [x1, y1, x2, y2]}, "depth"?, "move"?, "caption"?}]}``: boxes
        normalized to [0, 1] by the frame size and rounded to 0.01 (the grounding answer's format),
        ``depth`` the instance's mean depth (1 mm), ``move`` its centroid displacement [dx, dy]
        normalized (0.01), ``similar`` {other id: cosine similarity of the embeddings (0.01)} when
        the DINOv2 tool ran. Boxes are given at key frames (the first and last visible frame and each
        frame whose rounded box changed). With ``max_chars`` the JSON is brought under it by the
        first of: every key frame; every k-th key frame, first and last kept (``box_stride`` = k,
        the smallest that fits); first and last only; instances dropped from the end
        (``instances_omitted``). The unabridged twin stays what code sees (to_llm_dict()).
        """
        height, width = self.size
        video: dict[str, Any] = {"size": [height, width], "num_frames": self.num_frames}
        if self.video.summary is not None:
            video["summary"] = self.video.summary
        base: dict[str, Any] = {"video": video}
        if any(inst.depth is not None for inst in self.instances):
            base["depth_unit"] = _depth_unit(self.instances)

        similar = _similarities(self.instances)

        def render(stride: int | None, instances: list[Instance] = self.instances) -> dict:
            out = dict(base)
            if stride and stride > 1:
                out["box_stride"] = stride
            out["instances"] = [_compact_instance(inst, stride, width, height) for inst in instances]
            for shown, inst in zip(out["instances"], instances):
                if inst.id in similar:
                    shown["similar"] = similar[inst.id]
            if len(instances) < len(self.instances):
                out["instances_omitted"] = len(self.instances) - len(instances)
            return out

        longest = max((len(i.frames) for i in self.instances), default=1)
        candidates = [lambda: render(1)]
        candidates += [lambda k=k: render(k) for k in range(2, longest)]
        candidates += [lambda: render(None)]
        candidates += [lambda n=n: render(None, self.instances[:n]) for n in range(len(self.instances) - 1, -1, -1)]
        for make in candidates:
            out = make()
            if max_chars is None or _size(out) <= max_chars:
                return out
        return out


def _compact_instance(inst: Instance, stride: int | None, width: int, height: int) -> dict:
    """One instance of to_llm_compact. Boxes at its key frames: the first and last visible frame and
    each frame whose rounded box differs from the one before it (an unchanged box says nothing new);
    of the key frames in between, every `stride`-th (None: none)."""
    d: dict[str, Any] = {"id": inst.id}
    if inst.label is not None:
        d["label"] = inst.label
    scale = (width, height, width, height)
    boxes = {t: [_num(v / s, 2) for v, s in zip(inst.frames[t].bbox, scale)] for t in sorted(inst.frames)}
    ts = list(boxes)
    keys = [t for i, t in enumerate(ts) if i == 0 or t == ts[-1] or boxes[t] != boxes[ts[i - 1]]]
    shown = keys[::stride] if stride else keys[:1]
    if keys and shown[-1] != keys[-1]:
        shown.append(keys[-1])
    d["box"] = {str(t): boxes[t] for t in shown}
    if inst.depth is not None:
        d["depth"] = _num(inst.depth.mean, 3)
    if inst.trajectory is not None:
        dx, dy = inst.trajectory.displacement
        d["move"] = [_num(dx / width, 2), _num(dy / height, 2)]
    if inst.caption is not None:
        d["caption"] = inst.caption
    return d


def _llm_instance(inst: Instance, detail: str, stride: int) -> dict:
    """One instance of to_llm_dict at a detail level ("full", "every_k", "summary", "minimal")."""
    d: dict[str, Any] = {"id": inst.id, "label": inst.label, "score": _num(inst.score)}
    ts = sorted(inst.frames)
    if detail in ("summary", "minimal"):
        d["visible"] = [ts[0], ts[-1], len(ts)] if ts else None
    else:
        shown = ts[::stride]
        if ts and shown[-1] != ts[-1]:
            shown.append(ts[-1])
        d["track"] = {
            str(t): [_num(v) for v in (*inst.frames[t].bbox, *inst.frames[t].centroid)] + [inst.frames[t].area]
            for t in shown
        }
    depth, motion = inst.depth, inst.trajectory
    if detail == "minimal":
        d["depth"] = None if depth is None else {"mean": _num(depth.mean, 3)}
        d["trajectory"] = None if motion is None else {"displacement": [_num(v) for v in motion.displacement]}
        return d
    # unit and convention are stated once at the top (depth_unit), not per instance
    d["depth"] = None if depth is None else {
        "mean": _num(depth.mean, 3), "std": _num(depth.std, 3), "frames": depth.frames}
    d["trajectory"] = None if motion is None else {
        k: (_num(v) if not isinstance(v, list) else [_num(x) for x in v]) for k, v in asdict(motion).items()
    }
    d["caption"] = inst.caption
    return d


def _similarities(instances: list[Instance]) -> dict[int, dict[str, float | int | None]]:
    """{id: {other id (str): cosine similarity rounded to 0.01}} for each instance with an embedding,
    over the other instances with one (dot product over the product of the norms; 0 for vectors of
    different lengths or a zero vector). {} when no instance has an embedding."""
    having = [inst for inst in instances if inst.embedding is not None]
    vectors = [np.asarray(inst.embedding, dtype=np.float64) for inst in having]
    out: dict[int, dict[str, float | int | None]] = {}
    for inst, a in zip(having, vectors):
        row: dict[str, float | int | None] = {}
        for other, b in zip(having, vectors):
            if other is not inst:
                norm = float(np.linalg.norm(a) * np.linalg.norm(b))
                row[str(other.id)] = _num(float(a @ b) / norm if norm > 0 and a.shape == b.shape else 0.0, 2)
        out[inst.id] = row
    return out


def _embedding(value: Any) -> list[float] | None:
    """An embedding read from a twin record: None, or a non-empty list of finite numbers (as floats);
    raises ValueError (ParseError in from_dict) otherwise."""
    if value is None:
        return None
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in value)):
        raise ValueError("instance embedding must be a non-empty list of finite numbers")
    return [float(v) for v in value]


def _depth_unit(instances: list[Instance]) -> str:
    """"unit, convention" of the instances' depth as the depth tool reported it (metres, larger =
    farther for oracle; relative inverse depth, larger = nearer for DepthAnything V2), the default
    when no instance has depth. One build has one depth tool, so the first instance with depth speaks
    for all."""
    for inst in instances:
        if inst.depth is not None:
            return f"{inst.depth.unit}, {inst.depth.convention}"
    return f"{DEPTH_UNIT}, {DEPTH_CONVENTION}"


def _num(v: float | None, digits: int = 1) -> float | int | None:
    """Round for the LLM's eyes; integral values print as ints (a mask bbox is integral)."""
    if v is None:
        return None
    r = round(float(v), digits)
    return int(r) if r.is_integer() else r


def _dumps(d: dict) -> str:
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def _size(d: dict) -> int:
    return len(_dumps(d))
