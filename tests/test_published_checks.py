"""perf/published_checks.py: every command that should reproduce a published number composes with
today's configs (a renamed setting or model fails here, not on a GPU node), and
`perf/gpu_real_models.py --published --dry-run` prints them as a user would run them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.precomputed_runs import REPO, load_script

checks = load_script(REPO / "perf" / "published_checks.py", "published_checks")


@pytest.mark.parametrize("check", checks.CHECKS, ids=lambda c: c.model)
def test_each_published_check_composes_with_the_configs(check, tmp_path):
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver the configs use)

    filled = checks.fill(check.overrides, {name: str(tmp_path) for name in checks.placeholders(check)})
    assert f"+model={check.model}" in filled
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*filled, f"run.root={tmp_path}/runs"])
    assert cfg.model.name == check.model
    from hydra.utils import instantiate

    assert check.metric in instantiate(cfg.dataset.protocol).headline


def test_fill_names_a_missing_placeholder():
    with pytest.raises(KeyError, match="REASONSEG"):
        checks.fill(("dataset.root={REASONSEG}",), {})


def run_script(*args):
    return subprocess.run([sys.executable, str(REPO / "perf" / "gpu_real_models.py"), "--published", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


def test_dry_run_prints_one_command_per_model_and_runs_nothing(tmp_path):
    out = run_script("--dry-run", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    commands = [line for line in out.stdout.splitlines() if line.startswith("$ ")]
    assert len(commands) == len(checks.CHECKS)
    for check, line in zip(checks.CHECKS, commands):
        assert f"+model={check.model}" in line and f"run.root={tmp_path / check.model}/runs" in line
    assert not any(tmp_path.iterdir())


def test_an_unknown_model_is_named_with_the_known_ones():
    out = run_script("no_such_model", "--dry-run")
    assert out.returncode == 1
    assert "no_such_model" in out.stdout and "seg_zero" in out.stdout


def test_a_missing_data_directory_is_reported_not_run(tmp_path):
    out = run_script("lisa", "--out", str(tmp_path))
    assert out.returncode == 1
    assert "needs --data REASONSEG=DIR" in out.stdout
    assert not (tmp_path / "lisa").exists()


def test_published_runs_the_command_and_prints_ours_beside_the_paper(tmp_path, monkeypatch, capsys):
    """The run path end to end with a check any machine can run: empty predictions of the two LISA
    fixture images through +model=precomputed (gIoU 0 against a made-up published 0.0 and 12.5)."""
    import cv2
    import numpy as np

    from rvt_bench.core.frames import read_frame

    data = REPO / "tests" / "data" / "lisa" / "reasonseg"
    pred = tmp_path / "pred"
    pred.mkdir()
    for image in sorted((data / "val").glob("*.jpg")):
        cv2.imwrite(str(pred / f"{image.stem}.png"), np.zeros(read_frame(str(image)).shape[:2], np.uint8))
    overrides = ("+dataset=reasonseg", "dataset.root={ROOT}", "dataset.split=val", "+model=precomputed",
                 "model.root={PRED}")
    monkeypatch.setattr(checks, "CHECKS", (checks.Check("precomputed", overrides, "gIoU", 0.0, "none"),
                                           checks.Check("precomputed", overrides, "gIoU", 12.5, "none")))
    gpu = load_script(REPO / "perf" / "gpu_real_models.py", "gpu_real_models")
    code = gpu.published([], [f"ROOT={data}", f"PRED={pred}"], str(tmp_path / "out"), dry_run=False)
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line.split() for line in out.splitlines() if line.startswith("precomputed ")]
    assert [row[:6] for row in rows] == [["precomputed", "gIoU", "0.0", "0.00", "+0.00", "yes"],
                                         ["precomputed", "gIoU", "12.5", "0.00", "-12.50", "no"]]


def test_a_data_directory_with_a_space_quote_or_interpolation_composes_as_itself(tmp_path):
    """--data values went into the Hydra overrides unquoted: a path with a space, quote, comma or
    bracket failed to parse, and `${oc.env:HOME}` in it was interpolated."""
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver the configs use)

    check = next(c for c in checks.CHECKS if c.model == "lisa")
    for odd in ("a b'c,d[0]${x}", "h ${oc.env:HOME}", "back\\slash\\", "e\\${y}\\'"):
        data = str(tmp_path / odd)
        filled = checks.fill(check.overrides, {"REASONSEG": data})
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=[*filled, f"run.root={tmp_path}/runs"])
        assert cfg.dataset.root == data and cfg.model.name == "lisa"


def test_a_data_argument_without_a_name_is_one_line():
    out = run_script("lisa", "--data", "NOEQUALS", "--dry-run")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stdout.startswith("error: --data takes NAME=DIR") and "'NOEQUALS'" in out.stdout
    assert out.stdout.count("\n") == 1


def test_dry_run_all_prints_per_model_checkpoint_split_precision_expected_and_command(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "perf" / "gpu_real_models.py"), "--dry-run", "--all", "--out",
                          str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for check in checks.CHECKS:
        head = next(k for k, line in enumerate(lines) if line.startswith(f"{check.model}: checkpoint "))
        assert lines[head] == (f"{check.model}: checkpoint {check.checkpoint}, split {check.split}, "
                               f"precision {check.precision}")
        assert lines[head + 1].startswith("$ ") and f"+model={check.model}" in lines[head + 1]
        assert lines[head + 2].startswith(f"  expect {check.metric} {check.expected} +- {check.tolerance} ({check.source}")
    one = subprocess.run([sys.executable, str(REPO / "perf" / "gpu_real_models.py"), "visionreasoner", "--dry-run"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert one.returncode == 0 and one.stdout.count("$ ") == 1 and "dataset.protocol.variant=segzero" in one.stdout


def test_every_check_names_its_checkpoint_split_precision_and_the_split_is_in_its_command():
    for check in checks.CHECKS:
        assert check.checkpoint and check.split and check.precision and check.tolerance > 0, check.model
        # each public checkpoint the command loads ("MLLM + SAM 3" for sam3_agent) is named in it
        for checkpoint in check.checkpoint.split(" + "):
            assert any(arg.endswith("=" + checkpoint) for arg in check.overrides) or check.model == "visionreasoner"
        # the run's split: dataset.split, or the subset where the benchmark's split is its subset (saco_gold)
        split = next((a.split("=", 1)[1] for a in check.overrides if a.startswith(("dataset.split=", "dataset.subset="))), None)
        hub = next((a.split("=", 1)[1] for a in check.overrides if a.startswith("dataset.hf_dataset=")), "")
        assert split == check.split or hub.endswith("_" + check.split), check.model


def test_no_validation_row_is_paired_with_a_v1_lisa_checkpoint():
    """LISA README @3cb2d43 line 246: v1 was trained on train+val; v0 reproduces validation results."""
    for check in checks.CHECKS:
        if check.model == "lisa":
            assert not ("-v1" in check.checkpoint and check.split == "val"), check
    for target in checks.LISA_TARGETS:
        assert not (target.checkpoint and "-v1" in target.checkpoint and target.split == "val"), target
    docs = (REPO / "docs" / "models.md").read_text()
    assert "val gIoU 52.9" not in docs and "LISA-7B-v1` | ReasonSeg val" not in docs


def test_every_lisa_row_of_table_1_has_a_target_and_each_target_a_row():
    from rvt_bench.leaderboards.paper import paper_rows

    rows = {(r["model"], r["split"]) for r in paper_rows("reasonseg")
            if r["paper_id"] == "arXiv:2308.00692" and r["table"].startswith("Table 1") and r["model"].startswith("LISA")}
    targets = {(t.row_model, t.split) for t in checks.LISA_TARGETS}
    assert rows == targets
    paired = [t for t in checks.LISA_TARGETS if t.checkpoint]
    assert {t.checkpoint for t in paired} == {"xinlai/LISA-7B-v1", "xinlai/LISA-13B-llama2-v1", "xinlai/LISA-13B-llama2-v0"}
    lisa = next(c for c in checks.CHECKS if c.model == "lisa")
    assert any(t.checkpoint == lisa.checkpoint and t.split == lisa.split for t in paired)


def test_the_visionreasoner_check_runs_through_the_same_path_on_cpu_with_a_stand_in_server_and_tiny_sam2(
        tmp_path, monkeypatch, capsys):
    """The published() path with the visionreasoner check's own overrides (variant segzero, bf16 pinned,
    SAM2 under autocast), the data and model swapped for CPU stand-ins: the Seg-Zero LISA-format fixture
    instead of the hub copy, a loopback server answering one box in place of the checkpoint, SAM2's
    tiny random weights. It checks the command composes, runs and is read back, not the number."""
    from tests.vlm_server import ChatServer, qwen_prompt_tokens

    check = next(c for c in checks.CHECKS if c.model == "visionreasoner")
    server = ChatServer(model="visionreasoner",
                        reply=lambda body: '<think>x</think><answer>[{"bbox_2d": [100, 100, 700, 700], "point_2d": [400, 400]}]</answer>',
                        prompt_tokens=qwen_prompt_tokens())  # counts as Qwen2.5-VL's processor: the 840 input kept
    swap = {"dataset.hf_dataset=Ricky06662/ReasonSeg_val": "dataset.root={ROOT}", "model.backend=hf": "model.backend=openai",
            "model.dtype=bfloat16": f"model.base_url={server.url}"}
    overrides = (*(swap.get(a, a) for a in check.overrides), "dataset.split=val", "model.model=visionreasoner",
                 "model.sam2._target_=rvt_bench.adapters.twin.backends.sam2_pkg.Sam2PkgBackend.tiny",
                 "~model.sam2.model_id", "~model.sam2.revision", "~model.sam2.dtype", "model.sam2.device=cpu",
                 "run.bootstrap.B=0")
    stand_in = checks.Check(check.model, overrides, check.metric, 0.0, "stand-in", tolerance=100.0)
    monkeypatch.setattr(checks, "CHECKS", (stand_in,))
    gpu = load_script(REPO / "perf" / "gpu_real_models.py", "gpu_real_models")
    try:
        code = gpu.published(["visionreasoner"], [f"ROOT={REPO / 'tests' / 'data' / 'segzero' / 'reasonseg'}"],
                             str(tmp_path / "out"), dry_run=False)
    finally:
        server.close()
    out = capsys.readouterr().out
    assert code == 0, out
    row = next(line.split() for line in out.splitlines() if line.startswith("visionreasoner "))
    assert row[:3] == ["visionreasoner", "gIoU", "0.0"] and 0.0 <= float(row[3]) <= 100.0
    metrics = json.loads(next((tmp_path / "out" / "visionreasoner" / "runs").rglob("metrics.json")).read_text())
    assert metrics["protocol_variants"]["variant"] == "segzero" and "cIoU" not in metrics["metrics"]


def test_the_sam3_agent_check_runs_through_the_same_path_on_cpu_with_a_stand_in_server_and_tiny_sam3(
        tmp_path, monkeypatch, capsys):
    """The published() path with the sam3_agent check's own overrides (LISA's val files, the default
    LISA rule, prompts from {SAM3_PROMPTS}), the MLLM and SAM 3 swapped for CPU
    stand-ins: a loopback server answering as an agent (segment_phrase, examine_each_mask,
    select_masks_and_return) in place of Qwen2.5-VL through transformers, SAM 3's tiny random weights
    and stand-in system prompts. It checks the command composes, runs and is read back, not the number."""
    from tests import sam3_tiny
    from tests.test_sam3_agent_e2e import AGENT, CHECKING, _calibration_frames, agent_reply
    from tests.vlm_server import ChatServer

    check = next(c for c in checks.CHECKS if c.model == "sam3_agent")
    assert checks.placeholders(check) == ["REASONSEG", "SAM3_PROMPTS"]
    assert not any(a.startswith("dataset.protocol.variant=") for a in check.overrides)  # the default: LISA's rule
    prompts = tmp_path / "system_prompts"
    prompts.mkdir()
    (prompts / "system_prompt.txt").write_text(AGENT + "\n")
    (prompts / "system_prompt_iterative_checking.txt").write_text(CHECKING + "\n")
    tiny = sam3_tiny.build(tmp_path / "tiny_sam3", _calibration_frames())
    server = ChatServer(model="tiny-mllm", reply=agent_reply)
    swap = {"model.backend=hf": "model.backend=openai", "model.model=Qwen/Qwen2.5-VL-7B-Instruct": "model.model=tiny-mllm",
            "model.dtype=bfloat16": f"model.base_url={server.url}",
            "model.sam3.checkpoint=facebook/sam3": f"model.sam3.checkpoint={tiny}",
            "model.sam3.dtype=bfloat16": "model.sam3.dtype=float32"}  # sam3 refuses bfloat16 on the CPU
    overrides = (*(swap.get(a, a) for a in check.overrides), "model.sam3.device=cpu", "run.bootstrap.B=0")
    assert len(set(overrides) - set(check.overrides)) == len(swap) + 2  # every swap took
    monkeypatch.setattr(checks, "CHECKS", (checks.Check(check.model, overrides, check.metric, 0.0, "stand-in",
                                                        tolerance=100.0),))
    gpu = load_script(REPO / "perf" / "gpu_real_models.py", "gpu_real_models")
    try:
        code = gpu.published(["sam3_agent"], [f"REASONSEG={REPO / 'tests' / 'data' / 'lisa' / 'reasonseg'}",
                                              f"SAM3_PROMPTS={prompts}"], str(tmp_path / "out"), dry_run=False)
    finally:
        server.close()
    out = capsys.readouterr().out
    assert code == 0, out
    row = next(line.split() for line in out.splitlines() if line.startswith("sam3_agent "))
    assert row[:3] == ["sam3_agent", "gIoU", "0.0"] and 0.0 <= float(row[3]) <= 100.0
    run = next((tmp_path / "out" / "sam3_agent" / "runs").rglob("metrics.json")).parent
    assert json.loads((run / "metrics.json").read_text())["protocol_variants"]["variant"] is None
    preds = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert preds and all(p["error"] is None and p["trace"]["calls"][0]["tool"] == "segment_phrase" for p in preds)
    assert any(b["messages"][0].get("content") == AGENT for b in server.bodies)  # the prompts came from SAM3_PROMPTS
