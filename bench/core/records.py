"""The typed records that cross a stage or a file after prediction, each with a schema version.

    Sample -> Prediction (rvt_bench.core.types; predictions.jsonl)
           -> ScoreRecord (scores.jsonl, one per scored sample; each unit's UnitValues and
                          the JudgeVerdict inside)
           -> RunMetrics (metrics.json; its Failure lists inside)
           -> leaderboard row (rvt_bench.leaderboards.row)

Every record has `to_json()` (the JSON object written to its file: a dict of JSON types, keys and
key order as on disk) and `from_json(obj)` (validates the version; a record written before
versions existed reads as version 1), and they round-trip. The failure kinds are
rvt_bench.core.types.FailureKind. Layout of each file: docs/metrics_schema.md.
"""
from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from rvt_bench.core.types import FailureKind, RunStoreError

SCORE_SCHEMA_VERSION = 2  # 1: the units' values flat beside the header (read and converted)
METRICS_SCHEMA_VERSION = 4  # 1: before units / ci / unavailable / protocol_version were written;
# 2: the DT-R1 funnel for every model ("decoding", "funnel", "analytics"), read as an AdapterReport;
# 3: "n" counted the samples a protocol's rule excludes ("excluded") as well (headline_n subtracts them)


def _check_version(what: str, version: Any, expected: int) -> int:
    if not isinstance(version, int) or version > expected or version < 1:
        raise RunStoreError(f"{what} has schema_version {version!r}; this code reads versions 1 to {expected}")
    return version


@dataclass
class Failure:
    """One failed or unusable sample, as metrics.json lists it ("failed_samples",
    "data_error_samples").

    sample_id: the sample's id (None for a loader error that names only a file).
    kind:      why (rvt_bench.core.types.FailureKind).
    message:   one line saying what went wrong.
    extra:     any other keys the producer recorded (e.g. "file"), kept in their order.
    """

    sample_id: str | None
    kind: FailureKind | str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, sample_id: str, error: dict[str, Any]) -> "Failure":
        """The failure of a prediction whose `error` is {"kind", "message", ...}."""
        return cls.from_json({"sample_id": sample_id, **error})

    def to_json(self) -> dict[str, Any]:
        head = {} if self.sample_id is None else {"sample_id": self.sample_id}
        return {**head, "kind": self.kind, "message": self.message, **self.extra}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Failure":
        """Raises RunStoreError when `obj` has no "kind"."""
        if not isinstance(obj, dict) or "kind" not in obj:
            raise RunStoreError(f"failure record without kind: {str(obj)[:200]}")
        extra = {k: v for k, v in obj.items() if k not in ("sample_id", "kind", "message")}
        return cls(obj.get("sample_id"), obj["kind"], str(obj.get("message", "")), extra)


@dataclass
class JudgeVerdict:
    """An LLM judge's verdict on one free-text answer: what rvt_bench.metrics.judge.Judge returns, and, as
    `to_json()`, what scores.jsonl keeps under "judge".

    score:    in [0, 1], or None when unscored (unparsable reply, failed request); never NaN, so
              the record is valid JSON as it stands.
    reason:   the judge's reason, or why the answer is unscored.
    cached:   the reply came from the judge cache.
    error:    None, or "parse: ..." / "request: ..." for an unscored verdict.
    template: template id@version; model: the judge model; raw: the judge's reply (None if none).
    """

    score: float | None
    reason: str = ""
    cached: bool = False
    error: str | None = None
    template: str = ""
    model: str = ""
    raw: str | None = field(default=None, repr=False)

    @property
    def scored(self) -> bool:
        return self.score is not None

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "reason": self.reason, "cached": self.cached, "error": self.error,
                "template": self.template, "model": self.model, "raw": self.raw}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "JudgeVerdict":
        """Raises RunStoreError when `obj` is not a verdict object."""
        if not isinstance(obj, dict) or "score" not in obj:
            raise RunStoreError(f"judge verdict without score: {str(obj)[:200]}")
        score = obj["score"]
        return cls(None if score is None else float(score), str(obj.get("reason", "")), bool(obj.get("cached", False)),
                   obj.get("error"), str(obj.get("template", "")), str(obj.get("model", "")), obj.get("raw"))


class UnitValues:
    """A metric unit's typed per-sample values: the base of one dataclass per kind, defined beside
    the unit that writes it (rvt_bench.metrics.units.*, ReVOS's in rvt_bench.metrics.protocols.revos).

    kind:      the values' name in scores.jsonl ("values": {kind: {...}}); subclassing with a kind
               registers the class, so a record of that kind reads back typed once its module is
               imported (importing rvt_bench.metrics imports every built-in kind).
    Fields are JSON types; a field's JSON key is its name unless its metadata says {"key": ...}
    ("J&F"); a field whose default is None is left out of the JSON while it is None (ReVOS's R
    without a foreground), and a field with a default may be absent from what is read.
    """

    kind: ClassVar[str] = ""
    _kinds: ClassVar[dict[str, type["UnitValues"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind:
            known = UnitValues._kinds.get(kind)
            if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
                raise TypeError(f"unit values kind {kind!r} is defined twice: {known.__qualname__}, {cls.__qualname__}")
            UnitValues._kinds[kind] = cls

    @classmethod
    def of_kind(cls, kind: str) -> type["UnitValues"] | None:
        """The registered values class of `kind`, None when no imported module defines it."""
        return cls._kinds.get(kind)

    @classmethod
    def keys(cls) -> dict[str, bool]:
        """{JSON key: required} of the class's fields, in field order."""
        return {f.metadata.get("key", f.name): f.default is MISSING and f.default_factory is MISSING
                for f in fields(cls)}  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[f.metadata.get("key", f.name)] = value
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "UnitValues":
        """Raises RunStoreError when `obj` is not an object, lacks a required key or has a key the
        class does not declare (nothing is dropped on the way to the next write)."""
        if not isinstance(obj, dict):
            raise RunStoreError(f"{cls.kind} values are not an object: {str(obj)[:200]}")
        keys = cls.keys()
        missing = [k for k, required in keys.items() if required and k not in obj]
        if missing:
            raise RunStoreError(f"{cls.kind} values lack {missing}: {str(obj)[:200]}")
        unknown = sorted(set(obj) - set(keys))
        if unknown:
            raise RunStoreError(f"{cls.kind} values have keys {unknown} that {cls.__qualname__} does not declare")
        return cls(**{f.name: obj[f.metadata.get("key", f.name)]  # type: ignore[call-arg]
                      for f in fields(cls) if f.metadata.get("key", f.name) in obj})  # type: ignore[arg-type]

    def correct(self) -> bool | None:
        """Whether the sample's result counts as correct (the unit's rule), None when the values
        cannot tell (free text: the judge decides)."""
        return None

    def sample_score(self) -> float | None:
        """The sample's own score in [0, 1] (what a report shows and sorts by), None when the metric
        exists only over a corpus (BLEU, CIDEr)."""
        return None


V = TypeVar("V", bound=UnitValues)
CORRECT_JUDGE = 0.5  # judge score at or above which a free-text answer counts as correct (the DT-R1 paper's analysis)
_OWN = {"sample_id", "modality", "task", "failed", "error_kind", "meta", "judge", "funnel", "source", "schema_version"}
_PART_KEY = re.compile(r"part(_[0-9]+)?")


@dataclass
class ScoreRecord:
    """One line of scores.jsonl: what the protocol measured on one sample.

    sample_id: the sample's id.
    modality, task: the sample's; failed: the prediction is a failure (scored as its protocol scores a
               missing answer); error_kind: its rvt_bench.core.types.FailureKind, None when it did not fail.
    meta:      the sample.meta keys the protocol groups by (level, category, type_id...).
    values:    {kind: UnitValues}: each unit's typed per-sample values, in scoring order (two units
               of one kind, e.g. captions and judge over one answer, share one entry).
    parts:     {"part": name, "part_1": name, ...}: the composite protocol parts that scored the
               sample, innermost first ({} for a protocol without parts).
    judge:     the judge's verdict for a free-text answer, None when not judged.
    funnel:    where the sample stopped in its model's funnel, {"first_failed": stage key or None,
               "result_correct": True | False | None} (Adapter.sample_stage), None when the model
               reports no funnel.
    source:    the video or image the sample was asked about (rvt_bench.metrics.protocols.base.sample_source),
               None when unknown: samples of one source are resampled together by the bootstrap
               (rvt_bench.harness.bootstrap); written only when set.

    On disk (schema_version 2): sample_id, the header, "values": {kind: {...}}, the part keys,
    "judge", "funnel", "schema_version". Version 1 wrote the values flat beside the header;
    `from_json` converts such a record (docs/metrics_schema.md "scores.jsonl").
    """

    sample_id: str
    modality: str | None = None
    task: str | None = None
    failed: bool = False
    error_kind: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    values: dict[str, UnitValues] = field(default_factory=dict)
    parts: dict[str, str] = field(default_factory=dict)
    judge: JudgeVerdict | None = None
    funnel: dict[str, Any] | None = None
    schema_version: int = SCORE_SCHEMA_VERSION
    source: str | None = None

    def add(self, values: UnitValues) -> None:
        """Add one unit's values; a second unit of the same kind must have found the same values.
        Raises ValueError otherwise."""
        known = self.values.get(values.kind)
        if known is not None and known != values:
            raise ValueError(f"score record {self.sample_id!r}: two units wrote different {values.kind} values")
        self.values[values.kind] = values

    def of(self, cls: type[V]) -> V:
        """This record's values of class `cls` (a UnitValues subclass). Raises RunStoreError when
        the record has none (a record of another protocol or part)."""
        found = self.values.get(cls.kind)
        if not isinstance(found, cls):
            raise RunStoreError(f"score record {self.sample_id!r} has no {cls.kind} values (it has {sorted(self.values)})")
        return found

    def correct(self) -> bool | None:
        """Whether the sample's result is correct: the judge's verdict for a judged answer (score
        >= CORRECT_JUDGE; None when unscored), else the first of its values that can tell
        (UnitValues.correct: e.g. IoU > 0.5); None when undecided (free text without a judge)."""
        if self.judge is not None:
            return None if self.judge.score is None else self.judge.score >= CORRECT_JUDGE
        for values in self.values.values():
            found = values.correct()
            if found is not None:
                return found
        return None

    def sample_score(self) -> float | None:
        """The sample's own score (the first of its values that has one: UnitValues.sample_score),
        None when none has (corpus-level text metrics)."""
        for values in self.values.values():
            found = values.sample_score()
            if found is not None:
                return found
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sample_id": self.sample_id, "modality": self.modality, "task": self.task,
                               "failed": self.failed, "error_kind": self.error_kind, "meta": self.meta,
                               "values": {kind: v.to_json() for kind, v in self.values.items()}, **self.parts}
        if self.judge is not None:
            out["judge"] = self.judge.to_json()
        if self.funnel is not None:
            out["funnel"] = self.funnel
        if self.source is not None:
            out["source"] = self.source
        out["schema_version"] = self.schema_version
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "ScoreRecord":
        """Read a scores.jsonl line of schema version 1 or 2 (a version 1 record is converted: its
        flat values are split by kind, `_v1_values`); the record reads back as SCORE_SCHEMA_VERSION.
        Raises RunStoreError on a record without sample_id, of a newer schema version, with values
        of a kind no imported module defines, or whose values do not read."""
        if not isinstance(obj, dict) or "sample_id" not in obj:
            raise RunStoreError(f"score record without sample_id: {str(obj)[:200]}")
        sid = obj["sample_id"]
        version = _check_version(f"score record {sid!r}", obj.get("schema_version", 1), SCORE_SCHEMA_VERSION)
        judge = JudgeVerdict.from_json(obj["judge"]) if isinstance(obj.get("judge"), dict) else None
        parts = {k: v for k, v in obj.items() if _PART_KEY.fullmatch(k)}
        if version >= 2:
            unknown = sorted(k for k in obj if k not in _OWN and k != "values" and not _PART_KEY.fullmatch(k))
            if unknown or not isinstance(obj.get("values", {}), dict):
                raise RunStoreError(f"score record {sid!r}: keys {unknown} beside its values, or values not an object")
        raw = (obj.get("values") or {}) if version >= 2 else _v1_values(sid, obj)
        values = {}
        for kind, body in raw.items():
            known = UnitValues.of_kind(kind)
            if known is None:
                raise RunStoreError(f"score record {sid!r}: values of kind {kind!r}, which no imported module defines "
                                    "(import rvt_bench.metrics, or the module of the unit that wrote them)")
            try:
                values[kind] = known.from_json(body)
            except RunStoreError as exc:
                raise RunStoreError(f"score record {sid!r}: {exc}") from exc
        return cls(sid, obj.get("modality"), obj.get("task"), bool(obj.get("failed", False)), obj.get("error_kind"),
                   dict(obj.get("meta") or {}), values, parts, judge, obj.get("funnel"),
                   source=obj["source"] if isinstance(obj.get("source"), str) else None)


def _v1_values(sid: str, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The flat values of a version 1 record split by kind: a kind claims the record when every
    required key of it is there (a kind without required keys never does), a claiming kind whose keys all belong to another claiming kind
    (video_jf within revos) gives way, and each takes its keys. Raises RunStoreError when a key is
    left that no kind takes."""
    flat = {k: v for k, v in obj.items() if k not in _OWN and not _PART_KEY.fullmatch(k)}
    claims = {kind: cls.keys() for kind, cls in UnitValues._kinds.items()
              if any(cls.keys().values()) and all(k in flat for k, required in cls.keys().items() if required)}
    claims = {kind: keys for kind, keys in claims.items()
              if not any(other != kind and set(keys) < set(theirs) for other, theirs in claims.items())}
    out = {kind: {k: flat[k] for k in keys if k in flat} for kind, keys in claims.items()}
    left = sorted(set(flat) - {k for keys in claims.values() for k in keys})
    if left:
        raise RunStoreError(f"score record {sid!r} (schema_version 1): keys {left} belong to no known unit values "
                            f"(import rvt_bench.metrics, or the module of the unit that wrote them)")
    return out


@dataclass(frozen=True)
class Stage:
    """One stage of an adapter's funnel (AdapterReport.stages).

    key:     stable identifier, e.g. "plan_emitted" (snake case; what tests and tools match on).
    label:   what a reader sees, e.g. "plan emitted".
    reached: samples of the report's `n` that passed this stage and every stage before it.
    """

    key: str
    label: str
    reached: int

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "reached": self.reached}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Stage":
        return cls(str(obj["key"]), str(obj["label"]), int(obj["reached"]))


@dataclass(frozen=True)
class Measure:
    """One value an adapter measured over its predictions (AdapterReport.measures): a rate, a mean
    number of rounds, seconds of generation... A value that was not measured has no Measure.

    key:   stable identifier, e.g. "mean_code_rounds".
    label: what a reader sees, e.g. "code rounds (mean)".
    value: the number (or a short text such as "grammar"); rates are fractions in [0, 1].
    unit:  "fraction" (rendered as %), "s", "rounds", "count", "" (a plain number or text).
    """

    key: str
    label: str
    value: float | int | str
    unit: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "value": self.value, "unit": self.unit}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Measure":
        return cls(str(obj["key"]), str(obj["label"]), obj["value"], str(obj.get("unit", "")))


@dataclass
class AdapterReport:
    """What a model's adapter reports about its own run (metrics.json "adapter_report"); the
    harness renders it as given (summary, report.html, leaderboard) and knows none of its stages.

    model:    the adapter's name (the run's model name).
    n:        the samples the funnel counts (the run's scored samples).
    stages:   the adapter's funnel in order; `reached` never grows from one stage to the next.
    decoding: "grammar" | "free" for a model that decodes under a grammar (policy.decoding),
              None for the others (nothing is printed).
    measures: analytics and latencies the adapter measured, in display order.
    details:  adapter-specific structured extras (JSON: tool usage, task confusion...), kept in
              metrics.json and shown only where a renderer knows nothing of them: as a table.
    """

    model: str
    n: int
    stages: list[Stage] = field(default_factory=list)
    decoding: str | None = None
    measures: list[Measure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "n": self.n, "stages": [s.to_json() for s in self.stages]}
        if self.decoding is not None:
            out["decoding"] = self.decoding
        out["measures"] = [m.to_json() for m in self.measures]
        if self.details:
            out["details"] = self.details
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "AdapterReport":
        if not isinstance(obj, dict) or "model" not in obj or "n" not in obj:
            raise RunStoreError(f"adapter_report is not an object with model and n: {str(obj)[:200]}")
        return cls(model=str(obj["model"]), n=int(obj["n"]),
                   stages=[Stage.from_json(s) for s in obj.get("stages") or []],
                   decoding=obj.get("decoding"),
                   measures=[Measure.from_json(m) for m in obj.get("measures") or []],
                   details=dict(obj.get("details") or {}))


def excluded_count(body: dict[str, Any]) -> int:
    """The samples a metrics.json body's protocol rule leaves out of the headline: the sum of its
    "excluded" ({why: count}: MeViS's dropped expressions, ReVOS's no-target ones...), 0 when none."""
    found = body.get("excluded")
    return sum(int(v) for v in found.values() if isinstance(v, int)) if isinstance(found, dict) else 0


def headline_n(body: dict[str, Any]) -> int:
    """The samples the headline of a metrics.json body averages: its "n" from schema_version 4 on;
    an older file's "n" counted the excluded samples too, so they are subtracted."""
    n = int(body.get("n") or 0)
    version = body.get("schema_version", 1)
    return n if isinstance(version, int) and version >= 4 else n - excluded_count(body)


def sample_counts(body: dict[str, Any]) -> tuple[int, int, int]:
    """(n, excluded, failures) of a metrics.json body, any version: the samples the headline averages,
    the samples the protocol's rule leaves out (each named in "excluded_samples" with its reason) and
    the failed predictions (in n, scored as the protocol scores a failure, or among the excluded)."""
    return headline_n(body), excluded_count(body), int(body.get("failures") or 0)


def excluded_reasons(body: dict[str, Any]) -> dict[str, str]:
    """{sample_id: why} of the samples a metrics.json body's protocol rule leaves out (its
    "excluded_samples"; {} for a file written before they were listed)."""
    out = {}
    for row in body.get("excluded_samples") or []:
        if isinstance(row, dict) and isinstance(row.get("sample_id"), str):
            out[row["sample_id"]] = str(row.get("reason") or "excluded by the protocol's rule")
    return out


def submission_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The submission block of a run without GT (metrics.json "submission": {"benchmark", "command",
    "server"}, written by a protocol whose samples the benchmark's server scores) when the run scored
    nothing itself, else None: such a run ends with what it produced and how to submit it, never
    with metrics, a funnel or a paper table (summary, report.html), and publishes no row."""
    found = body.get("submission")
    return found if isinstance(found, dict) and found.get("command") and headline_n(body) == 0 else None


# metrics.json keys written only when set, in this order after the counts (absent in older files)
_HEADER_KEYS = ("schema_version", "units", "headline", "metric_units", "protocol_version", "protocol_variants",
                "variant", "unavailable", "ci")
_TAIL_KEYS = ("partial", "judge", "null_values")
# version 2's DT-R1 funnel, written for every model; read into adapter_report (report_from_v2)
_V2_KEYS = ("decoding", "funnel", "analytics")


@dataclass
class RunMetrics:
    """metrics.json: a scored run's aggregate (layout and units: docs/metrics_schema.md).

    aggregate: the protocol's aggregate as it returned it ("metrics", "breakdown", and whatever
               else it reports: "parts", "baseline_empty", "warnings"...), in its order; values in
               [0, 1] except unbounded scores (CIDEr).
    n:         the samples the headline averages (version 4; before, the excluded ones too: headline_n).
    failures, failures_by_kind, parse_rate, failed_samples, tasks: over the samples scored or
               excluded by the protocol's rule (aggregate "excluded", "excluded_samples"; data
               errors are neither); parse_rate is None when the model answered nothing.
    variant:   the protocol variant the headline follows ("failed=zero"; Protocol.variant_label),
               None for the reference's own protocol.
    data_errors, data_error_samples: samples whose data could not be used (not in n).
    adapter_report: what the model's adapter reports about the run (AdapterReport), None when it
               reports nothing.
    schema_version .. ci: the versioned header (rvt_bench.harness.results.finish_metrics).
    partial:   why only part of the samples was scored (run.limit), None for a full run.
    judge:     the judge block (status, n, n_failed, failure_rate, publishable, reason...).
    null_values: {dotted key: what stood there} for non-finite numbers written as null.
    """

    dataset: str
    split: str | None
    model: str
    run_name: str
    fingerprint: str
    protocol: str
    aggregate: dict[str, Any]
    n: int
    failures: int
    failures_by_kind: dict[str, int]
    parse_rate: float | None
    failed_samples: list[Failure]
    tasks: dict[str, int]
    data_errors: int
    data_error_samples: list[Failure]
    adapter_report: AdapterReport | None = None
    schema_version: int = METRICS_SCHEMA_VERSION
    units: str | None = None
    headline: list[str] | None = None
    metric_units: dict[str, str] | None = None
    protocol_version: int | None = None
    protocol_variants: dict[str, Any] | None = None
    variant: str | None = None
    unavailable: dict[str, str] | None = None
    ci: dict[str, Any] | None = None
    partial: str | None = None
    judge: dict[str, Any] | None = None
    null_values: dict[str, str] | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        """The protocol's metric values ({key: float | None}); {} when it reported none."""
        return self.aggregate.get("metrics") or {}

    def to_json(self) -> dict[str, Any]:
        # The aggregate sits between the identity and the counts; a count the protocol also
        # reports ("n") keeps the aggregate's position and takes the runner's value.
        out: dict[str, Any] = {"dataset": self.dataset, "split": self.split, "model": self.model,
                               "run_name": self.run_name, "fingerprint": self.fingerprint, "protocol": self.protocol,
                               **self.aggregate,
                               "n": self.n, "failures": self.failures, "failures_by_kind": self.failures_by_kind,
                               "parse_rate": self.parse_rate, "failed_samples": [f.to_json() for f in self.failed_samples],
                               "tasks": self.tasks, "data_errors": self.data_errors,
                               "data_error_samples": [f.to_json() for f in self.data_error_samples]}
        if self.adapter_report is not None:
            out["adapter_report"] = self.adapter_report.to_json()
        for key in _HEADER_KEYS + _TAIL_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "RunMetrics":
        """Read a metrics.json body; a file without schema_version reads as version 1, a version 2
        file's "decoding" / "funnel" / "analytics" as its adapter_report (report_from_v2). Raises
        RunStoreError on a body of a newer version or without its identity and counts."""
        if not isinstance(obj, dict):
            raise RunStoreError(f"metrics.json is not an object: {str(obj)[:200]}")
        version = _check_version("metrics.json", obj.get("schema_version", 1), METRICS_SCHEMA_VERSION)
        required = ("dataset", "model", "run_name", "fingerprint", "protocol", "n", "failures")
        missing = [k for k in required if k not in obj]
        if missing:
            raise RunStoreError(f"metrics.json lacks {missing}")
        known = set(cls.__dataclass_fields__) - {"aggregate"}
        if version < 3:
            known |= set(_V2_KEYS)
            report = report_from_v2(obj)
        else:
            report = AdapterReport.from_json(obj["adapter_report"]) if obj.get("adapter_report") is not None else None
        return cls(
            dataset=obj["dataset"], split=obj.get("split"), model=obj["model"], run_name=obj["run_name"],
            fingerprint=obj["fingerprint"], protocol=obj["protocol"],
            aggregate={k: v for k, v in obj.items() if k not in known},
            n=obj["n"], failures=obj["failures"], failures_by_kind=dict(obj.get("failures_by_kind") or {}),
            parse_rate=obj.get("parse_rate"), failed_samples=[Failure.from_json(f) for f in obj.get("failed_samples") or []],
            tasks=dict(obj.get("tasks") or {}), data_errors=int(obj.get("data_errors", 0)),
            data_error_samples=[Failure.from_json(f) for f in obj.get("data_error_samples") or []],
            adapter_report=report, **{k: obj.get(k) for k in _HEADER_KEYS[1:] + _TAIL_KEYS}, schema_version=version,
        )


# version 2's analytics keys: (label, unit) of each numeric value kept as a Measure
_V2_MEASURES = {"valid_dag_rate": ("valid DAG", "fraction"), "code_exec_success_rate": ("code runs OK", "fraction"),
                "mean_code_rounds": ("code rounds (mean)", "rounds"), "max_code_rounds": ("code rounds (max)", "rounds"),
                "task_consistency": ("declared task = sample task", "fraction")}
_V2_LATENCY = ("generation", "perception", "code", "total")


def report_from_v2(obj: dict[str, Any]) -> AdapterReport | None:
    """The AdapterReport a version 2 (or 1) metrics.json holds: its "funnel" (DT-R1's stages,
    counted for every model) as stages, its "analytics" rates, rounds and latency sums as measures,
    tool usage and task confusion as details. Where no prediction had a rollout ("not_applicable"
    == n: another model), the stages before "answer_parsed", which every such prediction skipped,
    and "decoding" are left out; so is a latency sum of 0 (version 2 wrote 0 where nothing was
    measured) and a value of None. None for a file without a funnel."""
    funnel = obj.get("funnel")
    if not isinstance(funnel, dict) or not funnel.get("stages"):
        return None
    n = int(funnel.get("n", obj.get("n") or 0))
    stages = list(funnel["stages"])
    foreign = n > 0 and funnel.get("not_applicable") == n
    if foreign and "answer_parsed" in stages:
        stages = stages[stages.index("answer_parsed"):]
    reached = funnel.get("reached") or {}
    analytics = obj.get("analytics") if isinstance(obj.get("analytics"), dict) else {}
    measures = [Measure(k, label, analytics[k], unit) for k, (label, unit) in _V2_MEASURES.items()
                if isinstance(analytics.get(k), (int, float))]
    latency = analytics.get("latency_s") or {}
    measures += [Measure(f"{k}_s", k, latency[k], "s") for k in _V2_LATENCY if isinstance(latency.get(k), (int, float)) and latency[k]]
    details = {k: analytics[k] for k in ("tool_usage", "task_confusion") if analytics.get(k)}
    return AdapterReport(model=str(obj.get("model")), n=n,
                         stages=[Stage(s, s.replace("_", " ").replace("dag", "DAG"), int(reached.get(s, 0))) for s in stages],
                         decoding=None if foreign else obj.get("decoding"), measures=measures, details=details)
