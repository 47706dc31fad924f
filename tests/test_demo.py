"""The bundled demo (demo/, built by scripts/build_demo.py) loads through the real-format loaders,
is self-consistent, and is rebuilt byte-for-byte by the build script."""
from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from rvt_bench.core import masks
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.core.frames import frame_size, read_frame
from rvt_bench.core.types import DatasetFormatError

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "demo"


@pytest.fixture(scope="module")
def demo() -> DemoDataset:
    return DemoDataset(DEMO)


def _build_module():
    spec = importlib.util.spec_from_file_location("build_demo", REPO / "scripts" / "build_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digests(root: Path, pattern: str = "*") -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob(pattern))
            if p.is_file() and p.name not in ("README.md", "__init__.py") and "__pycache__" not in p.parts}


def test_counts_and_unique_ids(demo):
    ids = [s.id for s in demo]
    assert len(ids) == 31 and len(set(ids)) == 31
    assert sum(s.meta["source"] == "reasonseg" for s in demo) == 11
    assert sum(s.meta["source"] == "revos" for s in demo) == 12
    assert sum(s.meta["source"] == "rvtbench" for s in demo) == 8
    prefix = {"reasonseg": "image/", "revos": "video/", "rvtbench": "rvt/"}
    assert all(s.id.startswith(prefix[s.meta["source"]]) for s in demo)
    assert {s.dataset for s in demo} == {"demo"}


def test_all_four_task_types(demo):
    tasks = {}
    for s in demo:
        tasks[s.task] = tasks.get(s.task, 0) + 1
    assert tasks == {"segmentation": 23, "grounding": 3, "vqa": 3, "summarization": 2}
    rvt = [s for s in demo if s.meta["source"] == "rvtbench"]
    assert {s.meta["level"] for s in rvt} == {1, 2, 3, 4}
    assert {s.meta["category"] for s in rvt} == {"semantic", "spatial", "temporal"}
    for s in rvt:
        if s.task in ("vqa", "summarization"):
            assert 1 <= len(s.target.answers) <= 3 and s.target.masks is None, s.id


def test_grounding_boxes_are_the_tight_boxes_of_the_visible_masks(demo):
    # the build derives them from the composited masks; recompute from the ReVOS annotations
    targets = {"rvt/grounding/kitchen_table": "cup", "rvt/grounding/launch_pad": "rocket",
               "rvt/grounding/lawn_depth": "helmet"}
    for sid, label in targets.items():
        s = next(x for x in demo if x.id == sid)
        ann = next(a for a in s.annotations if a.label == label)
        assert len(s.target.boxes) == s.num_frames == len(ann.masks)
        for t, (boxes, rle) in enumerate(zip(s.target.boxes, ann.masks)):
            if rle is None:
                assert boxes == [], (sid, t)
                continue
            mask = masks.decode(rle)
            ys, xs = np.nonzero(mask)
            assert boxes == [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], (sid, t)
    rocket = next(x for x in demo if x.id == "rvt/grounding/launch_pad")
    assert rocket.target.boxes[-1] == []  # the rocket has left: a frame without a GT box


def test_every_frame_exists_and_targets_match_frame_sizes(demo):
    for s in (x for x in demo if x.task == "segmentation"):
        assert len(s.frames) == len(s.frame_ids) == len(s.target.masks), s.id
        sizes = [frame_size(f) for f in s.frames]  # raises DatasetFormatError for a missing frame
        for size, rle in zip(sizes, s.target.masks):
            if rle is not None:
                assert tuple(rle["size"]) == size, s.id
        for a in s.annotations:
            assert len(a.masks) == len(s.frames), (s.id, a.id)
            assert all(m is None or tuple(m["size"]) == size for m, size in zip(a.masks, sizes)), (s.id, a.id)


def test_frames_decode_as_rgb(demo):
    for s in (demo[0], demo[len(demo) - 1]):
        frame = read_frame(s.frames[0])
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3


def test_covers_the_reasoning_spectrum(demo):
    videos = [s for s in demo if s.meta["source"] == "revos"]
    assert {s.meta["type_id"] for s in videos} == {0, 1, 2}
    assert {s.meta["level"] for s in demo if s.task == "segmentation"} == {1, 2, 3}
    assert {s.meta["category"] for s in videos} == {"semantic", "spatial", "temporal"}
    images = [s for s in demo if s.modality == "image"]
    assert {s.meta["is_sentence"] for s in images} == {True, False}
    assert any(s.target.ignore[0] is not None for s in images)


def test_targets_are_non_empty_except_no_target_expressions(demo):
    for s in (x for x in demo if x.task == "segmentation"):
        area = sum(masks.area(m) for m in s.target.masks)
        if s.meta.get("type_id") == 2:
            assert area == 0, s.id
        else:
            assert area > 0, s.id


def test_video_targets_are_unions_of_their_annotations(demo):
    for s in (x for x in demo if x.meta["source"] == "revos"):
        by_id = {a.id: a for a in s.annotations}
        for i, rle in enumerate(s.target.masks):
            parts = [by_id[str(a)].masks[i] for a in s.meta["anno_id"] if by_id[str(a)].masks[i] is not None]
            if not parts:
                assert rle is None, (s.id, i)
                continue
            expected = np.logical_or.reduce([masks.decode(p) for p in parts])
            np.testing.assert_array_equal(masks.decode(rle), expected)


def test_video_instances_do_not_overlap_and_have_depth(demo):
    seen = set()
    for s in (x for x in demo if x.modality == "video"):
        if s.meta["video"] in seen:
            continue
        seen.add(s.meta["video"])
        assert all(a.label and a.depth is not None for a in s.annotations), s.meta["video"]
        for i in range(s.num_frames):
            present = [masks.decode(a.masks[i]) for a in s.annotations if a.masks[i] is not None]
            if present:
                assert np.sum(present, axis=0).max() <= 1, (s.meta["video"], i)  # visible masks are exclusive
    assert len(seen) == 4


def test_image_targets_are_among_the_sidecar_instances(demo):
    for s in (x for x in demo if x.modality == "image"):
        target = masks.decode(s.target.masks[0])
        covered = np.logical_or.reduce([masks.decode(a.masks[0]) for a in s.annotations])
        assert (target & ~covered).sum() == 0, s.id


def test_hydra_config_instantiates_the_demo(demo):
    OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)
    cfg = OmegaConf.load(REPO / "conf" / "dataset" / "demo.yaml")
    assert cfg.name == "demo"
    assert cfg.protocol._target_ == "rvt_bench.metrics.protocols.composite.CompositeProtocol"
    assert set(cfg.protocol.parts) == {"image", "video", "rvt"}
    from rvt_bench.loaders.config import loader_kwargs

    ds = instantiate(loader_kwargs(cfg), _convert_="all")
    # the main job's default is the quick split: the listed ids, in the demo's order, every task
    listed = [line for line in (REPO / "demo" / "splits" / "quick.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    assert cfg.split == "quick" and [s.id for s in ds] == [s.id for s in demo if s.id in set(listed)]
    assert len(ds) == len(listed) < len(demo)
    assert {s.task for s in ds} == {s.task for s in demo} and {s.meta["source"] for s in ds} == {"reasonseg", "revos", "rvtbench"}
    full = instantiate(loader_kwargs(OmegaConf.merge(cfg, {"split": "demo"})), _convert_="all")
    assert [s.id for s in full] == [s.id for s in demo]


def test_a_demo_split_file_naming_a_missing_sample_or_a_missing_split_is_refused(tmp_path):
    import shutil

    from rvt_bench.core.types import DatasetFormatError
    from rvt_bench.loaders.demo import DemoDataset

    root = tmp_path / "demo"
    shutil.copytree(REPO / "demo", root)
    (root / "splits" / "bad.txt").write_text("# comment\nimage/astronaut_flag\nimage/no_such_sample\n")
    with pytest.raises(DatasetFormatError, match="no_such_sample"):
        DemoDataset(root, split="bad")
    with pytest.raises(DatasetFormatError, match="splits: \\['demo', 'bad', 'quick'\\]"):
        DemoDataset(root, split="nope")
    (root / "splits" / "twice.txt").write_text("image/astronaut_flag\nimage/astronaut_flag\n")
    with pytest.raises(DatasetFormatError, match="more than once"):
        DemoDataset(root, split="twice")
    (root / "splits" / "bom.txt").write_bytes("\ufeffimage/astronaut_flag\r\nimage/chelsea_eyes\r\n".encode("utf-8"))
    assert [s.id for s in DemoDataset(root, split="bom")] == ["image/astronaut_flag", "image/chelsea_eyes"]


@pytest.mark.parametrize("name", ["reasonseg", "revos"])
def test_real_dataset_configs_require_root(name):
    cfg = OmegaConf.load(REPO / "conf" / "dataset" / f"{name}.yaml")
    assert cfg.name == name and OmegaConf.is_missing(cfg, "root")
    with pytest.raises(MissingMandatoryValue, match="root"):
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)


def test_missing_demo_root_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetFormatError, match="build_demo.py"):
        DemoDataset(tmp_path / "missing")


def test_build_is_deterministic(tmp_path):
    build = _build_module()
    build.build(tmp_path / "a")
    build.build(tmp_path / "b")
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")
    assert len(_digests(tmp_path / "a", "*.jpg")) == 11 + 16 + 16 + 20 + 12


def test_committed_annotations_match_the_build_script(tmp_path):
    # JSON only: annotations are pure NumPy/pycocotools; JPEG bytes may differ with another libjpeg
    _build_module().build(tmp_path)
    for pattern in ("*.json", "*.jsonl", "*.txt"):
        assert _digests(tmp_path, pattern) == _digests(DEMO, pattern), "demo/ is stale: run python scripts/build_demo.py"


def test_demo_stays_small():
    total = sum(p.stat().st_size for p in DEMO.rglob("*") if p.is_file())
    assert total < 10 * 1024 * 1024


def test_demo_protocol_scores_the_ground_truth_as_perfect(demo):
    from rvt_bench.core.types import Prediction

    OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)
    protocol = instantiate(OmegaConf.load(REPO / "conf" / "dataset" / "demo.yaml").protocol)
    gt = {"segmentation": lambda s: dict(masks=s.target.masks), "grounding": lambda s: dict(boxes=s.target.boxes),
          "vqa": lambda s: dict(text=s.target.answers[0]), "summarization": lambda s: dict(text=s.target.answers[0])}
    records = [protocol.score(s, Prediction(sample_id=s.id, task=s.task, **gt[s.task](s))) for s in demo]
    assert {r.parts["part"] for r in records} == {"image", "video", "rvt"}
    metrics = protocol.aggregate(records)["metrics"]
    for key in ("image/gIoU", "image/cIoU", "video/J&F", "video/referring/J&F", "video/reasoning/J&F",
                "rvt/grounding/gIoU", "rvt/grounding/cIoU", "rvt/grounding/Acc@0.5", "rvt/summarization/BLEU-1"):
        assert metrics[key] == pytest.approx(1.0), key
    assert metrics["rvt/vqa/judge"] == metrics["rvt/summarization/judge"] == "judge: not configured"


def test_demo_protocol_keeps_the_segmentation_parts_numbers(demo):
    # routing by meta["source"] scores images and videos exactly as routing by modality did
    from rvt_bench.core.types import Prediction
    from rvt_bench.metrics.protocols import CompositeProtocol, ReasonSegProtocol, ReVOSProtocol

    OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)
    routed = instantiate(OmegaConf.load(REPO / "conf" / "dataset" / "demo.yaml").protocol)
    by_modality = CompositeProtocol({"image": ReasonSegProtocol(), "video": ReVOSProtocol()})
    seg = [s for s in demo if s.task == "segmentation"]
    # a shifted prediction (the next sample's target where sizes match) so the numbers are not all 1
    preds = [Prediction(sample_id=s.id, task="segmentation", masks=(seg[k - 1].target.masks
             if seg[k - 1].num_frames == s.num_frames and seg[k - 1].target.masks[0] is not None
             and s.target.masks[0] is not None and seg[k - 1].target.masks[0]["size"] == s.target.masks[0]["size"]
             else None)) for k, s in enumerate(seg)]
    new = routed.aggregate([routed.score(s, p) for s, p in zip(seg, preds)])
    old = by_modality.aggregate([by_modality.score(s, p) for s, p in zip(seg, preds)])
    assert new["metrics"] == old["metrics"] and new["breakdown"] == old["breakdown"]
    assert 0.0 < new["metrics"]["video/J&F"] < 1.0


def test_composite_routing_errors_name_the_sample(demo):
    from dataclasses import replace

    from rvt_bench.core.types import Prediction
    from rvt_bench.metrics.protocols import CompositeProtocol, ReasonSegProtocol

    protocol = CompositeProtocol({"image": ReasonSegProtocol()}, route_by="meta.source", routes={"reasonseg": "image"})
    stray = replace(demo[0], meta={**demo[0].meta, "source": "elsewhere"})
    with pytest.raises(DatasetFormatError, match=r"image/.*'elsewhere' has no protocol part"):
        protocol.score(stray, Prediction(stray.id))
    unrouted = replace(demo[0], meta={k: v for k, v in demo[0].meta.items() if k != "source"})
    with pytest.raises(DatasetFormatError, match="meta has no 'source'"):
        protocol.score(unrouted, Prediction(unrouted.id))
    with pytest.raises(ValueError, match="do not exist"):
        CompositeProtocol({"image": ReasonSegProtocol()}, route_by="meta.source", routes={"revos": "video"})
    with pytest.raises(ValueError, match="route_by"):
        CompositeProtocol({"image": ReasonSegProtocol()}, route_by="dataset")
