"""A baseline model for docs/adding-a-model.md: every object is the centre of the frame."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rvt_bench.adapters import measures
from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.core import masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample


class CentreBox(Adapter):
    """Segmentation and grounding: the centre `fraction` of each frame's width and height."""

    stages = (("answered", "task answered"),)

    def __init__(self, name: str = "centre_box", fraction: float = 0.5):
        self.name, self.fraction = name, float(fraction)

    def fingerprint(self) -> dict:
        return {"adapter": "centre_box", "fraction": self.fraction}

    def predict(self, sample: Sample) -> Prediction:
        if sample.task not in ("segmentation", "grounding"):
            raise AdapterError(f"sample {sample.id}: centre_box answers no {sample.task}")
        h, w = frame_size(sample.frames[0])
        x1, y1 = round(w * (1 - self.fraction) / 2), round(h * (1 - self.fraction) / 2)
        if sample.task == "grounding":
            return Prediction(sample.id, task=sample.task, boxes=[[[x1, y1, w - x1, h - y1]]] * sample.num_frames)
        mask = np.zeros((h, w), bool)
        mask[y1:h - y1, x1:w - x1] = True
        return Prediction(sample.id, task=sample.task, masks=[masks.encode(mask)] * sample.num_frames)

    def passed(self, item: ScoredSample) -> dict[str, bool]:
        return {"answered": item.prediction.error is None}

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        return measures.latency(scored, [measures.TOTAL])
