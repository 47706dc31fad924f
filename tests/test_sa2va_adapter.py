"""`+model=sa2va` end to end on the tiny checkpoint (tests/sa2va_tiny.py), video samples through the
adapter, and its one-line loading errors."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter
from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError, Sample, Target
from tests.sa2va_tiny import REFERENCE_BOOSTS, build_checkpoint

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "data" / "lisa" / "reasonseg"
DATA = REPO / "tests" / "data" / "sa2va"
REFERENCE = json.loads((DATA / "sa2va_reference.json").read_text())


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("tiny_sa2va"), 0, **REFERENCE_BOOSTS)


@pytest.fixture
def copy_of(checkpoint, tmp_path):
    target = tmp_path / "ckpt"
    shutil.copytree(checkpoint, target)
    return target


def video_sample(n_frames: int, query: str, task: str = "segmentation") -> Sample:
    frames = [str(DATA / "video" / f"{i:05d}.png") for i in range(n_frames)]
    return Sample(id=f"video/{n_frames}", dataset="fixture", split="val", modality="video", frames=frames,
                  frame_ids=[f"{i:05d}" for i in range(n_frames)], query=query, task=task, target=Target())


def test_run_bench_reasonseg_end_to_end(checkpoint, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "+dataset=reasonseg", f"dataset.root={FIXTURE}", "+model=sa2va",
         f"model.checkpoint={checkpoint}", "model.max_new_tokens=32", f"run.root={tmp_path / 'runs'}",
         f"leaderboard.dir={tmp_path / 'boards'}"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "funnel: [SEG] emitted 2 > mask decoded" in proc.stdout
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 2 and metrics["failures"] in (0, [], {})
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert all(r["error"] is None and len(r["masks"]) == 1 and r["text"] == "[SEG]<|im_end|>" for r in records)


def test_image_mask_is_the_reference_mask(checkpoint):
    """The adapter's mask for a fixture image is Sa2VA's own (reference logits > 0)."""
    from rvt_bench.loaders.reasonseg import ReasonSegDataset

    case = REFERENCE["cases"][0]
    sample = next(s for s in ReasonSegDataset(FIXTURE, "val") if case["files"][0].startswith(s.id.split("/")[-1]))
    sample.query = case["query"]
    prediction = Sa2VAAdapter(str(checkpoint), device="cpu", max_new_tokens=32).predict(sample)
    assert prediction.trace["n_seg"] == 1
    assert np.array_equal(masks.decode(prediction.masks[0]), np.array(case["logits"][0][0]) > 0)


def test_video_masks_every_frame_from_the_first_seg(checkpoint):
    adapter = Sa2VAAdapter(str(checkpoint), device="cpu", max_new_tokens=32)
    case = next(c for c in REFERENCE["cases"] if c["kind"] == "video" and c["logits"])
    prediction = adapter.predict(video_sample(len(case["files"]), case["query"]))
    assert len(prediction.masks) == len(case["files"]) and prediction.trace["n_seg"] == 1
    for frame, rle in enumerate(prediction.masks):
        assert np.array_equal(masks.decode(rle), np.array(case["logits"][0][frame]) > 0)


def test_video_without_seg_gives_empty_masks_on_every_frame(checkpoint):
    adapter = Sa2VAAdapter(str(checkpoint), device="cpu", max_new_tokens=32)
    prediction = adapter.predict(video_sample(6, "the coin entering the frame"))
    assert prediction.trace["n_seg"] == 0 and prediction.text == "<|im_end|>"
    assert len(prediction.masks) == 6 and not any(masks.decode(m).any() for m in prediction.masks)


def test_other_tasks_are_refused(checkpoint):
    with pytest.raises(AdapterError, match="segmentation only"):
        Sa2VAAdapter(str(checkpoint), device="cpu").predict(video_sample(2, "q", task="vqa"))


def _edit_weights(directory, edit):
    """The checkpoint's model.safetensors rewritten after `edit(tensors)` changed its dict; the dict."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(directory / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(directory / "model.safetensors"))
    return tensors


def test_unknown_checkpoint_key_is_named(copy_of):
    _edit_weights(copy_of, lambda t: t.update({"language_model.model.extra.weight": t["mlp1.0.weight"].clone()}))
    with pytest.raises(AdapterError, match=r"key 'language_model\.model\.extra\.weight' is not a Sa2VA parameter"):
        Sa2VAAdapter(str(copy_of), device="cpu")._load()


def test_missing_parameter_is_named(copy_of):
    _edit_weights(copy_of, lambda t: t.pop("text_hidden_fcs.2.bias"))
    with pytest.raises(AdapterError, match=r"lacks 'text_hidden_fcs\.2\.bias' \(1 parameters missing\)"):
        Sa2VAAdapter(str(copy_of), device="cpu")._load()


def test_a_tied_checkpoint_without_lm_head_gets_the_input_embeddings(copy_of):
    tensors = _edit_weights(copy_of, lambda t: t.pop("language_model.lm_head.weight"))
    with pytest.raises(AdapterError, match=r"lacks 'language_model\.lm_head\.weight'"):
        Sa2VAAdapter(str(copy_of), device="cpu")._load()  # untied (the tiny config): the head is missing
    config = json.loads((copy_of / "config.json").read_text())
    config["llm_config"]["tie_word_embeddings"] = True
    (copy_of / "config.json").write_text(json.dumps(config))
    net = Sa2VAAdapter(str(copy_of), device="cpu")._load()[0]
    assert net.language_model.lm_head.weight.equal(tensors["language_model.model.embed_tokens.weight"])


def test_internlm2_checkpoints_are_refused_in_one_line(copy_of):
    config = json.loads((copy_of / "config.json").read_text())
    config["llm_config"]["architectures"] = ["InternLM2ForCausalLM"]
    (copy_of / "config.json").write_text(json.dumps(config))
    with pytest.raises(AdapterError, match="InternLM2ForCausalLM language model; this port runs Qwen2"):
        Sa2VAAdapter(str(copy_of), device="cpu")._load()


def test_half_precision_on_the_cpu_is_refused_in_one_line(checkpoint):
    with pytest.raises(AdapterError, match="dtype bfloat16 needs CUDA"):
        Sa2VAAdapter(str(checkpoint), device="cpu", dtype="bfloat16")._load()


def test_settings_are_checked_and_fingerprinted():
    with pytest.raises(AdapterError, match="image_prompt must contain"):
        Sa2VAAdapter("ByteDance/Sa2VA-4B", image_prompt="segment it")
    fp = Sa2VAAdapter("ByteDance/Sa2VA-4B", device="cpu").fingerprint()
    assert fp["checkpoint"] == "ByteDance/Sa2VA-4B" and fp["max_new_tokens"] == 2048 and fp["dtype"] == "float32"
    assert Sa2VAAdapter("ByteDance/Sa2VA-4B", device="cpu", max_new_tokens=32).fingerprint() != fp


def test_a_config_json_as_the_authors_save_it_reads_the_same():
    """tests/data/sa2va/tiny_config_saved_by_4.42.3.json: the tiny config.json passed through the authors'
    Sa2VAChatConfig(**raw).to_json_string() under transformers 4.42.3 (how the released files were
    written: every PretrainedConfig key in llm_config and vision_config, 72 in llm_config)."""
    from rvt_bench.adapters.sa2va.config import Sa2VAConfig
    from tests.sa2va_tiny import SPECIAL, sa2va_config

    saved = Sa2VAConfig.from_dict(json.loads((DATA / "tiny_config_saved_by_4.42.3.json").read_text()))
    ours = Sa2VAConfig.from_dict(sa2va_config(256 + len(SPECIAL)))
    assert saved.vision == ours.vision and (saved.template, saved.ps_version, saved.select_layer) == ("qwen_chat", "v2", -1)
    a, b = saved.qwen2_config(), ours.qwen2_config()
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "vocab_size", "rms_norm_eps", "rope_parameters", "tie_word_embeddings", "layer_types"):
        assert getattr(a, key) == getattr(b, key), key


def test_without_the_sam2_package_the_run_stops_with_the_extras_install_line(monkeypatch):
    """A newcomer on the README's install (no `.[sam2]` extra) got 'sa2va: the sam2 package is needed'
    and no install hint; the missing module now goes up as such and the stop names the extra."""
    import sys

    from rvt_bench.adapters.sa2va.sam import build_sam2
    from rvt_bench.harness.stops import stop_for

    monkeypatch.setitem(sys.modules, "sam2", None)  # `import sam2` raises ModuleNotFoundError
    with pytest.raises(ModuleNotFoundError) as missing:
        build_sam2({"embed_dim": 8})
    assert missing.value.name == "sam2"
    stop = stop_for(missing.value, None, "sa2va")
    assert stop.reason == "missing_package" and str(stop).endswith('pip install -e ".[sam2]"'), str(stop)


def test_question_prompt_must_be_a_known_rule():
    with pytest.raises(AdapterError, match="question_prompt must be one of refvos, template, got 'both'"):
        Sa2VAAdapter("unused", question_prompt="both")
    sample = video_sample(2, "which hand holds the coin?")
    assert Sa2VAAdapter("unused").prompt(sample) == "which hand holds the coin?"  # refVOS.py: the query alone
    assert Sa2VAAdapter("unused", question_prompt="template").prompt(sample) == "<image>\nPlease segment which hand holds the coin?."
    assert Sa2VAAdapter("unused").prompt(video_sample(2, "the coin")) == "<image>\nPlease segment the coin."
