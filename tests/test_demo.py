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

from bench import masks
from bench.datasets.demo import DemoDataset
from bench.frames import frame_size, read_frame
from bench.types import DatasetFormatError

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
            for p in sorted(root.rglob(pattern)) if p.is_file() and p.name != "README.md"}


def test_counts_and_unique_ids(demo):
    ids = [s.id for s in demo]
    assert len(ids) == 23 and len(set(ids)) == 23
    assert sum(s.modality == "image" for s in demo) == 11
    assert sum(s.modality == "video" for s in demo) == 12
    assert all(s.id.startswith(f"{s.modality}/") for s in demo)
    assert {s.dataset for s in demo} == {"demo"}


def test_every_frame_exists_and_targets_match_frame_sizes(demo):
    for s in demo:
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
    videos = [s for s in demo if s.modality == "video"]
    assert {s.meta["type_id"] for s in videos} == {0, 1, 2}
    assert {s.meta["level"] for s in demo} == {1, 2, 3}
    assert {s.meta["category"] for s in videos} == {"semantic", "spatial", "temporal"}
    images = [s for s in demo if s.modality == "image"]
    assert {s.meta["is_sentence"] for s in images} == {True, False}
    assert any(s.target.ignore[0] is not None for s in images)


def test_targets_are_non_empty_except_no_target_expressions(demo):
    for s in demo:
        area = sum(masks.area(m) for m in s.target.masks)
        if s.meta.get("type_id") == 2:
            assert area == 0, s.id
        else:
            assert area > 0, s.id


def test_video_targets_are_unions_of_their_annotations(demo):
    for s in (x for x in demo if x.modality == "video"):
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
    assert cfg.protocol._target_ == "metrics.protocols.composite.CompositeProtocol"
    assert set(cfg.protocol.parts) == {"image", "video"}
    kwargs = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in ("name", "protocol")}
    ds = instantiate(kwargs, _convert_="all")
    assert [s.id for s in ds] == [s.id for s in demo]


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
    assert _digests(tmp_path, "*.json") == _digests(DEMO, "*.json"), "demo/ is stale: run python scripts/build_demo.py"


def test_demo_stays_small():
    total = sum(p.stat().st_size for p in DEMO.rglob("*") if p.is_file())
    assert total < 10 * 1024 * 1024


def test_demo_protocol_scores_the_ground_truth_as_perfect(demo):
    from bench.types import Prediction

    OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)
    protocol = instantiate(OmegaConf.load(REPO / "conf" / "dataset" / "demo.yaml").protocol)
    records = [protocol.score(s, Prediction(sample_id=s.id, task="segmentation", masks=s.target.masks)) for s in demo]
    metrics = protocol.aggregate(records)["metrics"]
    for key in ("image/gIoU", "image/cIoU", "video/J&F", "video/referring/J&F", "video/reasoning/J&F"):
        assert metrics[key] == pytest.approx(1.0), key
