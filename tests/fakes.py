"""Small stand-ins for a dataset, a protocol and an adapter, used to test the runner's mechanics
(resume, failures, sharding, publishing) without models. Real datasets, protocols and adapters have
their own tests."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dataclasses import dataclass

import numpy as np

from rvt_bench.adapters.base import Adapter
from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.metrics.estimators import mean_of
from rvt_bench.core.types import AdapterError, ParseError, Prediction, Sample, Target
from rvt_bench.metrics.protocols.base import Protocol


class FakeDataset:
    """n one-frame 8x8 samples; sample k's target is a k-pixel-wide band."""

    name = "fake"

    def __init__(self, n: int = 6, split: str = "val", root: str = "here", errors: int = 0):
        if root == "missing":
            from rvt_bench.core.types import DatasetFormatError

            raise DatasetFormatError("fake: expected the dataset directory 'missing'")
        self.errors = [{"sample_id": f"bad{k}", "kind": "data", "message": "unreadable image"} for k in range(errors)]
        self.items = []
        for k in range(n):
            gt = np.zeros((8, 8), bool)
            gt[:, : k + 1] = True
            self.items.append(Sample(id=f"s{k:02d}", dataset="fake", split=split, modality="image",
                                     frames=[f"/nonexistent/{k}.jpg"], frame_ids=[str(k)], query=f"q{k}",
                                     task="segmentation", target=Target(masks=[masks.encode(gt)]),
                                     meta={"level": 1 + k % 2}))

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


@dataclass
class IoUValues(UnitValues):
    """The fake protocol's per-sample value: the IoU of the single frame."""

    kind = "fake_iou"
    IoU: float


class MeanIoUProtocol(Protocol):
    """Plain IoU of the single frame, averaged; enough to check the runner's plumbing."""

    name = "fake-iou"
    headline = ["IoU"]

    def score(self, sample, pred):
        gt = masks.decode(sample.target.masks[0])
        pm = masks.decode(pred.masks[0]) if pred.masks and pred.masks[0] else np.zeros_like(gt)
        if pm.shape != gt.shape:
            raise AdapterError(f"{sample.id}: prediction {pm.shape} vs frame {gt.shape}")
        union = (gt | pm).sum()
        return ScoreRecord(sample.id, failed=pred.error is not None,
                           values={IoUValues.kind: IoUValues(float((gt & pm).sum() / union) if union else 1.0)})

    def aggregate(self, records):
        return {"metrics": {"IoU": float(np.mean([r.of(IoUValues).IoU for r in records]))}, "n": len(records)}

    def estimator(self, key, records):
        return mean_of(key, records, lambda r: r.of(IoUValues).IoU) if key == "IoU" else super().estimator(key, records)


class FakeAdapter(Adapter):
    """Answers the GT for ids not listed; raises for `fail`, crashes for `crash`, emits a wrong-size
    mask for `bad_size`; raises AdapterError for `down` while the file `down_while` exists (a server
    that is down) and from preflight() when `preflight_error` is set. Appends every id it is asked
    about to `calls_file` (to count model work)."""

    def __init__(self, name="fake", calls_file=None, fail=(), crash=(), bad_size=(), sleep_s=0.0, dataset=None, api_key=None,
                 down=(), down_while=None, preflight_error=None):
        self.name, self.calls_file = name, calls_file
        self.fail, self.crash, self.bad_size, self.sleep_s = set(fail), set(crash), set(bad_size), sleep_s
        self.down, self.down_while, self.preflight_error = set(down), down_while, preflight_error

    def preflight(self):
        if self.preflight_error:
            raise AdapterError(self.preflight_error)

    def predict(self, sample: Sample) -> Prediction:
        if self.calls_file:
            with open(self.calls_file, "a") as fh:
                fh.write(sample.id + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        time.sleep(self.sleep_s)
        if sample.id in self.fail:
            raise ParseError(f"{sample.id}: no <answer> tag")
        if sample.id in self.crash:
            raise ZeroDivisionError("adapter bug")
        if sample.id in self.down and self.down_while and os.path.exists(self.down_while):
            raise AdapterError("server at http://127.0.0.1:9 cannot be reached")
        if sample.id in self.bad_size:
            return Prediction(sample.id, task="segmentation", masks=[masks.encode(np.ones((4, 4), bool))])
        return Prediction(sample.id, task="segmentation", masks=list(sample.target.masks))

    def fingerprint(self):
        return {"fake": True}


def make_cfg(tmp: Path, **model_kw):
    """A run config equal in shape to conf/config.yaml, with the fakes above."""
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "dataset": {"name": "fake", "_target_": "tests.fakes.FakeDataset", "n": 6, "split": "val",
                    "protocol": {"_target_": "tests.fakes.MeanIoUProtocol"}},
        "model": {"name": "fake", "_target_": "tests.fakes.FakeAdapter", "calls_file": str(tmp / "calls.txt"), **model_kw},
        "run": {"root": str(tmp / "runs"), "name": None, "shard": 0, "num_shards": 1, "merge": False,
                "limit": None, "fail_fast": False, "batch_size": 1, "verify_frames": False},
        "leaderboard": {"dir": str(tmp / "boards"), "publish": True},
    })


def calls(tmp: Path) -> list[str]:
    path = tmp / "calls.txt"
    return path.read_text().split() if path.exists() else []


def dump(obj) -> str:
    return json.dumps(obj, sort_keys=True)


class BoxSam2:
    """A stand-in SAM2 for adapters/segzero: records the prompts of segment_image_best; each
    object's mask is its box (int pixels)."""

    def __init__(self):
        self.calls = []

    def fingerprint(self):
        return {"backend": "box-sam2"}

    def segment_image_best(self, frame, boxes, points):
        self.calls.append((frame.shape, boxes, points))
        out = np.zeros((len(boxes), *frame.shape[:2]), bool)
        for i, (x1, y1, x2, y2) in enumerate(boxes):
            out[i, y1:y2, x1:x2] = True
        return out
