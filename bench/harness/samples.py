"""The samples a run evaluates: the dataset's loader (cfg.dataset's `loader` node, rvt_bench.loaders.config.loader_kwargs),
the first run.limit samples, repeated ids and the loader's own per-sample errors as data errors,
and where the data came from (a hub copy: rvt_bench.loaders.hub) with the loader's warnings about it."""
from __future__ import annotations

import logging
from typing import Any, NamedTuple

from hydra.utils import instantiate
from omegaconf import DictConfig

from rvt_bench.core.codec import unencodable_reason
from rvt_bench.core.records import Failure
from rvt_bench.core.types import DATA, RunStoreError, Sample
from rvt_bench.loaders.base import Dataset as BaseDataset
from rvt_bench.loaders.config import loader_kwargs

log = logging.getLogger(__name__)


class Loaded(NamedTuple):
    """What `load_samples` returns (unpacks as a 4-tuple)."""

    samples: list[Sample]
    errors: list[Failure]
    data_source: dict[str, Any] | None  # the loader's data_source (hub copies), None for local files
    warnings: list[str]                 # the loader's warnings about the data (a non-official copy)


def unreadable_text(sample: Sample) -> str | None:
    """Why the sample's query or a reference holds text no codec accepts (a lone surrogate), or None."""
    texts = [("the query", sample.query), *((f"reference {i}", a) for i, a in enumerate(sample.target.answers or []))]
    return next((r for r in (unencodable_reason(what, text) for what, text in texts) if r), None)


def load_samples(cfg: DictConfig) -> Loaded:
    """The dataset's samples in dataset order (first run.limit of them), the samples its loader
    could not build (unreadable image, malformed annotation) or whose id repeats an earlier one's
    (the first is kept) or whose query or reference holds text no codec accepts, and the loader's data source and warnings. Raises ValueError on
    run.limit < 1 and RunStoreError when no sample is left."""
    dataset = instantiate(loader_kwargs(cfg.dataset), _convert_="all")
    samples = list(dataset)
    errors = [Failure.from_json(dict(e, kind=e.get("kind", DATA))) for e in getattr(dataset, "errors", []) or []]
    # a loader on rvt_bench's base class has logged its own (record_error); another (a plugin's) may not have
    logged = len(errors) if isinstance(dataset, BaseDataset) else 0
    seen: dict[str, Sample] = {}
    unique = []
    for s in samples:  # a repeated id is the later sample's data error: results are keyed by id
        if s.id in seen:
            errors.append(Failure(s.id, DATA, (
                f"dataset {cfg.dataset.name!r}: sample id {s.id!r} repeats an earlier sample's id "
                f"(frames {s.frames[0] if s.frames else '?'} vs {seen[s.id].frames[0] if seen[s.id].frames else '?'}); "
                f"ids must be unique, the first one is kept")))
            continue
        seen[s.id] = s
        why = unreadable_text(s)
        if why is not None:  # no model and no metric may see it (rvt_bench.core.codec)
            errors.append(Failure(s.id, DATA, f"dataset {cfg.dataset.name!r}: sample {s.id!r}: {why}"))
            continue
        unique.append(s)
    samples = unique
    if cfg.run.limit is not None:  # >= 1: rvt_bench.harness.config.check_ranges
        samples = samples[: int(cfg.run.limit)]
    if not samples:
        raise RunStoreError(f"dataset {cfg.dataset.name!r} (split {cfg.dataset.get('split')!r}) has no samples")
    for e in errors[logged:]:
        log.warning("data error, sample not evaluated: %s: %s", e.sample_id or e.extra.get("file"), e.message)
    return Loaded(samples, errors, getattr(dataset, "data_source", None), list(getattr(dataset, "warnings", []) or []))
