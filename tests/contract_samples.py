"""Synthetic samples for tests/test_protocol_contract.py: random GT in each of the formats the
protocols score (some frames null, some masks empty). A benchmark's own test module
(tests/test_datasets_<name>.py or tests/test_<name>.py) defines

    def contract_samples(rng: np.random.Generator, node: dict) -> list[Sample]

from these (node: its protocol config as a plain dict), with the meta keys its protocol reads, and
the contract test finds it by the benchmark's name: adding a benchmark adds no line to the contract
test."""
from __future__ import annotations

import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.types import Sample, Target

H, W = 12, 16


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
        out.append(video(f"vid{i:02d}", frames, "segmentation", Target(masks=gt, foreground=list(gt)),
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
