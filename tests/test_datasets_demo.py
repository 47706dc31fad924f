"""DemoDataset's handling of bad data (the demo's content itself is tested in tests/test_demo.py):
the parts' per-sample errors are carried over with the demo's id prefixes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.core.types import DatasetFormatError

DEMO = Path(__file__).resolve().parents[1] / "demo"


@pytest.fixture
def demo_copy(tmp_path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    return root


def test_shipped_demo_has_no_errors():
    assert DemoDataset(DEMO).errors == []


def test_part_errors_are_prefixed_like_the_samples(demo_copy):
    (demo_copy / "reasonseg" / "val" / "astronaut_flag.jpg").write_text("not an image")
    lines = (demo_copy / "rvtbench" / "test.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    frames = demo_copy / "revos" / "JPEGImages"
    # the query's frames exist (RVTBench loads it) but its video is no ReVOS clip of the demo
    (frames / "no_such_clip").symlink_to(frames / first["video"])
    first["video"] = "no_such_clip"
    (demo_copy / "rvtbench" / "test.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    ds = DemoDataset(demo_copy)
    full = len(DemoDataset(DEMO))
    assert len(ds) == full - 2
    assert [(e["sample_id"], e["kind"]) for e in ds.errors] == [("image/astronaut_flag", "data"), (f"rvt/{first['id']}", "data")]
    assert "astronaut_flag.jpg" in ds.errors[0]["message"]
    assert "'no_such_clip' is not a clip of" in ds.errors[1]["message"]


def test_missing_part_is_still_a_dataset_error(demo_copy):
    shutil.rmtree(demo_copy / "revos")
    with pytest.raises(DatasetFormatError, match="revos"):
        DemoDataset(demo_copy)


def test_a_split_file_that_is_not_utf8_is_a_dataset_error(demo_copy):
    (demo_copy / "splits" / "quick.txt").write_bytes(b"image/\xff\xfe\x00")
    with pytest.raises(DatasetFormatError, match="quick.txt is not UTF-8 text"):  # was a UnicodeDecodeError
        DemoDataset(demo_copy, split="quick")


def test_a_listed_sample_its_data_renamed_says_why(demo_copy):
    meta_path = demo_copy / "revos" / "meta_expressions_valid_.json"
    meta = json.loads(meta_path.read_text())
    meta["videos"]["../launch_pad"] = meta["videos"].pop("launch_pad")
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DatasetFormatError) as info:
        DemoDataset(demo_copy, split="quick")
    message = str(info.value)
    assert "lists samples the demo does not have" in message and "(a '..' path); refused" in message
    assert "\n" not in message
