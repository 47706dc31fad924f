"""RVTBench loader: canonical records of the four tasks, box conventions, reference answers, twin
paths for perception=provided, and loading through `datasets.load_dataset` from a local path."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import masks
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders.config import from_yaml

REPO = Path(__file__).resolve().parent.parent


def RVTBenchDataset(root, split=None, **loader_args):
    """The loader conf/dataset/rvtbench.yaml builds (the benchmark has no module of its own)."""
    return from_yaml(str(REPO / "conf" / "dataset" / "rvtbench.yaml"), root=root, split=split, **loader_args)

H, W = 10, 20
FRAMES = ["00000.jpg", "00001.jpg"]


def write_frames(root: Path, video: str) -> None:
    d = root / "frames" / video
    d.mkdir(parents=True, exist_ok=True)
    for n in FRAMES:
        Image.fromarray(np.zeros((H, W, 3), dtype=np.uint8)).save(d / n)


def seg_mask() -> np.ndarray:
    m = np.zeros((H, W), dtype=bool)
    m[2:5, 3:9] = True
    return m


def records() -> list[dict]:
    return [
        {"id": "seg-1", "video": "bear", "frames": FRAMES, "query": "segment the bear that turns", "task": "segmentation",
         "category": "temporal", "level": 4, "masks": [masks.encode(seg_mask()), None], "twin": "twins/bear.json"},
        {"id": "gnd-1", "video": "bear", "frames": FRAMES, "query": "where is the left paw", "task": "grounding",
         "category": "spatial", "level": 2, "boxes": [[[1, 2, 5, 6]], []]},
        {"id": "vqa-1", "video": "sav_000123", "frames": FRAMES, "query": "how many birds land?", "task": "VQA",
         "category": "semantic", "level": 1, "answers": "three birds land"},
        {"id": "sum-1", "video": "sav_000123", "frames": FRAMES, "query": "summarise the scene", "task": "summary",
         "category": "temporal", "level": 3, "answers": ["birds land on a wire", "three birds settle on a wire"]},
    ]


@pytest.fixture
def root(tmp_path) -> Path:
    for video in ("bear", "sav_000123"):
        write_frames(tmp_path, video)
    (tmp_path / "twins").mkdir()
    (tmp_path / "twins" / "bear.json").write_text(json.dumps({"video": {"num_frames": 2}, "instances": []}))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))
    return tmp_path


def test_four_tasks_with_the_papers_task_names_mapped(root):
    ds = RVTBenchDataset(root)
    assert [(s.id, s.task) for s in ds] == [("seg-1", "segmentation"), ("gnd-1", "grounding"), ("vqa-1", "vqa"),
                                            ("sum-1", "summarization")]
    assert all(s.dataset == "rvtbench" and s.modality == "video" for s in ds)


def test_targets_per_task(root):
    seg, gnd, vqa, summ = RVTBenchDataset(root)
    np.testing.assert_array_equal(masks.decode(seg.target.masks[0]), seg_mask())
    assert seg.target.masks[1] is None
    assert gnd.target.boxes == [[[1.0, 2.0, 5.0, 6.0]], []] and gnd.target.masks is None
    assert vqa.target.answers == ["three birds land"]
    assert summ.target.answers == ["birds land on a wire", "three birds settle on a wire"]


def test_twin_path_is_carried_absolute_in_meta(root):
    seg, gnd, _, _ = RVTBenchDataset(root)
    assert seg.meta["twin_path"] == str(root / "twins" / "bear.json")
    assert "twin_path" not in gnd.meta
    assert seg.meta["level"] == 4 and seg.meta["category"] == "temporal"


def test_missing_twin_file_is_an_error(root):
    (root / "twins" / "bear.json").unlink()
    ds = RVTBenchDataset(root)
    assert len(ds) == 3 and [(e["sample_id"], e["kind"]) for e in ds.errors] == [("seg-1", "data")]
    assert re.search(r"id 'seg-1'.*twin file .*bear\.json does not exist", ds.errors[0]["message"])


def test_normalized_xywh_boxes_become_xyxy_pixels(root):
    rs = records()[1:2]
    rs[0]["boxes"] = [[[0.05, 0.2, 0.2, 0.4]], None]  # x, y, w, h as fractions of W = 20, H = 10
    (root / "test.jsonl").write_text(json.dumps(rs[0]) + "\n")
    s = RVTBenchDataset(root, box_format="xywh", box_units="normalized")[0]
    np.testing.assert_allclose(s.target.boxes[0], [[1.0, 2.0, 5.0, 6.0]])
    assert s.target.boxes[1] == []


@pytest.mark.parametrize("index, over, message", [
    (1, {"boxes": None}, "task 'grounding' needs 'boxes'"),
    (1, {"boxes": [[[5, 2, 1, 6]], []]}, "frame 0: invalid box"),
    (1, {"boxes": [[[1, 2, 5]], []]}, r"frame 0: boxes must be \[\[x1, y1, x2, y2\]"),
    (2, {"answers": []}, "answers must be a non-empty"),
    (2, {"answers": None}, "task 'vqa' needs 'answers'"),
    (0, {"level": 5}, r"level 5 not in \[1, 2, 3, 4\]"),
    (0, {"task": None}, "no 'task'.*default_task"),
])
def test_invalid_records_are_rejected_with_the_reason(root, index, over, message):
    rs = records()
    rs[index].update(over)
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    ds = RVTBenchDataset(root)
    assert [s.id for s in ds] == [r["id"] for k, r in enumerate(rs) if k != index]
    assert [e["sample_id"] for e in ds.errors] == [rs[index]["id"]]
    assert re.search(message, ds.errors[0]["message"])
    (root / "test.jsonl").write_text(json.dumps(rs[index]) + "\n")  # the bad record alone: nothing loads
    with pytest.raises(DatasetFormatError, match=message):
        RVTBenchDataset(root)


def test_config_task_aliases_extend_the_built_in_ones(root):
    rs = records()[2:3]
    rs[0]["task"] = "open_qa"
    (root / "test.jsonl").write_text(json.dumps(rs[0]) + "\n")
    with pytest.raises(DatasetFormatError, match="task_aliases"):
        RVTBenchDataset(root)
    assert RVTBenchDataset(root, task_aliases={"open_qa": "vqa"})[0].task == "vqa"


def test_datasets_load_dataset_from_a_local_path_gives_the_same_samples(root, tmp_path_factory):
    pytest.importorskip("datasets")
    hub_copy = tmp_path_factory.mktemp("hub_copy")
    # an Arrow table needs one type per column: the text tasks' rows, answers as lists
    rows = [r for r in records() if r["task"] in ("VQA", "summary")]
    rows[0]["answers"] = [rows[0]["answers"]]
    (hub_copy / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from_hub = RVTBenchDataset(root, hf_dataset=str(hub_copy), hf_cache_dir=str(tmp_path_factory.mktemp("hf_cache")))
    local = RVTBenchDataset(root)
    assert [(s.id, s.task, s.query, s.target.answers, s.meta, s.frames) for s in from_hub] == \
           [(s.id, s.task, s.query, s.target.answers, s.meta, s.frames) for s in local]


def test_unreachable_hub_dataset_is_a_dataset_error_naming_it(root, tmp_path):
    pytest.importorskip("datasets")
    with pytest.raises(DatasetFormatError, match="load_dataset.*no_such_dir"):
        RVTBenchDataset(root, hf_dataset=str(tmp_path / "no_such_dir"), hf_cache_dir=str(tmp_path / "cache"))
