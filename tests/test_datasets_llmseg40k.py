"""LLM-Seg40K loader: fixtures written in the released format (LLM-Seg utils/llm_seg_dataset.py reads
{<image file name>: {"from_dataset", "qa_pairs": [{"question", "answer", "rle_seg"}]}}), with the
authors' directory layout (lisa_dataset/{LLMSeg-40K, coco/train2017, ego_objects/images})."""
from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from PIL import Image
from pycocotools import mask as mask_utils

from rvt_bench.loaders.config import loader_kwargs
from rvt_bench.loaders.llmseg40k import LLMSeg40KDataset
from rvt_bench.core.masks import decode
from rvt_bench.core.types import DatasetFormatError

REPO = Path(__file__).resolve().parents[1]
COCO_IMAGE = "000000000139.jpg"
EGO_IMAGE = "0a1b2c3d_4e5f_frame_0042.jpg"


def coco_rle(mask: np.ndarray) -> dict:
    """RLE as the released JSON stores it: pycocotools' encoding with counts decoded to str."""
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("utf-8")}


def box_mask(h: int, w: int, y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
    m = np.zeros((h, w), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


MASKS = {
    (COCO_IMAGE, 0): box_mask(24, 32, 2, 10, 3, 9),
    (COCO_IMAGE, 1): box_mask(24, 32, 12, 24, 20, 32),
    (EGO_IMAGE, 0): box_mask(20, 16, 0, 5, 0, 16),
}


def write_llmseg40k(base: Path, *, variant: str = "rle") -> Path:
    """lisa_dataset-style tree with split/validation.json (and train.json); returns the LLM-Seg40K root."""
    root = base / "LLMSeg-40K"
    (root / "split").mkdir(parents=True)
    for directory, name, (h, w) in (("coco/train2017", COCO_IMAGE, (24, 32)), ("ego_objects/images", EGO_IMAGE, (20, 16))):
        (base / directory).mkdir(parents=True)
        Image.new("RGB", (w, h), (90, 120, 30)).save(base / directory / name)

    def qa(image: str, k: int, question: str, answer: str) -> dict:
        record = {"question": question, "answer": answer}
        if variant == "rle":
            record["rle_seg"] = coco_rle(MASKS[(image, k)])
        else:  # the PNG release: absolute paths on the authors' machine
            png = base / "masks" / f"{Path(image).stem}_{k}.png"
            png.parent.mkdir(exist_ok=True)
            cv2.imwrite(str(png), MASKS[(image, k)].astype(np.uint8) * 255)
            record["segmentation_path"] = f"/home/leikel/junchi/ReasonCOCO/masks/{png.name}"
        return record

    validation = {
        COCO_IMAGE: {
            "from_dataset": "coco",
            "qa_pairs": [
                qa(COCO_IMAGE, 0, "What could a guest sit on while watching TV?", "The chair near the television."),
                qa(COCO_IMAGE, 1, "Which object keeps flowers fresh?", "The vase on the table."),
            ],
        },
        EGO_IMAGE: {
            "from_dataset": "ego_objects",
            "qa_pairs": [qa(EGO_IMAGE, 0, "What would you use to open the door?", "The handle.")],
        },
    }
    (root / "split" / "validation.json").write_text(json.dumps(validation))
    (root / "train.json").write_text(json.dumps({COCO_IMAGE: validation[COCO_IMAGE]}))
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_llmseg40k(tmp_path)


def test_one_sample_per_qa_pair_in_file_order_with_image_stem_and_qa_index_ids(root):
    ds = LLMSeg40KDataset(root)
    assert [s.id for s in ds] == ["000000000139_0", "000000000139_1", "0a1b2c3d_4e5f_frame_0042_0"]
    assert [s.query for s in ds][1] == "Which object keeps flowers fresh?"
    assert all(s.modality == "image" and s.task == "segmentation" and s.split == "validation" for s in ds)


def test_from_dataset_selects_the_image_directory(root):
    coco, _, ego = LLMSeg40KDataset(root)
    assert coco.frames == [str(root.parent / "coco" / "train2017" / COCO_IMAGE)]
    assert ego.frames == [str(root.parent / "ego_objects" / "images" / EGO_IMAGE)]
    assert (coco.frame_ids, ego.frame_ids) == (["000000000139"], ["0a1b2c3d_4e5f_frame_0042"])


def test_meta_names_image_stem_qa_index_source_and_answer(root):
    sample = LLMSeg40KDataset(root)[1]
    assert sample.meta == {
        "image": "000000000139",
        "qa_index": 1,
        "from_dataset": "coco",
        "file_name": COCO_IMAGE,
        "answer": "The vase on the table.",
    }


def test_rle_targets_decode_to_the_annotated_pixels_with_no_ignore_region(root):
    for sample, key in zip(LLMSeg40KDataset(root), MASKS):
        assert isinstance(sample.target.masks[0]["counts"], str)
        np.testing.assert_array_equal(decode(sample.target.masks[0]), MASKS[key])
        assert sample.target.ignore == [None]


def test_png_variant_reads_masks_from_segmentation_root(tmp_path):
    root = write_llmseg40k(tmp_path, variant="png")
    ds = LLMSeg40KDataset(root, segmentation_root=tmp_path / "masks")
    for sample, key in zip(ds, MASKS):
        np.testing.assert_array_equal(decode(sample.target.masks[0]), MASKS[key])


def test_png_variant_without_segmentation_root_names_the_missing_png(tmp_path):
    root = write_llmseg40k(tmp_path, variant="png")
    with pytest.raises(DatasetFormatError, match=r"/home/leikel/junchi/ReasonCOCO/masks/000000000139_0\.png does not exist"):
        LLMSeg40KDataset(root)


def test_train_split_is_read_from_root_train_json(root):
    ds = LLMSeg40KDataset(root, split="train")
    assert [s.id for s in ds] == ["000000000139_0", "000000000139_1"]


def test_uncompressed_rle_counts_are_reencoded_as_ascii(root):
    path = root / "split" / "validation.json"
    data = json.loads(path.read_text())
    mask = MASKS[(COCO_IMAGE, 0)]
    # uncompressed COCO RLE: run lengths over the column-major (Fortran) pixel order, starting with 0s
    flat = mask.flatten(order="F").astype(np.int8)
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
    data[COCO_IMAGE]["qa_pairs"][0]["rle_seg"] = {"size": [24, 32], "counts": np.diff(np.concatenate([[0], changes])).tolist()}
    path.write_text(json.dumps(data))
    rle = LLMSeg40KDataset(root)[0].target.masks[0]
    assert isinstance(rle["counts"], str)
    np.testing.assert_array_equal(decode(rle), mask)


def test_missing_root_names_the_directory_layout_and_source(tmp_path):
    with pytest.raises(DatasetFormatError) as err:
        LLMSeg40KDataset(tmp_path / "nowhere")
    message = str(err.value)
    assert str(tmp_path / "nowhere") in message and "split/<split>.json" in message
    assert "github.com/wangjunchi/LLMSeg" in message


def test_missing_split_file_lists_both_places_looked(root):
    with pytest.raises(DatasetFormatError) as err:
        LLMSeg40KDataset(root, split="test")
    assert str(root / "split" / "test.json") in str(err.value) and str(root / "test.json") in str(err.value)
    assert "splits present: ['train', 'validation']" in str(err.value)


def test_missing_image_directory_names_its_config_key(root, tmp_path):
    with pytest.raises(DatasetFormatError, match="ego_objects_image_dir"):
        LLMSeg40KDataset(root, ego_objects_image_dir=tmp_path / "no_ego")


def test_mask_of_another_size_than_its_image_names_sample_and_both_sizes(root):
    path = root / "split" / "validation.json"
    data = json.loads(path.read_text())
    data[EGO_IMAGE]["qa_pairs"][0]["rle_seg"] = coco_rle(np.ones((16, 20), dtype=bool))
    path.write_text(json.dumps(data))
    ds = LLMSeg40KDataset(root)
    assert [s.id for s in ds] == ["000000000139_0", "000000000139_1"]
    assert [(e["sample_id"], e["kind"]) for e in ds.errors] == [("0a1b2c3d_4e5f_frame_0042_0", "data")]
    assert re.search(r"0a1b2c3d_4e5f_frame_0042_0.*\[16, 20\].*\[20, 16\]", ds.errors[0]["message"])


def test_unknown_from_dataset_is_a_format_error(root):
    path = root / "split" / "validation.json"
    data = json.loads(path.read_text())
    data[COCO_IMAGE]["from_dataset"] = "lvis"
    path.write_text(json.dumps(data))
    ds = LLMSeg40KDataset(root)
    assert [s.id for s in ds] == ["0a1b2c3d_4e5f_frame_0042_0"]
    assert [e["sample_id"] for e in ds.errors] == [COCO_IMAGE]
    assert "from_dataset must be one of ['coco', 'ego_objects'], got 'lvis'" in ds.errors[0]["message"]


def test_qa_pair_without_a_mask_names_file_and_sample(root):
    path = root / "split" / "validation.json"
    data = json.loads(path.read_text())
    del data[COCO_IMAGE]["qa_pairs"][1]["rle_seg"]
    path.write_text(json.dumps(data))
    ds = LLMSeg40KDataset(root)
    assert [s.id for s in ds] == ["000000000139_0", "0a1b2c3d_4e5f_frame_0042_0"]
    assert [e["sample_id"] for e in ds.errors] == ["000000000139_1"]
    assert re.search(r"validation\.json.*qa_pairs\[1\] \(sample 000000000139_1\).*rle_seg", ds.errors[0]["message"])


def test_unreadable_image_fails_each_of_its_qa_pairs_and_loading_goes_on(root, tmp_path):
    (tmp_path / "coco" / "train2017" / COCO_IMAGE).write_text("this is not a jpeg")
    ds = LLMSeg40KDataset(root)
    assert [s.id for s in ds] == ["0a1b2c3d_4e5f_frame_0042_0"]
    assert [e["sample_id"] for e in ds.errors] == ["000000000139_0", "000000000139_1"]
    assert all(COCO_IMAGE in e["message"] and "not a readable image" in e["message"] for e in ds.errors)


def test_every_sample_failing_is_a_dataset_error(root):
    path = root / "split" / "validation.json"
    data = json.loads(path.read_text())
    for record in data.values():
        record["from_dataset"] = "lvis"
    path.write_text(json.dumps(data))
    with pytest.raises(DatasetFormatError, match=r"every one of the 2 samples.*\n.*got 'lvis'"):
        LLMSeg40KDataset(root)


def test_hydra_config_instantiates_the_loader_as_the_runner_does(root):
    cfg = OmegaConf.load(REPO / "conf" / "dataset" / "llmseg40k.yaml")
    cfg.root = str(root)
    assert OmegaConf.select(cfg, "protocol._target_") == "rvt_bench.metrics.protocols.llmseg40k.LLMSegProtocol"
    ds = instantiate(loader_kwargs(cfg), _convert_="all")
    assert isinstance(ds, LLMSeg40KDataset) and len(ds) == 3 and ds.name == cfg.name


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from tests.contract_samples import image_samples

    return image_samples(rng, meta_key="from_dataset", values=("coco", "ego_objects"))
