"""JiTBench = conf/dataset/jitbench.yaml alone: canonical per-query records (bench/loaders/canonical.py)
with JiTBench's defaults there (segmentation, levels 1-3, semantic/spatial/temporal), on fixtures
written in that format.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from PIL import Image

from rvt_bench.core import masks
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders.canonical import CanonicalDataset
from rvt_bench.loaders.config import from_yaml, loader_kwargs

REPO = Path(__file__).resolve().parent.parent


def JiTBenchDataset(root, split=None, **loader_args):
    """The loader conf/dataset/jitbench.yaml builds (the benchmark has no module of its own)."""
    return from_yaml(str(REPO / "conf" / "dataset" / "jitbench.yaml"), root=root, split=split, **loader_args)
H, W = 6, 8
FRAMES = ["00002.jpg", "00000.jpg", "00001.jpg"]  # the record's order is the temporal order


def box(y0, y1, x0, x1) -> np.ndarray:
    m = np.zeros((H, W), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def write_frames(root: Path, video: str, names=FRAMES, size=(H, W)) -> None:
    d = root / "frames" / video
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        Image.fromarray(np.zeros((*size, 3), dtype=np.uint8)).save(d / n)


def record(**over) -> dict:
    base = {"id": "q0", "video": "bear", "frames": FRAMES, "query": "the animal that will stand up",
            "category": "temporal", "level": 3,
            "masks": [masks.encode(box(0, 2, 0, 3)), None, masks.encode(box(1, 4, 2, 6))]}
    base.update(over)
    return base


def write_jsonl(root: Path, records: list[dict], split: str = "test") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def root(tmp_path) -> Path:
    write_frames(tmp_path, "bear")
    write_frames(tmp_path, "dogs/jump")  # nested video name
    write_jsonl(tmp_path, [record(), record(id="q1", video="dogs/jump", category="spatial", level=1,
                                            masks=[None, None, masks.encode(box(5, 6, 7, 8))])])
    return tmp_path


def test_records_become_segmentation_samples_in_file_order(root):
    ds = JiTBenchDataset(root)
    assert [s.id for s in ds] == ["q0", "q1"]
    s = ds[0]
    assert (s.dataset, s.split, s.modality, s.task, s.query) == ("jitbench", "test", "video", "segmentation",
                                                                 "the animal that will stand up")
    assert s.frames == [str(root / "frames" / "bear" / n) for n in FRAMES]
    assert s.frame_ids == ["00002", "00000", "00001"]
    assert s.meta == {"video": "bear", "level": 3, "category": "temporal"}
    assert ds[1].frames[0] == str(root / "frames" / "dogs" / "jump" / "00002.jpg")


def test_rle_masks_decode_to_the_written_masks_and_null_is_no_target(root):
    got = JiTBenchDataset(root)[0].target.masks
    np.testing.assert_array_equal(masks.decode(got[0]), box(0, 2, 0, 3))
    assert got[1] is None
    np.testing.assert_array_equal(masks.decode(got[2]), box(1, 4, 2, 6))


def test_png_mask_paths_give_the_same_target_as_rles(root):
    for k, m in enumerate([box(0, 2, 0, 3), np.zeros((H, W), bool), box(1, 4, 2, 6)]):
        masks.write_png_mask(root / "masks" / "q0" / f"{k}.png", m)
    write_jsonl(root, [record(masks=[f"masks/q0/{k}.png" for k in range(3)])])
    png = JiTBenchDataset(root)[0].target.masks
    assert png[1] is None  # an all-zero PNG is "no target in this frame"
    np.testing.assert_array_equal(masks.decode(png[2]), box(1, 4, 2, 6))


def test_uncompressed_rle_counts_are_accepted(root):
    m = box(0, 2, 0, 3)  # column-major: columns 0-2 hold 2 ones then 4 zeros, columns 3-7 are zeros
    counts = [0, 2, 4, 2, 4, 2, 4 + 5 * H]  # COCO uncompressed RLE: alternating runs, zeros first
    write_jsonl(root, [record(masks=[{"size": [H, W], "counts": counts}, None, None])])
    np.testing.assert_array_equal(masks.decode(JiTBenchDataset(root)[0].target.masks[0]), m)


def test_frames_null_lists_the_video_directory_sorted(root):
    write_jsonl(root, [record(frames=None)])
    s = JiTBenchDataset(root)[0]
    assert s.frame_ids == ["00000", "00001", "00002"]


def test_field_mapping_reads_a_release_with_other_names(root):
    release = {"qid": "r7", "video_name": "bear", "question": "which one sleeps", "type": "semantic",
               "difficulty": 2, "target": {"masks": [None, None, masks.encode(box(0, 1, 0, 1))]},
               "frames": FRAMES, "annotator": "A12"}
    write_jsonl(root, [release])
    fields = {"id": "qid", "video": "video_name", "query": "question", "category": "type", "level": "difficulty",
              "masks": "target.masks"}
    s = JiTBenchDataset(root, fields=fields, extra_fields=["annotator"])[0]
    assert (s.id, s.query, s.meta) == ("r7", "which one sleeps",
                                       {"video": "bear", "level": 2, "category": "semantic", "annotator": "A12"})
    assert masks.area(s.target.masks[2]) == 1


def test_unknown_key_is_an_error_unless_not_strict(root):
    write_jsonl(root, [record(annotator="A12")])
    with pytest.raises(DatasetFormatError, match=r"test\.jsonl record 0.*unknown keys \['annotator'\].*dataset\.loader\.fields"):
        JiTBenchDataset(root)
    assert "annotator" not in JiTBenchDataset(root, strict=False)[0].meta


@pytest.mark.parametrize("over, message", [
    ({"level": 4}, r"level 4 not in \[1, 2, 3\]"),
    ({"level": "hard"}, "level must be an integer"),
    ({"category": "causal"}, "category must be one of"),
    ({"query": ""}, "'query'.*non-empty"),
    ({"masks": [None, None]}, "masks must be a list of 3"),
    ({"masks": None}, "task 'segmentation' needs 'masks'"),
    ({"masks": [masks.encode(np.zeros((H + 1, W), bool)), None, None]}, r"'masks' frame 0: 'size' \[7, 8\] differs.*\[6, 8\]"),
    ({"masks": [{"size": [H, W]}, None, None]}, "frame 0: a mask must be"),
    ({"frames": ["00000.jpg", "missing.jpg"]}, "frame file.*missing.jpg"),
    ({"task": "tracking"}, "task 'tracking' is not one of"),
])
def test_invalid_record_names_the_file_record_and_expectation(root, over, message):
    write_jsonl(root, [record(**over)])
    with pytest.raises(DatasetFormatError, match=message) as err:
        JiTBenchDataset(root)
    assert "test.jsonl record 0 (id 'q0')" in str(err.value) or "test.jsonl record 0" in str(err.value)


def test_duplicate_ids_are_an_error(root):
    write_jsonl(root, [record(), record()])
    ds = JiTBenchDataset(root)
    assert [s.id for s in ds] == ["q0"]
    assert [e["sample_id"] for e in ds.errors] == ["q0"] and "record 1: duplicate id 'q0'" in ds.errors[0]["message"]


def test_bad_records_are_data_errors_and_the_good_ones_load(root):
    nameless = record(id="q2")
    del nameless["id"]
    write_jsonl(root, [record(id="q0", level=9), record(id="q1"), nameless])
    ds = JiTBenchDataset(root)
    assert [s.id for s in ds] == ["q1"]
    assert [(e["sample_id"], e["kind"]) for e in ds.errors] == [("q0", "data"), (f"{root / 'test.jsonl'} record 2", "data")]
    assert "level 9 not in [1, 2, 3]" in ds.errors[0]["message"] and "'id'" in ds.errors[1]["message"]


def test_every_record_failing_quotes_the_first_reasons(root):
    write_jsonl(root, [record(id=f"q{k}", level=9) for k in range(7)])
    with pytest.raises(DatasetFormatError) as err:
        JiTBenchDataset(root)
    message = str(err.value)
    assert "every one of the 7 samples" in message and message.count("level 9 not in") == 5
    assert message.endswith("... and 2 more")


def test_json_list_file_and_explicit_annotation_path(root):
    (root / "test.jsonl").unlink()
    (root / "annotations").mkdir()
    (root / "annotations" / "jit_queries.json").write_text(json.dumps({"queries": [record()]}))
    assert [s.id for s in JiTBenchDataset(root, annotation="annotations/jit_queries.json")] == ["q0"]


def test_missing_root_says_directory_layout_and_where_published(tmp_path):
    with pytest.raises(DatasetFormatError) as err:
        JiTBenchDataset(tmp_path / "JiTBench")
    message = str(err.value)
    assert str(tmp_path / "JiTBench") in message and "<split>.jsonl" in message and "published" in message


def test_missing_split_file_names_the_files_looked_for_and_the_mapping_knobs(root):
    with pytest.raises(DatasetFormatError) as err:
        JiTBenchDataset(root, split="val")
    message = str(err.value)
    assert str(root / "val.jsonl") in message and str(root / "val.json") in message
    assert "dataset.loader.annotation" in message and "dataset.loader.fields" in message
    assert "splits present: ['test']" in message


def test_hydra_config_builds_the_dataset_and_its_protocol(root):
    import run_bench  # noqa: F401  (registers the ${repo:} resolver)

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=jitbench", "+model=precomputed", f"dataset.root={root}", "model.root=x"])
    ds = instantiate(loader_kwargs(cfg.dataset), _convert_="all")
    assert isinstance(ds, CanonicalDataset) and ds.name == "jitbench" and len(ds) == 2
    assert all(s.dataset == "jitbench" for s in ds)
    protocol = instantiate(cfg.dataset.protocol)
    assert protocol.headline == ["segmentation/J&F", "segmentation/J", "segmentation/F"]


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from tests.contract_samples import task_samples

    headline = node.get("headline") or ["segmentation/J&F", "grounding/m_vIoU", "vqa/BLEU-4", "summarization/BLEU-4"]
    return task_samples(rng, tasks=tuple(dict.fromkeys(h.split("/", 1)[0] for h in headline)))
