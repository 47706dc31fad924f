"""What a resumed run predicts again: the samples never predicted, plus those that failed outside
the model's answer (run.retry_failed kinds, at most run.max_attempts attempts each). A sample the
model itself failed ("parse") is its result and is never retried."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from rvt_bench.core.store import prediction_files, read_predictions
from rvt_bench.core.types import FAILURE_KINDS, Prediction, RunStoreError, Sample


@dataclass
class Plan:
    """done: the predictions recorded so far by sample id (every shard's file); failed_outside: this
    shard's samples that failed outside the model; again: those of them to predict again; todo:
    never predicted + again, in dataset order of each part."""

    done: dict[str, Prediction]
    failed_outside: list[Sample]
    again: list[Sample]
    todo: list[Sample]


def retry_settings(cfg: DictConfig) -> tuple[set[str], int]:
    """(run.retry_failed, run.max_attempts): the failure kinds to predict again (a kind or a list;
    default rvt_bench.core.types.RETRYABLE) and the attempts allowed per sample. Raises RunStoreError on a
    kind that is not a rvt_bench.core.types.FailureKind or max_attempts < 1."""
    kinds = cfg.run.retry_failed
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    unknown = sorted(set(kinds) - set(FAILURE_KINDS))
    if unknown:
        raise RunStoreError(f"run.retry_failed: unknown failure kinds {unknown}; expected some of {list(FAILURE_KINDS)}")
    max_attempts = int(cfg.run.max_attempts)
    if max_attempts < 1:
        raise RunStoreError(f"run.max_attempts must be >= 1, got {max_attempts}")
    return set(kinds), max_attempts


def plan(run_dir: Path, mine: list[Sample], retry: set[str], max_attempts: int, quiet: bool = False) -> Plan:
    """The Plan of `mine` (this shard's samples) from the run's prediction files. quiet: do not
    repeat rvt_bench.core.store's warnings about the files (a second read after predicting)."""
    attempts: dict[str, int] = {}
    if quiet:
        logging.getLogger("rvt_bench.core.store").disabled = True
    try:
        done = read_predictions(prediction_files(run_dir), attempts)
    finally:
        logging.getLogger("rvt_bench.core.store").disabled = False
    failed_outside = [s for s in mine if s.id in done and done[s.id].failure_kind in retry]
    again = [s for s in failed_outside if attempts.get(s.id, 0) < max_attempts]
    todo = [s for s in mine if s.id not in done] + again
    return Plan(done, failed_outside, again, todo)
