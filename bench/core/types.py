"""Shared vocabulary of rvt-bench: samples, targets, predictions and the errors every layer raises.

This module imports nothing of ours; everything else imports it. Records are plain dataclasses
that round-trip through JSON (``to_dict`` / ``from_dict``), so every run file is readable without
this code. Masks are COCO RLE dicts ``{"size": [H, W], "counts": str}`` (ASCII counts, never bytes).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from rvt_bench.core.codec import encodable
from rvt_bench.core.printable import bounded

SCHEMA_VERSION = 1

Modality = Literal["image", "video"]
Task = Literal["segmentation", "grounding", "vqa", "summarization"]
TASKS: tuple[str, ...] = ("segmentation", "grounding", "vqa", "summarization")

RLE = dict[str, Any]
"""COCO RLE: {"size": [H, W], "counts": str}; decode with rvt_bench.core.masks.decode."""


# --- failure kinds --------------------------------------------------------------------------------

FailureKind = Literal["parse", "adapter", "exception", "sandbox", "data", "metric", "error"]
"""Why a sample has no usable prediction: predictions.jsonl `error.kind`, metrics.json
`failures_by_kind` / `failed_samples` / `data_error_samples`, `run.retry_failed`. The one list.

parse      the model's output does not follow its format (the model's own fault)
adapter    the adapter could not answer (model loading, a server, perception)
exception  an adapter bug: an unexpected exception, its traceback kept as the trace
sandbox    model-written code failed, timed out or hit a limit in the sandbox
data       the sample's data is unusable (not the model's fault): not in `n`, listed apart
metric     a metric could not be computed for the sample (rvt_bench.metrics.text)
error      any other RvtBenchError (e.g. an adapter answering another sample's id)
"""
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
DATA: FailureKind = "data"
PARSE: FailureKind = "parse"
EXCEPTION: FailureKind = "exception"
SANDBOX: FailureKind = "sandbox"
RETRYABLE: tuple[FailureKind, ...] = ("adapter", "exception", "sandbox", "data")
"""Failures outside the model's answer (its surroundings): what a resume predicts again when the
config has no run.retry_failed."""


# --- errors -------------------------------------------------------------------------------------


class RvtBenchError(Exception):
    """Base class of every error this project raises on purpose.

    `kind` is what a failed sample records as its error kind in predictions.jsonl (a FailureKind
    for errors that fail one sample; run-level errors below have kinds of their own).
    """

    kind: str = "error"


class DatasetFormatError(RvtBenchError):
    """A dataset file is missing or malformed; the message names the file and what was expected."""

    kind: FailureKind = "data"


class AdapterError(RvtBenchError):
    """A model adapter could not produce a prediction for a sample (recorded, the run goes on).

    The partial output of the failed sample rides in declared fields, set by the adapter that
    raises (or re-raises) it, and is recorded with the failure:
    trace:    the partial trace (a rollout so far, the model calls made), saved as Prediction.trace.
    events:   the rollout's events so far (list of dicts), for training and analytics.
    timings:  seconds per stage spent before the failure.
    segments: the output so far in token-level pieces, in the raising adapter's own layout (for
              training on failed rollouts).
    calls:    what each model call so far cost (tokens, seconds), in the raising adapter's own
              layout (its per-sample cost record).
    Each is None when the adapter had nothing to attach.
    """

    kind: FailureKind = "adapter"
    trace: Any = None
    events: list[dict] | None = None
    timings: dict[str, float] | None = None
    segments: list[dict] | None = None
    calls: list[dict] | None = None


class ParseError(AdapterError):
    """Model output that does not follow its protocol (missing tags, bad JSON, unknown ids)."""

    kind: FailureKind = "parse"


class SandboxError(AdapterError):
    """Model-written code failed, timed out or hit a resource limit in the sandbox."""

    kind: FailureKind = "sandbox"


class JudgeError(RvtBenchError):
    """An LLM judge call failed or returned an unparsable verdict."""

    kind = "judge"


class RunStoreError(RvtBenchError):
    """A run directory is inconsistent (e.g. its config changed under the same run name)."""

    kind = "store"


class RunLockedError(RunStoreError):
    """Another live process holds the run directory (rvt_bench.core.store.RunLock); the message names its
    PID and host."""

    kind = "locked"


class ServerUnreachableError(AdapterError):
    """A server the run needs (an OpenAI-compatible policy or judge) cannot be reached."""


class ConfigError(RvtBenchError):
    """A configuration the run cannot use (a value outside its range, a key that does not exist);
    the message names the setting and what is allowed."""

    kind = "error"


class RunStopped(RvtBenchError):
    """A run stopped before its end by its surroundings, not by its data or model: Ctrl-C, SIGTERM,
    SIGHUP, a full disk, a read-only or forbidden run root, a missing package, a server that is down.

    reason: one of STOP_REASONS (the command line maps it to its exit status); the message is one
    line saying what happened, what was kept and how to resume.
    """

    kind = "stopped"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


STOP_REASONS = ("interrupted", "terminated", "hangup", "no_space", "read_only", "permission", "missing_package",
                "server_down", "locked", "cannot_succeed", "all_failed")


# --- records --------------------------------------------------------------------------------------


@dataclass
class Target:
    """Ground truth of one sample, per frame (an image is one frame).

    masks:   per frame, an RLE of the target (union of all target objects) or None = no object there.
    ignore:  per frame, an RLE of pixels excluded from scoring (LISA's label 255) or None.
    boxes:   per frame, a list of [x1, y1, x2, y2] float boxes in pixels (continuous coordinates).
    answers: reference texts for vqa / summarization.
    foreground: per frame, an RLE of every annotated object of the frame (not only the target), or
             None; ReVOS's robustness metric R divides false positives by its area (VISA
             mask_dict_foreground.json). None when the dataset has no such masks.
    """

    masks: list[RLE | None] | None = None
    ignore: list[RLE | None] | None = None
    boxes: list[list[list[float]]] | None = None
    answers: list[str] | None = None
    foreground: list[RLE | None] | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "Target":
        return cls(**(d or {}))


@dataclass
class InstanceAnnotation:
    """One annotated object of a sample's frames, used by `oracle` perception to build a twin.

    id:     the dataset's own object id (ReVOS anno_id, a LabelMe shape index, ...).
    label:  category name, "" when the dataset has none.
    masks:  per frame, an RLE or None when the object is not visible in that frame.
    depth:  per frame, mean metric depth in metres (larger = farther) where the dataset knows it,
            else None.
    """

    id: str
    label: str
    masks: list[RLE | None]
    depth: list[float | None] | None = None


@dataclass
class Sample:
    """One query to answer: a frame sequence (T=1 for an image), a text query and its target.

    frames:    image paths in temporal order; load with rvt_bench.core.frames.read_frame -> (H, W, 3) uint8 RGB.
    frame_ids: the dataset's own frame names, same length as frames.
    task:      "segmentation" | "grounding" | "vqa" | "summarization".
    meta:      what the protocol groups by: level, category, type_id, is_sentence, source ids...;
               shown on the sample's card (report.html, rvt-bench visualize) when a loader sets them:
               "card" (one line, e.g. GroundMoRe's action window) and "frame_notes" (one text per
               frame, "" for none, appended to the frame's label)
    annotations: every annotated object in the frames (not only the target), for oracle perception;
               None when the dataset has no such annotations.
    """

    id: str
    dataset: str
    split: str
    modality: Modality
    frames: list[str]
    frame_ids: list[str]
    query: str
    task: Task
    target: Target
    meta: dict[str, Any] = field(default_factory=dict)
    annotations: list[InstanceAnnotation] | None = None

    @property
    def num_frames(self) -> int:
        return len(self.frames)


@dataclass
class Prediction:
    """What an adapter answered for one sample; one JSON line of predictions.jsonl.

    task:    the task the model declared (DT-R1's <task>), or None when it declared none.
    masks:   per frame RLE (None = empty) for segmentation; same length as the sample's frames.
    boxes:   per frame list of [x1, y1, x2, y2] boxes in pixels, for grounding.
    text:    answer text for vqa / summarization.
    trace:   full raw model output (e.g. the DT-R1 rollout), for debugging failures.
    timings: seconds per stage, e.g. {"policy": 3.2, "twin": 0.4, "sandbox": 0.1}.
    error:   None, or {"kind": FailureKind, "message": str} when the sample failed; scored as empty.
    no_target: True when the model answered that the query names no object in the media ("no
             target", gRefCOCO's no-target expressions, SA-Co's negative phrases): an answer, neither
             an empty mask (a segmentation that found nothing) nor a failure. It carries no masks or
             boxes. Each protocol says how it scores it (rvt_bench.metrics.protocols.base.Protocol.
             no_target: the benchmarks without no-target samples score it as an empty prediction).
    no_target_score: the model's own score for "no target" where it has one (e.g. ReLA's
             no-target head, gRefCOCO's nt_label), on the model's scale; None = none given.
    Both are written to predictions.jsonl only when set, so records without them read and write as
    before.
    """

    sample_id: str
    task: str | None = None
    masks: list[RLE | None] | None = None
    boxes: list[list[list[float]]] | None = None
    text: str | None = None
    trace: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    error: dict[str, str] | None = None
    schema_version: int = SCHEMA_VERSION
    no_target: bool = False
    no_target_score: float | None = None

    @classmethod
    def failure(cls, sample_id: str, kind: FailureKind | str, message: str, **kw: Any) -> "Prediction":
        """A failed sample: scored as an empty prediction, counted and listed in metrics.json. The
        message, which may quote the model's output, is cut at rvt_bench.core.printable.MAX_ECHO
        characters with a count of the rest (the full output stays in `trace`), and a lone
        surrogate in it is written as its escape (rvt_bench.core.codec)."""
        return cls(sample_id=sample_id, error={"kind": kind, "message": encodable(bounded(message))}, **kw)

    @property
    def failure_kind(self) -> str | None:
        """The FailureKind of a failed prediction, None when it did not fail."""
        return None if self.error is None else self.error.get("kind")

    @classmethod
    def none_found(cls, sample_id: str, score: float | None = None, **kw: Any) -> "Prediction":
        """The "no target" answer (see the class docstring), with the model's score for it if any."""
        return cls(sample_id=sample_id, no_target=True, no_target_score=score, **kw)

    def check_no_target(self) -> None:
        """AdapterError when a "no target" answer also holds a mask or a box (it names none), or its
        score is not a finite number."""
        if not self.no_target:
            if self.no_target_score is not None:
                raise AdapterError(f"sample {self.sample_id!r}: a no-target score without the no-target answer")
            return
        if any(m is not None for m in self.masks or []) or any(self.boxes or []):
            raise AdapterError(f"sample {self.sample_id!r}: a no-target answer that also holds masks or boxes")
        score = self.no_target_score
        if score is not None and (as_float(score) is None or not math.isfinite(as_float(score))):
            raise AdapterError(f"sample {self.sample_id!r}: no_target_score must be a finite number, got {str(score)[:40]!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> dict:
        """The predictions.jsonl object (JSON types only); `from_json` reads it back. no_target and
        no_target_score appear only when set (records of models without them are unchanged)."""
        out = self.to_dict()
        if not self.no_target:
            out.pop("no_target")
        if self.no_target_score is None:
            out.pop("no_target_score")
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Prediction":
        """`from_dict`: a record without schema_version (older runs) reads as version 1."""
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: dict) -> "Prediction":
        """Validate and build; raises RunStoreError on an unknown schema version or missing id."""
        if not isinstance(d, dict) or "sample_id" not in d:
            raise RunStoreError(f"prediction record without sample_id: {str(d)[:200]}")
        version = d.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise RunStoreError(
                f"prediction {d['sample_id']!r} has schema_version {version}, expected {SCHEMA_VERSION}"
            )
        error = d.get("error")
        if error is not None and not (isinstance(error, dict) and isinstance(error.get("kind"), str)):
            raise RunStoreError(f"prediction {d['sample_id']!r}: 'error' must be null or an object with a "
                                f"'kind' string (and a 'message'), got {str(error)[:80]}")
        if not isinstance(d.get("no_target", False), bool):
            raise RunStoreError(f"prediction {d['sample_id']!r}: 'no_target' must be true or false, "
                                f"got {str(d.get('no_target'))[:40]}")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for one-line errors that wrap a library's
    (transformers' hub errors run to many lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def as_float(value: Any) -> float | None:
    """float(value) of a JSON number (an int or a float, not a bool), NaN and +-Infinity included;
    None for anything else: a string, a bool, an int beyond float's range (10**400, whose float()
    raises OverflowError, as math.isfinite does)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None
