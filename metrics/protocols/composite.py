"""A protocol made of parts, one per modality (e.g. the bundled demo: ReasonSeg-format images and
ReVOS-format videos). Routing is by `sample.modality` only, never by dataset name."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.types import DatasetFormatError, Prediction, Sample
from metrics.protocols.base import Protocol


def _build(key: str, spec: Any) -> Protocol:
    if hasattr(spec, "score") and hasattr(spec, "aggregate"):
        return spec
    if isinstance(spec, Mapping) or hasattr(spec, "_target_"):  # a dict / DictConfig not yet instantiated
        from hydra.utils import instantiate

        return instantiate(spec)
    raise TypeError(f"composite protocol part {key!r}: expected a Protocol or a config with _target_, got {type(spec).__name__}")


class CompositeProtocol(Protocol):
    """Scores each sample with the part named by its modality and aggregates each part on its own.

    parts:    {modality: Protocol or its Hydra config ({"_target_": ..., **options})}, e.g.
              {"image": ReasonSegProtocol(), "video": ReVOSProtocol()}.
    headline: metric keys "<modality>/<key>"; default: every part's headline, in parts order.
    Records get "part": the modality key. Raises DatasetFormatError for a sample whose modality has
    no part.
    """

    name = "composite"

    def __init__(self, parts: Mapping[str, Any], headline: list[str] | None = None):
        if not parts:
            raise ValueError("composite protocol: no parts given")
        self.parts: dict[str, Protocol] = {str(k): _build(str(k), v) for k, v in parts.items()}
        self.name = "+".join(f"{k}:{p.name}" for k, p in self.parts.items())
        self.headline = list(headline) if headline is not None else [
            f"{k}/{h}" for k, p in self.parts.items() for h in p.headline
        ]

    def score(self, sample: Sample, pred: Prediction) -> dict:
        part = self.parts.get(sample.modality)
        if part is None:
            raise DatasetFormatError(
                f"sample {sample.id!r}: modality {sample.modality!r} has no protocol part (parts: {sorted(self.parts)})"
            )
        return {**part.score(sample, pred), "part": sample.modality}

    def aggregate(self, records: list[dict]) -> dict:
        """{"metrics": {"<part>/<key>": float}, "breakdown": {"<part>/<meta key>": {...}},
        "parts": {part: that part's aggregate}, "n": all records}. Parts without records are left out."""
        unknown = {r.get("part") for r in records} - set(self.parts)
        if unknown:
            raise DatasetFormatError(f"composite protocol: records of unknown parts {sorted(map(str, unknown))}")
        parts, metrics, breakdown = {}, {}, {}
        for key, protocol in self.parts.items():
            own = [r for r in records if r["part"] == key]
            if not own:
                continue
            parts[key] = result = protocol.aggregate(own)
            metrics.update({f"{key}/{m}": v for m, v in result["metrics"].items()})
            breakdown.update({f"{key}/{b}": v for b, v in result.get("breakdown", {}).items()})
        return {"metrics": metrics, "breakdown": breakdown, "parts": parts, "n": len(records)}
