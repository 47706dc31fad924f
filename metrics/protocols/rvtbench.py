"""RVTBench / JiTBench scoring: each sample scored by the metric units of its own task
(`sample.task`), routed by CompositeProtocol. The references, the metrics per task and why
grounding's headline is m_vIoU: docs/benchmarks/rvtbench.md. conf/dataset/rvtbench.yaml composes
the same parts in YAML; `RVTBenchProtocol` builds them in code (tests, scripts)."""
from __future__ import annotations

from collections.abc import Sequence

from rvt_bench.metrics.masks import DAVIS_BOUND_TH
from rvt_bench.metrics.protocols.composite import CompositeProtocol
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.box_iou import BoxIoU
from rvt_bench.metrics.units.captions import Captions
from rvt_bench.metrics.units.judge import JudgeScore
from rvt_bench.metrics.units.video_jf import VideoJF

GROUP_KEYS = ("level", "category")
DEFAULT_HEADLINE = ("segmentation/J&F", "grounding/m_vIoU", "vqa/BLEU-4", "summarization/BLEU-4")


def task_parts(headline: Sequence[str] = DEFAULT_HEADLINE, text_metrics: Sequence[str] = ("BLEU", "CIDEr"),
               bound_th: float = DAVIS_BOUND_TH) -> dict[str, UnitProtocol]:
    """{task: UnitProtocol} for the four tasks: segmentation -> VideoJF, grounding -> BoxIoU,
    vqa / summarization -> Captions(text_metrics) + JudgeScore. Each part's headline is the keys of
    `headline` ("<task>/<key>") that name it."""
    units = {"segmentation": lambda: [VideoJF(bound_th)], "grounding": lambda: [BoxIoU()],
             "vqa": lambda: [Captions(text_metrics), JudgeScore()],
             "summarization": lambda: [Captions(text_metrics), JudgeScore()]}
    return {task: UnitProtocol(make(), name=task, headline=[h.split("/", 1)[1] for h in headline if h.startswith(task + "/")],
                               meta_keys=GROUP_KEYS)
            for task, make in units.items()}


class RVTBenchProtocol(CompositeProtocol):
    """CompositeProtocol over `task_parts`, routed by sample.task; metrics keyed "<task>/<metric>".

    headline: metric keys for the leaderboard, e.g. ["segmentation/J&F", "grounding/m_vIoU"].
    text_metrics: pycocoevalcap families for vqa / summarization (subset of rvt_bench.metrics.text.METRICS).
    bound_th: F's boundary tolerance (davis2017's 0.008 of the frame diagonal).
    A sample whose task has no part is a DatasetFormatError; a prediction that declares another
    task, or has no output of the needed kind, scores as empty (docs/architecture.md).
    """

    def __init__(self, headline: Sequence[str] = DEFAULT_HEADLINE, text_metrics: Sequence[str] = ("BLEU", "CIDEr"),
                 bound_th: float = DAVIS_BOUND_TH, name: str = "rvtbench") -> None:
        super().__init__(task_parts(headline, text_metrics, bound_th), headline=list(headline), route_by="task", name=name)
        self.text_metrics = tuple(text_metrics)
        self.bound_th = float(bound_th)
