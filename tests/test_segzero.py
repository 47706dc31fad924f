"""Seg-Zero and VisionReasoner (adapters/segzero, +model=seg_zero / +model=visionreasoner): their
answers read as the authors' evaluation code reads them (dvlab-research/Seg-Zero @ 42a3345,
evaluation_scripts/evaluation.py and evaluation_visionreasoner.py; dvlab-research/VisionReasoner @
a455092), on the authors' own example answers; the 840 x 840 input, the prompt, the SAM2 prompts and
the union, on a stand-in backend and SAM2; and `rvt-bench +model=...` end to end on the demo against
the loopback chat server."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.segzero.adapter import SegZeroAdapter
from rvt_bench.adapters.segzero.answers import parse
from rvt_bench.adapters.vlm.reply import ReplyError
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import AdapterError
from rvt_bench.harness.config import group_node
from rvt_bench.loaders.demo import DemoDataset
from tests.fakes import BoxSam2
from tests.test_vlm_adapter import Canned
from tests.vlm_server import ChatServer, qwen_prompt_tokens

REPO = Path(__file__).resolve().parents[1]
FX, FY = 600 / 840, 400 / 840  # a 600 x 400 (W x H) image shown at 840 x 840

# the authors' own answers: VisionReasoner's reward module's example reply
# (verl/utils/reward_score/vision_reasoner.py, __main__) and the example answer of both prompts
VR_REWARD_EXAMPLE = '\n<answer>\n[{"bbox_2d": [10, 100, 398, 423], "point_2d": [283, 169]}]\n</answer>\n'
VR_PROMPT_EXAMPLE = ('[{"bbox_2d": [10,100,200,210], "point_2d": [30,110]}, '
                     '{"bbox_2d": [225,296,706,786], "point_2d": [302,410]}]')
SZ_PROMPT_EXAMPLE = "{'bbox': [10,100,200,210], 'points_1': [30,110], 'points_2': [35,180]}"
SZ_THOUGHT = "<think>The cup holds the hot drink.</think>"


def test_visionreasoner_reads_its_reward_modules_example_and_rounds_as_int_v_times_f_plus_half():
    answer = parse(VR_REWARD_EXAMPLE, "visionreasoner", FX, FY)
    # int(10 * 600/840 + 0.5) = 7, int(100 * 400/840 + 0.5) = 48, ...
    assert answer.boxes == [[7, 48, 284, 201]] and answer.points == [[[202, 80]]] and answer.think == ""


def test_visionreasoner_reads_every_object_of_its_prompts_example():
    answer = parse(f"<think>two drinks</think><answer>{VR_PROMPT_EXAMPLE}</answer>", "visionreasoner", FX, FY)
    assert answer.boxes == [[7, 48, 143, 100], [161, 141, 504, 374]]
    assert answer.points == [[[21, 52]], [[216, 195]]] and answer.think == "two drinks"


def test_visionreasoner_with_no_object_answers_an_empty_list():
    assert parse("<answer>[]</answer>", "visionreasoner", FX, FY).boxes == []


@pytest.mark.parametrize("reply, reason", [("[{\"bbox_2d\": [1, 2, 3, 4], \"point_2d\": [2, 3]}]", "no_answer"),
                                           ("<answer>[{'bbox_2d': [1, 2, 3, 4]}]</answer>", "json"),
                                           ('<answer>[{"bbox_2d": [1, 2, 3, 4]}]</answer>', "no_points")])
def test_visionreasoner_answers_its_code_cannot_read_are_parse_failures(reply, reason):
    with pytest.raises(ReplyError) as err:
        parse(reply, "visionreasoner", FX, FY)
    assert err.value.reason == reason and err.value.kind == "parse"


def test_seg_zero_reads_one_box_and_two_points_truncating_then_rounding():
    reply = SZ_THOUGHT + '<answer>{"bbox": [10.9, 100, 200.6, 210], "points_1": [30, 110], "points_2": [35, 180]}</answer>'
    answer = parse(reply, "seg_zero", FX, FY)
    # round(int(v) * f): 10.9 -> 10 -> 7; 200.6 -> 200 -> 143
    assert answer.boxes == [[7, 48, 143, 100]] and answer.points == [[[21, 52], [25, 86]]]
    assert answer.think == "The cup holds the hot drink."


def test_seg_zero_refuses_its_prompts_single_quoted_example_as_the_authors_json_loads_does():
    with pytest.raises(ReplyError) as err:
        parse(SZ_THOUGHT + f"<answer>{SZ_PROMPT_EXAMPLE}</answer>", "seg_zero", FX, FY)
    assert err.value.reason == "json"


@pytest.mark.parametrize("reply, reason", [
    ('<answer>{"bbox": [1, 2, 3, 4], "points_1": [2, 3], "points_2": [2, 3]}</answer>', "no_think"),
    (SZ_THOUGHT + '<answer>{"bbox": [1, 2, 3], "points_1": [2, 3], "points_2": [2, 3]}</answer>', "no_boxes"),
    (SZ_THOUGHT + '<answer>{"bbox": [1, 2, 3, 4], "points_1": [2, 3]}</answer>', "no_points"),
    (SZ_THOUGHT + "<answer>the cup</answer>", "no_json")])
def test_seg_zero_answers_its_script_fails_on_are_parse_failures(reply, reason):
    with pytest.raises(ReplyError) as err:
        parse(reply, "seg_zero", FX, FY)
    assert err.value.reason == reason


def model_node(name: str) -> dict:
    node = OmegaConf.to_container(group_node("model", name), resolve=True)
    return {k: node[k] for k in ("name", "model", "answer_format", "template", "example", "strip", "resize", "max_new_tokens")}


@pytest.fixture(scope="module")
def demo():
    return {s.id: s for s in DemoDataset(REPO / "demo", split="demo")}


def test_visionreasoner_sees_840_square_and_unites_each_objects_best_mask(demo):
    cup = demo["image/coffee_cup"]  # 600 x 400
    backend, sam2 = Canned(f"<think>the cup</think><answer>{VR_PROMPT_EXAMPLE}</answer>"), BoxSam2()
    pred = SegZeroAdapter(backend=backend, sam2=sam2, **model_node("visionreasoner")).predict(cup)
    [(kind, image), (_, text)] = backend.requests[0].content
    assert kind == "image" and image.shape == (840, 840, 3)
    assert text.startswith('Please find "the container used for hot drinks" with bboxs and points.')
    assert sam2.calls == [((400, 600, 3), [[7, 48, 143, 100], [161, 141, 504, 374]], [[[21, 52]], [[216, 195]]])]
    union = mask_io.decode(pred.masks[0])
    assert union.sum() == (143 - 7) * (100 - 48) + (504 - 161) * (374 - 141)  # the two boxes do not overlap
    assert pred.trace["thought"] == "the cup" and pred.trace["input_size"] == [840, 840]


def test_seg_zero_prompts_sam2_with_its_box_and_both_points(demo):
    cup = demo["image/coffee_cup"]
    reply = SZ_THOUGHT + '<answer>{"bbox": [10, 100, 200, 210], "points_1": [30, 110], "points_2": [35, 180]}</answer>'
    backend, sam2 = Canned(reply), BoxSam2()
    SegZeroAdapter(backend=backend, sam2=sam2, **model_node("seg_zero")).predict(cup)
    assert backend.requests[0].content[-1][1].startswith("Please find 'the container used for hot drinks' with bbox")
    assert sam2.calls[0][1:] == ([[7, 48, 143, 100]], [[[21, 52], [25, 86]]])


def test_grounding_gives_the_answers_boxes_in_frame_pixels(demo):
    cup = dataclasses.replace(demo["image/coffee_cup"], task="grounding")
    pred = SegZeroAdapter(backend=Canned(VR_REWARD_EXAMPLE), **model_node("visionreasoner")).predict(cup)
    assert pred.boxes == [[[7.0, 48.0, 284.0, 201.0]]]


def test_a_video_is_refused_in_one_line(demo):
    clip = next(s for s in demo.values() if s.modality == "video" and s.task == "segmentation")
    with pytest.raises(AdapterError, match="evaluates images only"):
        SegZeroAdapter(backend=Canned("x"), sam2=BoxSam2(), **model_node("seg_zero")).predict(clip)


def test_the_defaults_are_the_released_checkpoints_and_the_authors_sam2():
    for name, checkpoint in (("seg_zero", "Ricky06662/Seg-Zero-7B"), ("visionreasoner", "Ricky06662/VisionReasoner-7B")):
        node = OmegaConf.to_container(group_node("model", name), resolve=True)
        assert node["model"] == checkpoint and node["sam2"]["model_id"] == "facebook/sam2-hiera-large"


@pytest.mark.parametrize("name", ["seg_zero", "visionreasoner"])
def test_rvt_bench_runs_it_end_to_end_on_the_demo_against_a_local_server(tmp_path, name):
    answer = ('{"bbox": [280, 40, 570, 620], "points_1": [420, 300], "points_2": [400, 200]}' if name == "seg_zero"
              else '[{"bbox_2d": [280, 40, 570, 620], "point_2d": [420, 300]}]')  # the cup, in 840 x 840 pixels
    server = ChatServer(model=name, reply=lambda body: f"<think>the cup</think><answer>{answer}</answer>",
                        prompt_tokens=qwen_prompt_tokens())  # Qwen2.5-VL-7B's processor: the 840 input kept
    try:
        proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), f"+model={name}", f"model.model={name}",
                               f"model.base_url={server.url}", "model.sam2._target_=tests.fakes.BoxSam2",
                               "~model.sam2.model_id", "~model.sam2.revision", "~model.sam2.device", "~model.sam2.dtype",
                               "run.limit=4",  # the quick split's first four: three images (the cup) and a clip
                               f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    preds = {p["sample_id"]: p for p in map(json.loads, (run_dir / "predictions.jsonl").read_text().splitlines())}
    cup = preds["image/coffee_cup"]
    assert cup["error"] is None and cup["trace"]["input_size"] == [840, 840]
    videos = [p for p in preds.values() if p["sample_id"].startswith("video/")]
    assert videos and all("evaluates images only" in p["error"]["message"] for p in videos)
    scores = {s["sample_id"]: s for s in map(json.loads, (run_dir / "scores.limit4.jsonl").read_text().splitlines())}
    assert scores["image/coffee_cup"]["values"]["mask_iou"]["iou"] > 0.7  # the cup's box, masked by the stand-in SAM2


def test_the_840_input_is_kept_by_qwen2_5_vls_own_resize():
    # Qwen2.5-VL-7B-Instruct's processor (factor 28, min_pixels 3136, max_pixels 12845056;
    # adapters/vlm/families.py): 840 = 30 x 28 px, so the model's coordinates are the 840 image's pixels
    from rvt_bench.adapters.vlm.frames import smart_resize

    assert smart_resize(840, 840, 28, 3136, 12845056) == (840, 840)


def test_a_server_that_resizes_the_840_input_is_refused_before_any_sample():
    # vllm serve ... --mm-processor-kwargs '{"max_pixels": 401408}': 840 x 840 = 705600 px would shrink
    server = ChatServer(model="seg_zero", prompt_tokens=qwen_prompt_tokens(3136, 401408))
    try:
        node = {k: v for k, v in OmegaConf.to_container(group_node("model", "seg_zero"), resolve=True).items()
                if k not in ("_target_", "sam2")}
        model = SegZeroAdapter(**dict(node, model="seg_zero", base_url=server.url, backoff_s=0.0))
        with pytest.raises(AdapterError, match="840x840 image into"):
            model.preflight()
        SegZeroAdapter(**dict(node, model="seg_zero", base_url=server.url, backoff_s=0.0, input_size_check=False)).preflight()
    finally:
        server.close()
