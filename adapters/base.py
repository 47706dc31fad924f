"""The protocol every model adapter implements; the harness sees models only through it.

An adapter answers one `Sample` at a time and must not know which benchmark it runs on except
through `sample.task` and `sample.modality` (docs/architecture.md "Conventions"). After scoring it
reports on its own run (`report`): its funnel of stages, what it measured (docs/adding-a-model.md).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from rvt_bench.core.benchmark import PredictionLayout
from rvt_bench.core.records import AdapterReport, Measure, ScoreRecord, Stage
from rvt_bench.core.types import AdapterError, Prediction, Sample

RESULT_CORRECT = ("result_correct", "result correct")
"""The last stage of every funnel: the score record says correct (rvt_bench.core.records.ScoreRecord.correct:
IoU > 0.5, a judge verdict >= 0.5, as the DT-R1 paper's failure analysis counts a result correct)."""


@dataclass(frozen=True)
class ScoredSample:
    """One scored sample as an adapter's report reads it: the sample, the adapter's prediction (a
    failure is a Prediction with `error`), and the protocol's score record."""

    sample: Sample
    prediction: Prediction
    record: ScoreRecord


@dataclass(frozen=True)
class SampleStage:
    """Where one sample stopped in its adapter's funnel (scores.jsonl "funnel").

    first_failed:   the key of the first stage it did not pass; None when it passed every stage,
                    or every stage but an undecided result (result_correct None).
    result_correct: True | False, None when undecided (a text answer without a judge).
    """

    first_failed: str | None
    result_correct: bool | None

    def to_json(self) -> dict[str, Any]:
        return {"first_failed": self.first_failed, "result_correct": self.result_correct}


@dataclass(frozen=True)
class Attribution:
    """An adapter's failure attribution across runs (`rvt-bench attribute`): text, as printed, and
    data, as `--json` writes it."""

    text: str
    data: dict[str, Any]


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

    def use_prediction_layouts(self, layouts: Mapping[str, PredictionLayout]) -> None:
        """Told by the runner before the first sample: where the run's benchmark says a sample's
        predicted masks lie in a folder (conf/dataset/<name>.yaml `predictions`,
        rvt_bench.core.benchmark.PredictionLayout by name). Only a model that reads predictions
        from files uses it; the default ignores it."""

    def code_isolation(self) -> str | None:
        """How the code this model writes is contained: "bwrap" (bubblewrap; docs/sandbox.md) or
        "none" (unsandboxed, asked for by name), recorded with the run (manifest.json, summary,
        report, the leaderboard's `sandbox` column). None (the default): the model runs no code
        of its own."""
        return None

    def not_comparable(self) -> str | None:
        """Why this configuration's numbers are not comparable with the model's published ones (a
        named variant off its paper's protocol), naming the comparable setting: every metric of the
        run is then marked so in metrics.json "not_comparable" and in tables
        (rvt_bench.harness.results.mark_not_comparable). None (the default): nothing to mark."""
        return None

    def close(self) -> None:
        """Release models, processes and files; the default has nothing to release."""

    # --- the adapter's own report (after scoring) ------------------------------------------------

    stages: ClassVar[tuple[tuple[str, str], ...]] = ()
    """The adapter's funnel before RESULT_CORRECT: (key, label) of each stage, in order, e.g.
    (("seg_emitted", "[SEG] emitted"), ("mask_decoded", "mask decoded")). () = no funnel: the
    report has no stages and nothing is printed for them."""

    def passed(self, item: ScoredSample) -> Mapping[str, bool | None]:
        """Per key of `stages`: True (the sample passed the stage), False (it failed there) or None
        (the stage does not apply to this sample, e.g. SAM2 for a text answer: counted as passed).
        A key left out counts as None. Read from the prediction (its trace, timings, error); called
        only when `stages` is declared."""
        return {}

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        """What the adapter measured over its predictions, in display order (rates, rounds, seconds
        from Prediction.timings...); a value it did not measure has no Measure. Default: none."""
        return []

    def sample_stage(self, item: ScoredSample) -> SampleStage | None:
        """Where `item` stopped in the funnel: the first stage `passed` says False, else
        RESULT_CORRECT when the record is not correct (ScoreRecord.correct); None without a funnel."""
        if not self.stages:
            return None
        passed = self.passed(item)
        first = next((key for key, _ in self.stages if passed.get(key) is False), None)
        if first is not None:
            return SampleStage(first, False)
        correct = item.record.correct()
        return SampleStage(RESULT_CORRECT[0] if correct is False else None, correct)

    def report(self, scored: Sequence[ScoredSample]) -> AdapterReport | None:
        """The adapter's report on its scored samples (metrics.json "adapter_report"; the summary,
        report.html and the leaderboard render it as given): the funnel of `stages` + RESULT_CORRECT
        counted over `scored` and `measures(scored)`, plus a "results undecided" count when
        some are. None when the adapter declares neither stages nor measures. An adapter that
        decodes under a grammar overrides this to set `decoding` ("grammar" | "free"); one with
        structured extras sets `details`."""
        measures = self.measures(scored)
        if not self.stages and not measures:
            return None
        stages: list[Stage] = []
        if self.stages:
            keys = [key for key, _ in self.stages] + [RESULT_CORRECT[0]]
            reached = [0] * len(keys)
            undecided = 0
            for item in scored:
                stopped = self.sample_stage(item) or SampleStage(None, None)
                if stopped.first_failed is not None:
                    upto = keys.index(stopped.first_failed)
                else:  # passed every stage; an undecided result does not pass the last
                    upto = len(keys) - (stopped.result_correct is None)
                    undecided += stopped.result_correct is None
                for k in range(upto):
                    reached[k] += 1
            stages = [Stage(key, label, reached[k]) for k, (key, label) in enumerate((*self.stages, RESULT_CORRECT))]
            if undecided:
                measures = [*measures, Measure("result_undecided", "results undecided (text without a judge verdict)",
                                               undecided, "count")]
        return AdapterReport(model=self.name, n=len(scored), stages=stages, measures=measures)

    @classmethod
    def attribute(cls, run_dirs: Sequence[Path], examples: int = 3) -> Attribution | None:
        """Why each failed sample failed, across finished runs of this model (`rvt-bench attribute
        RUN_DIR...`); None (the default): the adapter has no attribution."""
        return None


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
