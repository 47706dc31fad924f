"""The contract every scoring protocol of conf/dataset/*.yaml keeps, on synthetic samples of its
format with random predictions (some failed, some empty):

- score records survive a JSON round trip (scores.jsonl, ScoreRecord.to_json / from_json), and
  aggregating the read-back records gives the same metrics.json body;
- aggregate does not depend on the records' order;
- score_many with workers=1 and workers=2 gives the same records;
- scoring shards (samples[k::n], as run.shard / run.num_shards) and aggregating the union of
  their records equals scoring and aggregating the whole.

A new conf/dataset/<name>.yaml is covered by its protocol class's factory (FACTORIES); only a new
protocol class needs one (test_every_dataset_config_is_covered).
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample, Target

REPO = Path(__file__).resolve().parent.parent
CONFIGS = sorted(p.stem for p in (REPO / "conf" / "dataset").glob("*.yaml"))
H, W = 12, 16
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")


def rand_mask(rng: np.random.Generator, p: float = 0.3) -> dict | None:
    m = np.zeros((H, W), dtype=bool)
    if rng.random() < 0.2:
        return None
    y0, x0 = rng.integers(0, H - 3), rng.integers(0, W - 3)
    m[y0:y0 + rng.integers(2, H - y0), x0:x0 + rng.integers(2, W - x0)] = True
    m &= rng.random((H, W)) > p / 3
    return masks.encode(m) if m.any() else None


def rand_boxes(rng: np.random.Generator) -> list:
    if rng.random() < 0.3:
        return []
    x0, y0 = float(rng.integers(0, W - 4)), float(rng.integers(0, H - 4))
    return [[x0, y0, x0 + float(rng.integers(2, 4)), y0 + float(rng.integers(2, 4))]]


def video(sid: str, n: int, task: str, target: Target, meta: dict) -> Sample:
    return Sample(id=sid, dataset="contract", split="test", modality="video", frames=[f"{sid}/{k}.jpg" for k in range(n)],
                  frame_ids=[str(k) for k in range(n)], query="the object", task=task, target=target, meta=meta)


def image_samples(rng, n=8, meta_key="is_sentence", values=(False, True)) -> list[Sample]:
    out = []
    for i in range(n):
        gt = rand_mask(rng) or masks.encode(np.ones((H, W), bool))
        out.append(Sample(id=f"img{i:02d}", dataset="contract", split="val", modality="image", frames=[f"{i}.jpg"],
                          frame_ids=["0"], query="q", task="segmentation", target=Target(masks=[gt]),
                          meta={meta_key: values[i % len(values)], "level": 1 + i % 2}))
    return out


def revos_samples(rng, n=8) -> list[Sample]:
    out = []
    for i in range(n):
        frames = 3
        gt = [rand_mask(rng) for _ in range(frames)]
        fg = [m if m is not None else None for m in gt]
        out.append(video(f"vid{i:02d}", frames, "segmentation", Target(masks=gt, foreground=fg),
                         {"type_id": i % 3, "video": f"v{i}"}))
    return out


def task_samples(rng, tasks=("segmentation", "grounding", "vqa", "summarization"), n=12) -> list[Sample]:
    out = []
    for i in range(n):
        task, frames = tasks[i % len(tasks)], 3
        meta = {"level": 1 + i % 3, "category": ("semantic", "spatial", "temporal")[i % 3]}
        if task == "segmentation":
            target = Target(masks=[rand_mask(rng) for _ in range(frames)])
        elif task == "grounding":
            target = Target(boxes=[rand_boxes(rng) for _ in range(frames)])
        else:
            target = Target(answers=[f"a red car number {i} parks", "a car parks"])
        out.append(video(f"q{i:02d}", frames, task, target, meta))
    return out


# Samples per protocol class (its `_target_`'s last name): a benchmark that reuses a protocol needs
# nothing here; a new protocol class adds its factory (rng, protocol node) -> samples. A composite is
# covered through its parts (`samples_for`).
FACTORIES = {
    "ReasonSegProtocol": lambda rng, node: image_samples(rng),
    "LLMSegProtocol": lambda rng, node: image_samples(rng, meta_key="from_dataset", values=("coco", "ego_objects")),
    "ReVOSProtocol": lambda rng, node: revos_samples(rng),
    "RVTBenchProtocol": lambda rng, node: task_samples(rng, tasks=tuple(dict.fromkeys(
        h.split("/", 1)[0] for h in node.get("headline") or ["segmentation/J&F", "grounding/m_vIoU", "vqa/BLEU-4",
                                                             "summarization/BLEU-4"]))),
}


def samples_for(node, rng) -> list[Sample]:
    """Synthetic samples for the protocol config `node`: its class's factory, or a composite's parts'
    samples routed as it routes them (by task, or by a meta key: "meta.source")."""
    from dataclasses import replace

    kind = node["_target_"].rsplit(".", 1)[-1]
    if kind != "CompositeProtocol":
        if kind not in FACTORIES:
            pytest.fail(f"protocol {node['_target_']}: add a sample factory for {kind} to FACTORIES")
        return FACTORIES[kind](rng, node)
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

    return OmegaConf.load(REPO / "conf" / "dataset" / f"{name}.yaml").protocol


def protocol_of(name: str):
    return instantiate(protocol_node(name))


def canonical(body: dict) -> str:
    """An aggregate as text: equal text = equal values (NaN included), key order ignored."""
    return json.dumps(body, sort_keys=True, default=str)


@pytest.fixture(params=CONFIGS)
def case(request):
    name = request.param
    rng = np.random.default_rng(sum(map(ord, name)))
    samples = samples_for(OmegaConf.to_container(protocol_node(name)), rng)
    if any(s.task in ("vqa", "summarization") for s in samples) and shutil.which("java") is None:
        pytest.skip("java is not installed (caption metrics)")
    pairs = [(s, prediction(rng, s)) for s in samples]
    protocol = protocol_of(name)
    records = [r for r, _ in protocol.score_many(pairs, workers=1, progress=False)]
    return name, protocol, pairs, records


def test_every_dataset_config_is_covered():
    for name in CONFIGS:
        assert samples_for(OmegaConf.to_container(protocol_node(name)), np.random.default_rng(0)), (
            f"conf/dataset/{name}.yaml: add a sample factory for its protocol class to FACTORIES")


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
    assert body["n"] == len(records) > 0
    numbers = [v for v in body["metrics"].values() if isinstance(v, float) and np.isfinite(v)]
    assert numbers and any(0 < v < 1 for v in numbers), (name, body["metrics"])


def test_every_headline_metric_has_an_estimator_that_reproduces_it(case):
    """The protocol declares each headline metric's bootstrap estimator (its interval in metrics.json)."""
    name, protocol, _, records = case
    metrics = protocol.aggregate(records)["metrics"]
    numeric = [k for k in protocol.headline if isinstance(metrics.get(k), float) and np.isfinite(metrics[k])]
    assert numeric, (name, metrics)
    for key in numeric:
        est = protocol.estimator(key, records)
        assert not isinstance(est, str), (name, key, est)
        assert abs(est.value() - metrics[key]) <= 1e-6, (name, key)
