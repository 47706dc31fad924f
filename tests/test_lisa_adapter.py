"""`+model=lisa` end to end on the tiny checkpoint (tests/lisa_tiny.py), and its one-line loading errors."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.adapters.lisa.adapter import LisaAdapter
from rvt_bench.loaders.reasonseg import ReasonSegDataset
from rvt_bench.core.types import AdapterError
from tests.lisa_tiny import REFERENCE_BOOSTS, build_checkpoint

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "data" / "lisa" / "reasonseg"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("tiny_lisa"), 0, **REFERENCE_BOOSTS)


@pytest.fixture
def copy_of(checkpoint, tmp_path):
    target = tmp_path / "ckpt"
    shutil.copytree(checkpoint, target)
    return target


def test_run_bench_reasonseg_end_to_end(checkpoint, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "+dataset=reasonseg", f"dataset.root={FIXTURE}", "+model=lisa",
         f"model.checkpoint={checkpoint}", f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 2 and metrics["failures"] in (0, [], {})
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert all(r["error"] is None and len(r["masks"]) == 1 for r in records)


def test_generate_mode_records_answer_and_seg_count(checkpoint):
    sample = ReasonSegDataset(FIXTURE, "val")[0]  # bench_by_the_door: the answer holds two [SEG]
    prediction = LisaAdapter(str(checkpoint), prompt_mode="generate", device="cpu").predict(sample)
    assert prediction.trace["frames"][0]["n_seg"] == 2 and prediction.text.count("[SEG]") == 2
    assert prediction.masks[0]["size"] == [48, 64]


def test_no_seg_gives_an_empty_mask(checkpoint):
    sample = ReasonSegDataset(FIXTURE, "val")[1]  # red_mug: the generated answer holds no [SEG]
    prediction = LisaAdapter(str(checkpoint), prompt_mode="generate", device="cpu").predict(sample)
    from rvt_bench.core import masks

    assert prediction.trace["frames"][0]["n_seg"] == 0 and not masks.decode(prediction.masks[0]).any()


def test_fingerprint_records_prompt_mode_and_generation_settings():
    eval_fp = LisaAdapter("x/y", prompt_mode="eval", device="cpu").fingerprint()
    gen_fp = LisaAdapter("x/y", prompt_mode="generate", max_new_tokens=64, device="cpu").fingerprint()
    assert eval_fp["prompt_mode"] == "eval" and "chat_template" not in eval_fp
    assert gen_fp["prompt_mode"] == "generate" and gen_fp["max_new_tokens"] == 64 and gen_fp["dtype"] == "float32"


def test_non_segmentation_task_is_refused(checkpoint):
    from dataclasses import replace

    sample = replace(ReasonSegDataset(FIXTURE, "val")[0], task="vqa")
    with pytest.raises(AdapterError, match="segmentation only"):
        LisaAdapter(str(checkpoint), device="cpu").predict(sample)


@pytest.mark.parametrize("remove, named", [
    ("pytorch_model-00002-of-00002.bin", "pytorch_model-00002-of-00002.bin"),
    ("tokenizer.model", "tokenizer.model"),
    ("clip", "CLIP vision tower"),
    ("config.json", "config.json"),
])
def test_missing_file_error_names_it(copy_of, remove, named):
    target = copy_of / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(AdapterError, match=named) as info:
        LisaAdapter(str(copy_of), device="cpu").preflight()
    assert "\n" not in str(info.value)


def test_checkpoint_missing_a_parameter_names_it(copy_of):
    import torch

    shard = copy_of / "pytorch_model-00001-of-00002.bin"
    tensors = torch.load(shard, weights_only=True)
    tensors.pop("lm_head.weight")
    torch.save(tensors, shard)
    with pytest.raises(AdapterError, match="llm.lm_head.weight"):
        LisaAdapter(str(copy_of), device="cpu").preflight()


def test_unknown_directory_is_not_sent_to_the_hub(tmp_path):
    with pytest.raises(AdapterError, match="not a directory"):
        LisaAdapter(str(tmp_path / "nowhere"), device="cpu").preflight()


def test_video_is_answered_frame_by_frame(checkpoint):
    from dataclasses import replace

    first, second = ReasonSegDataset(FIXTURE, "val")
    video = replace(first, modality="video", frames=first.frames + second.frames, frame_ids=["0", "1"])
    prediction = LisaAdapter(str(checkpoint), device="cpu").predict(video)
    assert [m["size"] for m in prediction.masks] == [[48, 64], [56, 40]]
    assert len(prediction.trace["frames"]) == 2


def test_half_precision_path_runs(checkpoint):
    # the GPU default (bfloat16) through the same code, on CPU
    sample = ReasonSegDataset(FIXTURE, "val")[0]
    adapter = LisaAdapter(str(checkpoint), device="cpu", dtype="bfloat16")
    prediction = adapter.predict(sample)
    assert adapter.fingerprint()["dtype"] == "bfloat16"
    assert prediction.masks[0]["size"] == [48, 64] and prediction.trace["frames"][0]["n_seg"] == 1
