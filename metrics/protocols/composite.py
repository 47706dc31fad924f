"""A protocol made of parts, each scoring the samples routed to it (e.g. the bundled demo:
ReasonSeg-format images, ReVOS-format videos, RVTBench-format queries). Routing reads a field of the
sample (its modality, its task, or a ``meta`` key such as the demo's ``meta["source"]``), never the
dataset's name."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Found
from rvt_bench.metrics.protocols.base import Protocol, excluded_block


def _build(key: str, spec: Any) -> Protocol:
    if hasattr(spec, "score") and hasattr(spec, "aggregate"):
        return spec
    if isinstance(spec, Mapping) or hasattr(spec, "_target_"):  # a dict / DictConfig not yet instantiated
        from hydra.utils import instantiate

        return instantiate(spec)
    raise TypeError(f"composite protocol part {key!r}: expected a Protocol or a config with _target_, got {type(spec).__name__}")


class CompositeProtocol(Protocol):
    """Scores each sample with the part its route value names and aggregates each part on its own.

    parts:    {part name: Protocol or its Hydra config ({"_target_": ..., **options})}, e.g.
              {"image": ReasonSegProtocol(), "video": ReVOSProtocol()}.
    headline: metric keys "<part>/<key>"; default: every part's headline, in parts order.
    route_by: the sample field whose value picks the part: "modality" (default), "task", or
              "meta.<key>" (e.g. "meta.source").
    routes:   {route value: part name}; None = the route value is the part name.
    name:     the protocol's name in records and metrics.json; default "<part>:<part's name>+...".
    Records get parts["part"] = the part name ("part_<depth>" in a composite nested in another). A
    metric "<part>/<key>" is estimated by its part over that part's records. Raises
    DatasetFormatError for a sample whose route value has no part (or lacks the meta key),
    ValueError for an unknown route_by or a route to no part.
    """

    name = "composite"

    def __init__(self, parts: Mapping[str, Any], headline: list[str] | None = None, route_by: str = "modality",
                 routes: Mapping[str, str] | None = None, name: str | None = None):
        if not parts:
            raise ValueError("composite protocol: no parts given")
        if route_by not in ("modality", "task") and not (route_by.startswith("meta.") and len(route_by) > 5):
            raise ValueError(f"composite protocol: route_by must be 'modality', 'task' or 'meta.<key>', got {route_by!r}")
        self.parts: dict[str, Protocol] = {str(k): _build(str(k), v) for k, v in parts.items()}
        self.route_by = route_by
        self.routes = None if routes is None else {str(k): str(v) for k, v in routes.items()}
        if self.routes is not None and set(self.routes.values()) - set(self.parts):
            raise ValueError(f"composite protocol: routes name parts {sorted(set(self.routes.values()) - set(self.parts))} "
                             f"that do not exist (parts: {sorted(self.parts)})")
        self.part_key = "part"
        self._nest(0)
        self.name = name or "+".join(f"{k}:{p.name}" for k, p in self.parts.items())
        self.headline = list(headline) if headline is not None else [
            f"{k}/{h}" for k, p in self.parts.items() for h in p.headline
        ]

    def _nest(self, depth: int) -> None:
        """Record keys by depth: a composite inside a composite (the demo's RVTBench part) writes its
        part under "part_<depth>", so the outer one's "part" is kept."""
        self.part_key = "part" if depth == 0 else f"part_{depth}"
        for part in self.parts.values():
            if isinstance(part, CompositeProtocol):
                part._nest(depth + 1)

    def part_of(self, sample: Sample) -> str:
        """The name of the part that scores `sample`; raises DatasetFormatError when there is none."""
        if self.route_by.startswith("meta."):
            key = self.route_by[5:]
            if key not in sample.meta:
                raise DatasetFormatError(f"sample {sample.id!r}: meta has no {key!r} to route it to a protocol part")
            value = str(sample.meta[key])
        else:
            value = str(getattr(sample, self.route_by))
        name = value if self.routes is None else self.routes.get(value)
        if name not in self.parts:
            raise DatasetFormatError(
                f"sample {sample.id!r}: {self.route_by} {value!r} has no protocol part (parts: {sorted(self.parts)}"
                + ("" if self.routes is None else f", routes: {self.routes}") + ")"
            )
        return name

    def part_of_record(self, record: ScoreRecord) -> str | None:
        """The part of a score record: its part key, else (a record written before the key
        existed, e.g. RVTBench's by task) its route value read from the record; None when unknown."""
        if self.part_key in record.parts:
            return record.parts[self.part_key]
        if self.route_by.startswith("meta."):
            value = record.meta.get(self.route_by[5:])
        else:
            value = getattr(record, self.route_by)
        if value is None:
            return None
        return str(value) if self.routes is None else self.routes.get(str(value))

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        name = self.part_of(sample)
        record = self.parts[name].score(sample, pred)
        record.parts[self.part_key] = name
        return record

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        name, _, rest = key.partition("/")
        if name not in self.parts:
            return f"no protocol part {name!r}"
        own = [r for r in records if self.part_of_record(r) == name]
        if not own:
            return f"no samples of part {name!r}"
        found = self.parts[name].estimator(rest, own)
        if not isinstance(found, str):
            found.key = key
        return found

    def attach_judge(self, judge: Any) -> None:
        """Attach the judge to this protocol and every part."""
        self.judge = judge
        for part in self.parts.values():
            part.attach_judge(judge)

    def judge_records(self, records: list[ScoreRecord]) -> None:
        """Each part judges its own records (in place)."""
        for key, protocol in self.parts.items():
            protocol.judge_records([r for r in records if self.part_of_record(r) == key])

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """{"metrics": {"<part>/<key>": float}, "breakdown": {"<part>/<meta key>": {...}},
        "parts": {part: that part's aggregate}, "n": the records the headlines average (a part's
        "excluded_samples" bubble up, each reason prefixed with its part), "baseline_empty": {"<part>/<key>": float},
        "warnings": ["<part>: ..."]}. Parts without records are left out."""
        unknown = {self.part_of_record(r) for r in records} - set(self.parts)
        if unknown:
            raise DatasetFormatError(f"composite protocol: records of unknown parts {sorted(map(str, unknown))}")
        parts, metrics, breakdown, baseline, warnings = {}, {}, {}, {}, []
        for key, protocol in self.parts.items():
            own = [r for r in records if self.part_of_record(r) == key]
            if not own:
                continue
            parts[key] = result = protocol.aggregate(own)
            metrics.update({f"{key}/{m}": v for m, v in result["metrics"].items()})
            breakdown.update({f"{key}/{b}": v for b, v in result.get("breakdown", {}).items()})
            baseline.update({f"{key}/{m}": v for m, v in result.get("baseline_empty", {}).items()})
            warnings += [f"{key}: {w}" for w in result.get("warnings", [])]
        # what a part's rule leaves out is left out of the whole run's n too, named with its part
        reasons = {row["sample_id"]: f"{key}: {row['reason']}" for key, result in parts.items()
                   for row in result.get("excluded_samples") or []}
        return {"metrics": metrics, "breakdown": breakdown, "parts": parts, "n": len(records) - len(reasons),
                **excluded_block(reasons), "baseline_empty": baseline, "warnings": warnings}

    def variant_label(self) -> str:
        """The parts' variants, "<part>: <label>" joined by "; " ("" when every part is the reference's)."""
        return "; ".join(f"{k}: {p.variant_label()}" for k, p in self.parts.items()
                         if callable(getattr(p, "variant_label", None)) and p.variant_label())
