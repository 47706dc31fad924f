"""RVTBench / JiTBench protocol: each sample scored by the metric of its own task (`sample.task`).

References, per task (no official RVTBench evaluation script is public; the paper, arXiv:2505.11838,
names the metrics: J and F for segmentation, IoU for grounding, BLEU-4 / CIDEr and others for VQA
and summary):
- segmentation: J and F per frame as davis2017-evaluation `davis2017/metrics.py` (`db_eval_iou`,
  `f_measure`: metrics/masks.py), every frame scored, per-sample mean over frames; reported as the
  mean over samples of J, of F, and J&F = (J + F) / 2, in float64, no rounding.
- grounding: box IoU per frame in continuous xyxy pixels (metrics/boxes.py: union of a frame's
  boxes on each side). The headline is m_vIoU, with vIoU@0.3 / @0.5, the spatio-temporal
  grounding measures of HC-STVG / VidSTG (TubeDETR's evaluators): per sample the frame IoUs summed
  over frames where both sides have a box, divided by the frames where either has one. Why: the
  release names only "IoU", and the LISA-style alternative kept beside it (gIoU = mean over
  samples of the per-frame mean with 1.0 where neither side has a box, cIoU = sum I / sum U,
  Acc@0.5) credits silence: a model that never answers, on a 10-frame clip whose object shows in 2
  frames, gets gIoU 0.8; its m_vIoU is 0, the empty-prediction baseline printed beside it.
- vqa, summarization: pycocoevalcap corpus-level BLEU-1..4 and CIDEr-D (metrics/text.py; Java
  needed), per task over that task's samples; ``text_metrics`` may add METEOR and ROUGE-L.
- vqa, summarization with an LLM judge attached (`attach_judge`, conf/judge/): one verdict per
  sample (metrics/judge.py), "judge" = mean score over scored verdicts; an unscored verdict (failed
  request, unparsable reply) is NaN, excluded from the mean and counted ("judge_n_failed",
  "judge_failure_rate"). An empty answer (failed prediction, no text) is wrong: score 0.0 without a
  request. Without a judge the "judge" column reads metrics.judge.NOT_CONFIGURED, never a fallback
  to string matching.
Routing is by `sample.task` (the ground truth's task), never by dataset name. A prediction that
declares another task, or has no output of the needed kind, scores as empty (no mask, no box,
empty text), as a failed prediction does (docs/architecture.md "Failures").
Breakdowns: per task, by "level" and "category" (the samples' meta), each group scored as the
whole is (for text, corpus metrics recomputed over the group, so CIDEr's IDF is the group's).
aggregate() also gives "baseline_empty" (segmentation and grounding metrics of an empty prediction
on the same samples) and "warnings" (samples whose GT is empty in every frame, more than
base.EMPTY_GT_WARN of them, a headline equal to its baseline).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from core.types import TASKS, AdapterError, DatasetFormatError, Prediction, Sample
from metrics.boxes import aggregate_boxes, sample_box_scores
from metrics.masks import DAVIS_BOUND_TH, jf_counts
from metrics.protocols.base import (Protocol, baseline_warnings, decode_pair, empty_gt_warnings, group_by, predicted_masks,
                                    record_header)

log = logging.getLogger(__name__)

TEXT_TASKS = ("vqa", "summarization")
GROUP_KEYS = ("level", "category")


class RVTBenchProtocol(Protocol):
    """Scores by sample.task; metrics keyed "<task>/<metric>".

    headline: metric keys for the leaderboard, e.g. ["segmentation/J&F", "grounding/m_vIoU"].
    text_metrics: pycocoevalcap families for vqa / summarization (subset of metrics.text.METRICS).
    bound_th: F's boundary tolerance (davis2017's 0.008 of the frame diagonal).
    """

    name = "rvtbench"
    meta_keys = GROUP_KEYS

    def __init__(self, headline: Sequence[str] = ("segmentation/J&F", "grounding/m_vIoU", "vqa/BLEU-4", "summarization/BLEU-4"),
                 text_metrics: Sequence[str] = ("BLEU", "CIDEr"), bound_th: float = DAVIS_BOUND_TH) -> None:
        self.headline = list(headline)
        self.text_metrics = tuple(text_metrics)
        self.bound_th = float(bound_th)

    def score(self, sample: Sample, pred: Prediction) -> dict:
        """Record: header + per task
        segmentation: "J", "F", "J&F" (means over frames) and "frames": {"I", "U", "J", "F"};
        grounding: "giou_term", "I", "U", "frame_ious", "viou", "tube_frames" (metrics.boxes.sample_box_scores);
        both: "gt_empty" (no GT in any frame) and "baseline" (the same keys for an empty prediction);
        vqa / summarization: "question" (sample.query), "hypothesis" (pred.text, "" when absent) and
        "references"; `judge_records` later adds "judge" (a metrics.judge.Verdict as a dict, score
        None when unscored) when a judge is attached.
        Raises DatasetFormatError when the sample's task is unknown or its target lacks what the task
        needs; AdapterError when the prediction's frame count, mask size or a box is invalid.
        """
        if sample.task not in TASKS:
            raise DatasetFormatError(f"sample {sample.id!r}: task {sample.task!r} is not one of {TASKS}")
        record = record_header(sample, pred, self.meta_keys)
        if pred.task is not None and pred.task != sample.task:
            log.debug("sample %s: prediction declares task %r, the sample is %r", sample.id, pred.task, sample.task)
        if sample.task == "segmentation":
            record.update(self._segmentation(sample, pred))
        elif sample.task == "grounding":
            record.update(_grounding(sample, pred))
        else:
            if not sample.target.answers:
                raise DatasetFormatError(f"sample {sample.id!r}: task {sample.task!r} needs target.answers")
            # An answer declared for another task is scored as empty, as for masks and boxes.
            hypothesis = (pred.text or "") if pred.task in (None, sample.task) else ""
            record.update(question=sample.query, hypothesis=hypothesis, references=list(sample.target.answers))
        return record

    def judge_records(self, records: list[dict]) -> None:
        """Add "judge" (Verdict.to_dict()) to every vqa / summarization record, in place, when a judge
        is attached: one request per non-empty answer (concurrent, cached: metrics.judge.Judge), 0.0
        without a request for an empty one. No judge: records are left as they are."""
        if self.judge is None:
            return
        from metrics.judge import JudgeItem, Verdict

        text = [r for r in records if r["task"] in TEXT_TASKS]
        asked = [r for r in text if r["hypothesis"].strip()]
        verdicts = self.judge.score_many([JudgeItem(r["sample_id"], r.get("question", ""), r["references"], r["hypothesis"])
                                          for r in asked])
        for r, v in zip(asked, verdicts):
            r["judge"] = v.to_dict()
        for r in text:
            if not r["hypothesis"].strip():
                r["judge"] = Verdict(0.0, "empty answer (failed or no text): wrong, no judge request made",
                                     template=self.judge.template.tag, model=self.judge.model).to_dict()

    def _segmentation(self, sample: Sample, pred: Prediction) -> dict:
        gt_masks = sample.target.masks
        if gt_masks is None or len(gt_masks) != sample.num_frames:
            raise DatasetFormatError(f"sample {sample.id!r}: expected one GT mask entry per frame ({sample.num_frames}), "
                                     f"got {None if gt_masks is None else len(gt_masks)}")
        pred_masks = predicted_masks(sample, pred) if pred.task in (None, "segmentation") else [None] * sample.num_frames
        frames: dict[str, list] = {"I": [], "U": [], "J": [], "F": []}
        base_j, base_f = [], []
        for k, (gt_rle, pred_rle) in enumerate(zip(gt_masks, pred_masks)):
            if gt_rle is None and pred_rle is None:  # both empty: J = F = 1 in davis2017
                inter, union, f = 0, 0, 1.0
                base_j.append(1.0)
                base_f.append(1.0)
            else:
                gt, pr = decode_pair(sample, k, gt_rle, pred_rle)
                inter, union, f = jf_counts(gt, pr, self.bound_th)
                n_gt = int(np.count_nonzero(gt))
                base_j.append(1.0 if n_gt == 0 else 0.0)
                base_f.append(1.0 if n_gt in (0, gt.size) else 0.0)  # a full-frame GT has no boundary
            frames["I"].append(inter)
            frames["U"].append(union)
            frames["J"].append(1.0 if union == 0 else inter / union)
            frames["F"].append(f)
        j, f = _mean(frames["J"]), _mean(frames["F"])
        bj, bf = _mean(base_j), _mean(base_f)
        return {"J": j, "F": f, "J&F": (j + f) / 2, "frames": frames, "gt_empty": all(m is None for m in gt_masks),
                "baseline": {"J": bj, "F": bf, "J&F": (bj + bf) / 2}}

    def aggregate(self, records: list[dict]) -> dict:
        """metrics: "segmentation/J", "/F", "/J&F"; "grounding/m_vIoU", "/vIoU@0.3", "/vIoU@0.5",
        "/gIoU", "/cIoU", "/Acc@0.5";
        "vqa/BLEU-1".."/BLEU-4", "/CIDEr" (and any other text_metrics), "/judge" (float, or the string
        metrics.judge.NOT_CONFIGURED) with "/judge_n", "/judge_n_failed", "/judge_failure_rate" when
        judged; likewise "summarization/...";
        only for tasks with records. breakdown: "<task>/level" and "<task>/category" -> {value:
        {metric: float, "n": int}}. "n": all records; "baseline_empty", "warnings" (module
        docstring). Records are sorted by sample_id first.
        """
        records = sorted(records, key=lambda r: r["sample_id"])
        metrics: dict[str, float] = {}
        breakdown: dict[str, dict] = {}
        baseline: dict[str, float] = {}
        warnings: list[str] = []
        for task in ("segmentation", "grounding"):
            own = [r for r in records if r["task"] == task]
            if own and all("baseline" in r for r in own):
                base = self._task_metrics(task, [{**r, **r["baseline"]} for r in own])
                baseline.update({f"{task}/{k}": v for k, v in base.items() if k != "n"})
                warnings += empty_gt_warnings([r["sample_id"] for r in own if r.get("gt_empty")], len(own),
                                              f"{task} samples")
        for task in TASKS:
            own = [r for r in records if r["task"] == task]
            if not own:
                continue
            tokens = self._tokenize(own) if task in TEXT_TASKS else None
            metrics.update({f"{task}/{k}": v for k, v in self._task_metrics(task, own, tokens).items() if k != "n"})
            for key in GROUP_KEYS:
                groups = group_by(own, key)
                if groups:
                    breakdown[f"{task}/{key}"] = {value: self._task_metrics(task, g, tokens) for value, g in groups.items()}
        warnings += baseline_warnings(metrics, baseline, self.headline)
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        return {"metrics": metrics, "breakdown": breakdown, "n": len(records), "baseline_empty": baseline,
                "warnings": warnings}

    @staticmethod
    def _tokenize(records: list[dict]) -> tuple[dict, dict]:
        """One PTBTokenizer pass over a task's records; groups score slices of it."""
        from metrics.text import tokenize_captions  # pycocoevalcap and Java only when text is scored

        return tokenize_captions([(r["sample_id"], r["hypothesis"]) for r in records],
                                 {r["sample_id"]: r["references"] for r in records})

    def _task_metrics(self, task: str, group: list[dict], tokens: tuple[dict, dict] | None = None) -> dict:
        if task == "segmentation":
            j = float(np.mean(np.asarray([r["J"] for r in group], dtype=np.float64)))
            f = float(np.mean(np.asarray([r["F"] for r in group], dtype=np.float64)))
            return {"J&F": (j + f) / 2, "J": j, "F": f, "n": len(group)}
        if task == "grounding":
            return aggregate_boxes(group)
        from metrics.text import score_tokenized

        res, gts = tokens if tokens is not None else self._tokenize(group)
        ids = [r["sample_id"] for r in group]
        scores = score_tokenized({i: res[i] for i in ids}, {i: gts[i] for i in ids}, metrics=self.text_metrics)
        return {**scores["corpus"], **_judge_metrics(group), "n": len(group)}


def _judge_metrics(group: list[dict]) -> dict:
    """"judge" (mean of scored verdicts, NaN when none is scored), "judge_n", "judge_n_failed",
    "judge_failure_rate" over records with a verdict; {"judge": NOT_CONFIGURED} when none has one."""
    from metrics.judge import NOT_CONFIGURED

    verdicts = [r["judge"] for r in group if "judge" in r]
    if not verdicts:
        return {"judge": NOT_CONFIGURED}
    scores = [float(v["score"]) for v in verdicts if v.get("score") is not None]
    n_failed = len(verdicts) - len(scores)
    return {"judge": math.fsum(scores) / len(scores) if scores else math.nan, "judge_n": len(verdicts),
            "judge_n_failed": n_failed, "judge_failure_rate": n_failed / len(verdicts)}


def _grounding(sample: Sample, pred: Prediction) -> dict:
    gt_boxes = sample.target.boxes
    if gt_boxes is None or len(gt_boxes) != sample.num_frames:
        raise DatasetFormatError(f"sample {sample.id!r}: expected one GT box list per frame ({sample.num_frames}), "
                                 f"got {None if gt_boxes is None else len(gt_boxes)}")
    pred_boxes = pred.boxes if pred.task in (None, "grounding") else None
    if pred_boxes is not None and len(pred_boxes) != sample.num_frames:
        raise AdapterError(f"sample {sample.id!r}: prediction has {len(pred_boxes)} box lists, the sample has {sample.num_frames} frames")
    try:  # the GT first: a bad GT box is the dataset's fault, not the model's
        sample_box_scores(None, gt_boxes)
    except ValueError as exc:
        raise DatasetFormatError(f"sample {sample.id!r}: ground truth {exc}") from exc
    try:
        scores = sample_box_scores(pred_boxes, gt_boxes)
    except ValueError as exc:
        raise AdapterError(f"sample {sample.id!r}: {exc}") from exc
    empty = sample_box_scores(None, gt_boxes)
    return {**scores, "gt_empty": empty["U"] == 0 and all(len(b or []) == 0 for b in gt_boxes),
            "baseline": {k: empty[k] for k in ("giou_term", "I", "U", "viou")}}


def _mean(values: list[float]) -> float:
    return float(np.mean(np.asarray(values, dtype=np.float64)))
