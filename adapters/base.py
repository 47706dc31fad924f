"""The protocol every model adapter implements; the runner sees models only through it.

An adapter answers one `Sample` at a time and must not know which benchmark it runs on except
through `sample.task` and `sample.modality` (docs/architecture.md "Conventions").
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, fields
from typing import Any, Mapping

from rvt_bench.core.types import AdapterError, Prediction, Sample


class Adapter(ABC):
    """A model behind one interface. Instantiated by the runner with `hydra.utils.instantiate(cfg.model)`.

    Heavy resources (weights, servers) load lazily on the first `predict`, so a resumed run with
    nothing left to do never loads a model.
    """

    name: str
    preferred_batch_size: int = 1
    """Samples the runner hands predict_batch at once when run.batch_size is null (e.g. a batching
    policy's batch size); results must not depend on it."""

    @abstractmethod
    def fingerprint(self) -> dict:
        """The semantic configuration that determines predictions (model id, weights, policy,
        perception, budgets), JSON-serialisable; the run directory name is derived from it."""

    @abstractmethod
    def predict(self, sample: Sample) -> Prediction:
        """Answer one sample. Raises rvt_bench.core.types.AdapterError (or a subclass such as ParseError,
        whose `kind` the runner records) when no prediction can be made; the run goes on."""

    def predict_batch(self, samples: list[Sample]) -> list[Prediction | AdapterError]:
        """Answer several samples; per sample, a Prediction or the AdapterError that failed it.
        Backends that batch (hf, openai) override this; results must not depend on the batch."""
        out: list[Prediction | AdapterError] = []
        for sample in samples:
            try:
                out.append(self.predict(sample))
            except AdapterError as exc:
                out.append(exc)
        return out

    def preflight(self) -> None:
        """Check, once before the first sample, that predictions can be made at all: load the model,
        reach its server. Raises AdapterError naming the setting to fix, so a missing package or a
        server that is down stops the run with one message instead of failing every sample. The
        default checks nothing."""

    def code_isolation(self) -> str | None:
        """How the code this model writes is contained: "bwrap" (bubblewrap; docs/sandbox.md) or
        "none" (unsandboxed, asked for by name), recorded with the run (manifest.json, summary,
        report, the leaderboard's `sandbox` column). None (the default): the model runs no code
        of its own."""
        return None

    def close(self) -> None:
        """Release models, processes and files; the default has nothing to release."""


def settings_block(what: str, schema: type, given: Mapping[str, Any] | None) -> dict:
    """A nested block of an adapter's arguments (e.g. model.frames) as a plain dict: the dataclass
    `schema`'s defaults (the one home of those defaults, also the Hydra schema's) updated by `given`.
    Raises AdapterError naming unknown keys (a config composed by Hydra has none: its schema
    refuses them at compose time; this guards direct construction)."""
    keys = [f.name for f in fields(schema)]
    unknown = sorted(set(given or {}) - set(keys))
    if unknown:
        raise AdapterError(f"model.{what}: unknown keys {unknown}; expected {keys}")
    return asdict(schema(**dict(given or {})))
