"""The contract every scoring protocol of conf/dataset/*.yaml keeps, on synthetic samples of its
format with random predictions (some failed, some empty):

- score records survive a JSON round trip (scores.jsonl, ScoreRecord.to_json / from_json), and
  aggregating the read-back records gives the same metrics.json body;
- aggregate does not depend on the records' order;
- score_many with workers=1 and workers=2 gives the same records;
- scoring shards (samples[k::n], as run.shard / run.num_shards) and aggregating the union of
  their records equals scoring and aggregating the whole.

Each conf/dataset/<name>.yaml (shipped, or in RVT_BENCH_CONF_PATH's dataset/ folders) is covered by the
samples its own test module gives (`contract_samples` in tests/test_datasets_<name>.py or
tests/test_<name>.py; tests/contract_samples.py), else by those of a benchmark scored by the same
protocol class; a composite by its parts' (test_every_dataset_config_is_covered). Adding a benchmark
adds no line here.
"""
from __future__ import annotations

import importlib
import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rvt_bench.core import benchmark
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample
from tests.contract_samples import rand_boxes, rand_mask, task_samples

REPO = Path(__file__).resolve().parent.parent
CONFIGS = benchmark.declared_names()  # conf/dataset/, then RVT_BENCH_CONF_PATH's dataset/ folders
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
HOOK_MODULES = ("tests.test_datasets_{name}", "tests.test_{name}")  # where a benchmark's contract_samples lives


def hook_of(name: str):
    """The `contract_samples(rng, node)` of benchmark `name`'s own test module, or None."""
    for pattern in HOOK_MODULES:
        module = pattern.format(name=name)
        if (REPO / (module.replace(".", "/") + ".py")).is_file():
            hook = getattr(importlib.import_module(module), "contract_samples", None)
            if hook is not None:
                return hook
    return None


def class_of(node) -> str:
    return node["_target_"]


def class_hooks() -> dict:
    """Protocol class -> a hook of a benchmark scored by it: a benchmark (or a composite's part) that
    reuses another's protocol class needs no hook of its own."""
    out = {}
    for name in CONFIGS:
        hook = hook_of(name)
        if hook is not None:
            out.setdefault(class_of(protocol_node(name)), hook)
    return out


def samples_for(node, rng, name: str | None = None) -> list[Sample]:
    """Synthetic samples for the protocol config `node` (of benchmark `name`): the benchmark's own
    contract_samples, else that of a benchmark scored by the same class, or a composite's parts'
    samples routed as it routes them (by task, or by a meta key: "meta.source")."""
    hook = hook_of(name) if name is not None else None
    if hook is not None:
        return hook(rng, node)
    if class_of(node).rsplit(".", 1)[-1] != "CompositeProtocol":
        hook = class_hooks().get(class_of(node))
        if hook is None:
            pytest.fail(f"protocol {node['_target_']}" + (f" of conf/dataset/{name}.yaml" if name else "") +
                        f": define contract_samples(rng, node) in tests/test_datasets_{name or '<name>'}.py"
                        " (tests/contract_samples.py)")
        return hook(rng, node)
    route = node.get("route_by", "task")
    if route == "task":
        return [replace(s, id=f"{task}/{s.id}") for task in node["parts"] for s in task_samples(rng, tasks=(task,), n=4)]
    key = route.split(".", 1)[1]
    return [replace(s, id=f"{source}/{s.id}", meta={**s.meta, key: source})
            for source, part in node["routes"].items() for s in samples_for(node["parts"][part], rng)]


def prediction(rng: np.random.Generator, s: Sample) -> Prediction:
    roll = rng.random()
    if roll < 0.15:
        return Prediction.failure(s.id, "parse", "no answer")
    if roll < 0.25:
        return Prediction(s.id)  # answered nothing
    n = s.num_frames
    if s.task == "grounding":
        return Prediction(s.id, task="grounding", boxes=[rand_boxes(rng) for _ in range(n)])
    if s.task in ("vqa", "summarization"):
        return Prediction(s.id, task=s.task, text=str(rng.choice(["a red car parks", "a blue car", "nothing here"])))
    return Prediction(s.id, task="segmentation", masks=[rand_mask(rng) for _ in range(n)])


def protocol_node(name: str):
    import run_bench  # noqa: F401  (registers the ${repo:} resolver used by some configs)

    return OmegaConf.load(benchmark.dataset_file(name)).protocol


def protocol_of(name: str):
    return instantiate(protocol_node(name))


def canonical(body: dict) -> str:
    """An aggregate as text: equal text = equal values (NaN included), key order ignored."""
    return json.dumps(body, sort_keys=True, default=str)


@pytest.fixture(params=CONFIGS)
def case(request):
    name = request.param
    rng = np.random.default_rng(sum(map(ord, name)))
    samples = samples_for(OmegaConf.to_container(protocol_node(name)), rng, name)
    if any(s.task in ("vqa", "summarization") for s in samples) and shutil.which("java") is None:
        pytest.skip("java is not installed (caption metrics)")
    pairs = [(s, prediction(rng, s)) for s in samples]
    protocol = protocol_of(name)
    records = [r for r, _ in protocol.score_many(pairs, workers=1, progress=False)]
    return name, protocol, pairs, records


def test_every_dataset_config_is_covered():
    for name in CONFIGS:
        assert samples_for(OmegaConf.to_container(protocol_node(name)), np.random.default_rng(0), name), (
            f"conf/dataset/{name}.yaml: its contract_samples gives no sample")


def test_records_survive_a_json_round_trip(case):
    _, protocol, _, records = case
    back = [ScoreRecord.from_json(json.loads(json.dumps(r.to_json()))) for r in records]
    assert back == records
    assert canonical(protocol.aggregate(back)) == canonical(protocol.aggregate(records))


def test_aggregate_does_not_depend_on_record_order(case):
    _, protocol, _, records = case
    whole = canonical(protocol.aggregate(records))
    for seed in range(3):
        shuffled = list(records)
        random.Random(seed).shuffle(shuffled)
        assert canonical(protocol.aggregate(shuffled)) == whole


def test_one_worker_equals_two(case):
    _, protocol, pairs, records = case
    parallel = [r for r, _ in protocol.score_many(pairs, workers=2, chunksize=3, progress=False)]
    assert parallel == records


@pytest.mark.parametrize("num_shards", [2, 3])
def test_union_of_shards_aggregates_as_the_whole(case, num_shards):
    _, protocol, pairs, records = case
    union = [r for k in range(num_shards) for r, _ in protocol.score_many(pairs[k::num_shards], progress=False)]
    assert sorted(union, key=lambda r: r.sample_id) == sorted(records, key=lambda r: r.sample_id)
    assert canonical(protocol.aggregate(union)) == canonical(protocol.aggregate(records))


def test_the_records_are_not_trivial(case):
    """The contract is only worth something if the samples exercise the metrics."""
    name, protocol, _, records = case
    body = protocol.aggregate(records)
    # every record is counted in n (the headline's) or excluded by the protocol's rule, with its reason
    excluded = sum((body.get("excluded") or {}).values())
    assert body["n"] + excluded == len(records) > 0
    assert len(body.get("excluded_samples") or []) in (0, excluded)
    if protocol.headline == []:  # scored by the benchmark's server (no public GT): a warning instead
        assert body["metrics"] == {} and "submission" in body["warnings"][0]
        return
    numbers = [v for v in body["metrics"].values() if isinstance(v, float) and np.isfinite(v)]
    assert numbers and any(0 < v < 1 for v in numbers), (name, body["metrics"])


def test_every_headline_metric_has_an_estimator_that_reproduces_it(case):
    """The protocol declares each headline metric's bootstrap estimator (its interval in metrics.json)."""
    name, protocol, _, records = case
    metrics = protocol.aggregate(records)["metrics"]
    numeric = [k for k in protocol.headline if isinstance(metrics.get(k), float) and np.isfinite(metrics[k])]
    assert numeric or (protocol.headline == [] and metrics == {}), (name, metrics)
    for key in numeric:
        est = protocol.estimator(key, records)
        assert not isinstance(est, str), (name, key, est)
        assert abs(est.value() - metrics[key]) <= 1e-6, (name, key)


def test_a_no_target_answer_scores_as_the_empty_prediction(case):
    """"No target" is an answer of its own (Prediction.no_target); a benchmark without no-target
    samples (Protocol.no_target == "empty") scores it exactly as an empty prediction, so no number
    of these benchmarks moves, and the record it writes is the empty one's."""
    name, protocol, pairs, _ = case
    if protocol.no_target != "empty":
        pytest.skip(f"{name} scores no-target answers itself")
    samples = [s for s, _ in pairs]
    said = protocol.score_many([(s, Prediction.none_found(s.id, 0.9, task=s.task)) for s in samples], progress=False)
    empty = protocol.score_many([(s, Prediction(s.id, task=s.task)) for s in samples], progress=False)
    assert [r for r, _ in said] == [r for r, _ in empty]
    assert all(p.no_target and p.error is None for _, p in said)  # the answer itself is kept for the report
    assert canonical(protocol.aggregate([r for r, _ in said])) == canonical(protocol.aggregate([r for r, _ in empty]))
