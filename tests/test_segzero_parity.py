"""Seg-Zero's and VisionReasoner's reply parsing held to their authors' own functions (issue 42
item 1): every reply of tests/data/segzero/parsers.json (464 replies, hand-written edge cases and a
fuzzed set, each at two frame sizes) read by adapters/segzero/answers.py gives what the authors'
per-sample block gives: the same failure (their "Reasoning error", scored 0) or the same boxes,
points and thought. Written by tests/data/segzero/reference/run_segzero_parsers.py from
Seg-Zero @42a3345 (evaluation.py, evaluation_visionreasoner.py) and VisionReasoner @a455092
(vision_reasoner_model.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvt_bench.adapters.segzero import answers
from rvt_bench.adapters.vlm.reply import ReplyError

DATA = json.loads((Path(__file__).parent / "data" / "segzero" / "parsers.json").read_text())
CASES = DATA["cases"]


def ours(fmt: str, case: dict) -> dict:
    try:
        got = answers.parse(case["reply"], fmt, case["width"] / 840, case["height"] / 840)
    except ReplyError:
        return {"failed": True}
    if fmt == "seg_zero":  # their one object: a box and its two points
        assert len(got.boxes) == 1 and len(got.points) == 1
        return {"failed": False, "boxes": got.boxes[0], "points": got.points[0], "think": got.think}
    return {"failed": False, "boxes": got.boxes, "points": [p[0] for p in got.points], "think": got.think}


@pytest.mark.parametrize("fmt", answers.FORMATS)
def test_the_port_reads_every_reply_as_the_authors_function_does(fmt):
    differ = []
    for k, case in enumerate(CASES):
        theirs = {key: v for key, v in case[fmt].items() if key != "error"}
        mine = ours(fmt, case)
        if mine != theirs:
            differ.append((k, case["reply"][:120], theirs, mine))
    assert not differ, f"{len(differ)} of {len(CASES)} differ, first: {differ[:3]}"


def test_the_set_holds_200_replies_of_each_format_and_the_edge_cases_both_ways():
    replies = {c["reply"] for c in CASES}
    assert len(replies) >= 400
    read = {fmt: sum(not c[fmt]["failed"] for c in CASES) for fmt in answers.FORMATS}
    failed = {fmt: sum(c[fmt]["failed"] for c in CASES) for fmt in answers.FORMATS}
    assert read["seg_zero"] >= 50 and read["visionreasoner"] >= 100 and failed["seg_zero"] >= 100 and failed["visionreasoner"] >= 100
    assert failed["visionreasoner_model"] == 0  # the model file catches its own errors

    def case(text, fmt):
        return next(c[fmt] for c in CASES if c["reply"] == text and c["width"] == 640)

    # string numbers: Seg-Zero's int("10") reads them, VisionReasoner's "10" * factor raises
    strings = next(c["reply"] for c in CASES if '"bbox": ["10","100"' in c["reply"])
    assert case(strings, "seg_zero")["failed"] is False
    assert case(next(c["reply"] for c in CASES if '"bbox_2d": ["10",100' in c["reply"]), "visionreasoner")["failed"] is True
    five = next(c["reply"] for c in CASES if "210,0.95]" in c["reply"])  # a 5-value box and 3-value point are read
    assert case(five, "visionreasoner")["failed"] is False
    booleans = next(c["reply"] for c in CASES if '"bbox_2d": [true,false' in c["reply"])
    assert case(booleans, "visionreasoner")["boxes"] == [[1, 0, 152, 120]]


# --- the whole per-sample block: reply -> SAM2 (bf16 autocast) -> I, U -----------------------------

PIPELINE = json.loads((Path(__file__).parent / "data" / "segzero" / "pipeline.json").read_text())


@pytest.fixture(scope="module")
def tiny_sam2():
    from rvt_bench.adapters.twin.backends.sam2_pkg import Sam2PkgBackend

    return Sam2PkgBackend.tiny(seed=0, device="cpu")


def _run_port(name, tiny_sam2, tmp_path, autocast="bfloat16"):
    import cv2
    import numpy as np
    from omegaconf import OmegaConf

    from rvt_bench.adapters.segzero.adapter import SegZeroAdapter
    from rvt_bench.core import masks as mask_io
    from rvt_bench.core.types import AdapterError, Sample, Target
    from rvt_bench.harness.config import group_node
    from tests.data.segzero.reference.run_segzero_pipeline import frame_and_gt
    from tests.test_vlm_adapter import Canned

    frame, gt = frame_and_gt()
    path = tmp_path / "frame.png"
    cv2.imwrite(str(path), frame[:, :, ::-1])
    node = OmegaConf.to_container(group_node("model", name), resolve=True)
    keys = ("name", "model", "answer_format", "template", "example", "strip", "resize", "max_new_tokens")
    sample = Sample(id="s", dataset="reasonseg", split="val", modality="image", frames=[str(path)], frame_ids=["s"],
                    query="the block", task="segmentation", target=Target(masks=[mask_io.encode(gt)]))
    rows = []
    for reply in PIPELINE["replies"]:
        adapter = SegZeroAdapter(backend=Canned(reply), sam2=tiny_sam2, sam2_autocast=autocast, **{k: node[k] for k in keys})
        try:
            pred = adapter.predict(sample)
        except AdapterError:  # the harness scores a failure as an empty mask: their penalty
            rows.append({"outcome": "penalty", "intersection": 0, "union": int(gt.sum())})
            continue
        mask = mask_io.decode(pred.masks[0]) if pred.masks[0] is not None else np.zeros_like(gt)
        inter, union = int((mask & gt).sum()), int((mask | gt).sum())
        rows.append({"outcome": "written", "intersection": inter, "union": union} if union else {"outcome": "skipped"})
    return rows


@pytest.mark.parametrize("name", ["seg_zero", "visionreasoner"])
def test_the_port_gives_the_authors_intersection_and_union_for_every_reply_under_bf16_autocast(name, tiny_sam2, tmp_path):
    ours_rows = _run_port(name, tiny_sam2, tmp_path)
    theirs = PIPELINE[name]
    assert len(ours_rows) == len(theirs) >= 400
    differ = [(r, t, o) for r, t, o in zip(PIPELINE["replies"], theirs, ours_rows) if t != o]
    assert not differ, f"{len(differ)} of {len(theirs)} differ, first: {differ[:3]}"
    written = [t for t in theirs if t["outcome"] == "written"]
    assert len({(t["intersection"], t["union"]) for t in written}) >= 20  # masks that vary with the reply


def test_without_autocast_the_masks_differ_from_the_authors_bf16_ones(tiny_sam2, tmp_path):
    ours_rows = _run_port("visionreasoner", tiny_sam2, tmp_path, autocast=None)
    assert any(t != o for t, o in zip(PIPELINE["visionreasoner"], ours_rows))
