"""The sam3_agent adapter's own parts, without models: the system prompts' loading (one line when
missing), the loop's messages as the vlm backends' multi-turn requests, the pictures shown, the
video answer from SAM 3's tracks, the funnel's attribution."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from rvt_bench.adapters.base import ScoredSample
from rvt_bench.adapters.sam3_agent import adapter as A
from rvt_bench.adapters.sam3_agent import funnel, prompts, render
from rvt_bench.adapters.sam3_agent.loop import Detections
from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest
from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import AdapterError, Prediction, Sample, Target


class Recorder(VLMBackend):
    name = "recorder"

    def __init__(self):
        self.requests: list[VLMRequest] = []

    def generate(self, requests):
        self.requests += requests
        return [Reply(text="reply", finish_reason="stop", n_tokens=1) for _ in requests]

    def fingerprint(self):
        return {"backend": "recorder"}


def test_missing_prompts_are_one_line_naming_the_setting(tmp_path):
    with pytest.raises(AdapterError) as err:
        prompts.load(str(tmp_path))
    assert "model.prompts_dir" in str(err.value) and "system_prompt.txt" in str(err.value) and "\n" not in str(err.value)


def test_prompts_come_from_the_installed_sam3_by_default(tmp_path, monkeypatch):
    prompts_dir = tmp_path / "site" / "sam3" / "agent" / "system_prompts"
    prompts_dir.mkdir(parents=True)
    (prompts_dir.parent.parent / "__init__.py").write_text("raise ImportError('never imported')\n")
    (prompts_dir / "system_prompt.txt").write_text("installed agent\n")
    (prompts_dir / "system_prompt_iterative_checking.txt").write_text("installed check\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert prompts.default_dir() == prompts_dir
    assert prompts.load(None) == {"agent": "installed agent", "checking": "installed check"}


def test_without_sam3_installed_the_error_says_how_to_get_the_prompts(monkeypatch):
    monkeypatch.setattr(prompts, "default_dir", lambda: None)
    with pytest.raises(AdapterError) as err:
        prompts.load(None)
    message = str(err.value)
    assert "git clone https://github.com/facebookresearch/sam3" in message and "\n" not in message
    assert "model.prompts_dir=<the clone>/sam3/agent/system_prompts" in message
    assert "pip install git+" not in message  # its wheel leaves the prompts out


def test_a_pip_installed_sam3_without_the_prompt_files_points_to_a_clone(tmp_path, monkeypatch):
    # facebookresearch/sam3's wheel holds the .py files and assets/*.txt.gz only (its pyproject's
    # package-data): the installed package is found, its system_prompts/ is not there
    (tmp_path / "site" / "sam3" / "agent").mkdir(parents=True)
    (tmp_path / "site" / "sam3" / "__init__.py").write_text("raise ImportError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(AdapterError) as err:
        prompts.load(None)
    message = str(err.value)
    assert "system_prompt.txt" in message and "git clone https://github.com/facebookresearch/sam3" in message
    assert "model.prompts_dir=<the clone>/sam3/agent/system_prompts" in message and "\n" not in message


def test_a_fifo_or_non_utf8_prompt_file_is_one_line_not_a_hang(tmp_path):
    # the prompts are read through the checked reader: a FIFO would block Path.read_text for ever
    import os

    os.mkfifo(tmp_path / "system_prompt.txt")
    (tmp_path / "system_prompt_iterative_checking.txt").write_text("check\n")
    with pytest.raises(AdapterError) as err:
        prompts.load(str(tmp_path))
    assert "model.prompts_dir" in str(err.value) and "\n" not in str(err.value)
    os.unlink(tmp_path / "system_prompt.txt")
    (tmp_path / "system_prompt.txt").write_bytes(b"\xff\xfe agent")
    with pytest.raises(AdapterError, match="model.prompts_dir"):
        prompts.load(str(tmp_path))


def test_prompts_are_stripped_and_digested(tmp_path):
    (tmp_path / "system_prompt.txt").write_text("  agent\n\n")
    (tmp_path / "system_prompt_iterative_checking.txt").write_text("check\n")
    loaded = prompts.load(str(tmp_path))
    assert loaded == {"agent": "agent", "checking": "check"}
    assert prompts.digests(loaded)["agent"] == hashlib.sha256(b"agent").hexdigest()


def test_the_loop_s_messages_become_one_multi_turn_request(tmp_path):
    backend = Recorder()
    agent = A.Sam3AgentAdapter(backend=backend, sam3={"checkpoint": str(tmp_path)}, max_new_tokens=7)
    raw, shown = np.zeros((4, 4, 3), np.uint8), np.ones((4, 4, 3), np.uint8)
    messages = [{"role": "system", "content": "SYS"}, prompts.initial_user(prompts.ImageRef("raw", raw), "q"),
                prompts.assistant("<tool>{}</tool>"),
                prompts.user(prompts.text("masks"), prompts.image(prompts.ImageRef("masks x", shown)))]
    assert agent.generate(messages) == "reply"
    request = backend.requests[0]
    assert request.system == "SYS" and request.max_new_tokens == 7
    assert [role for role, _ in request.turns] == ["user", "assistant"]
    assert request.turns[0][1][0][1] is raw and request.content[1][1] is shown
    sent = OpenAIChatVLM(model="m", base_url="http://x/v1").messages(request)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"][0]["type"] == "image_url" and sent[2]["content"] == [{"type": "text", "text": "<tool>{}</tool>"}]


def test_the_hf_backend_renders_the_earlier_turns_too():
    from rvt_bench.adapters.vlm.hf import _messages

    image = np.zeros((2, 2, 3), np.uint8)
    request = VLMRequest("S", [("text", "now")], 5, (("user", [("image", image), ("text", "q")]),
                                                       ("assistant", [("text", "<tool>{}</tool>")])))
    assert _messages(request) == [
        {"role": "system", "content": [{"type": "text", "text": "S"}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<tool>{}</tool>"}]},
        {"role": "user", "content": [{"type": "text", "text": "now"}]}]


def test_a_backend_failure_is_the_reply_stage():
    class Down(Recorder):
        def generate(self, requests):
            return [AdapterError("server down") for _ in requests]

    agent = A.Sam3AgentAdapter(backend=Down(), sam3={"checkpoint": "x"})
    with pytest.raises(AdapterError) as err:
        agent.generate([{"role": "system", "content": "S"}, prompts.user(prompts.text("hi"))])
    assert (err.value.stage, err.value.reason) == ("reply", "backend")


def test_pictures_number_every_mask_and_zoom_on_one():
    frame = np.full((40, 60, 3), 100, np.uint8)
    masks = np.zeros((2, 40, 60), bool)
    masks[0, 5:15, 5:20] = True
    masks[1, 20:35, 30:55] = True
    det = Detections(masks, [[5, 5, 20, 15], [30, 20, 55, 35]], [0.9, 0.8])
    whole = render.all_masks(frame, det, "masks x")
    assert whole.label == "masks x" and whole.pixels.shape == frame.shape
    assert (whole.pixels[masks[0]] != 100).any() and (whole.pixels[~masks.any(0)] == 100).mean() > 0.9
    one, zoom = render.one_mask(frame, det, 1)
    assert (one.label, zoom.label) == ("mask 2", "zoom 2")
    assert (one.pixels[masks[0]] == 100).all()  # the other mask is not drawn
    assert min(zoom.pixels.shape[:2]) >= render.ZOOM_MIN_SIDE


def test_video_answer_is_the_tracks_matching_the_selection_on_the_key_frame():
    tracks = {7: np.zeros((3, 8, 8), bool), 9: np.zeros((3, 8, 8), bool)}
    tracks[7][:, 0:4, 0:4] = True
    tracks[9][:, 4:8, 4:8] = True
    selected = tracks[9][1:2].copy()
    masks, matched = A.match_tracks(tracks, selected, 1, 0.5, selected[0], 3)
    assert matched == [9] and all((m == tracks[9][t]).all() for t, m in enumerate(masks))
    masks, matched = A.match_tracks(tracks, np.roll(selected, 2, axis=1), 1, 0.5, selected[0], 3)
    assert matched == [] and masks[1].any() and not masks[0].any() and not masks[2].any()


def _scored(trace, error=None):
    sample = Sample(id="s", dataset="d", split="val", modality="image", frames=[], frame_ids=[], query="q",
                    task="segmentation", target=Target())
    pred = Prediction(sample_id="s", task="segmentation", trace=trace,
                      error=None if error is None else {"kind": "parse", "message": error})
    return ScoredSample(sample, pred, ScoreRecord("s"))


def test_the_funnel_stops_each_sample_where_its_failure_says():
    assert funnel.passed(_scored({"calls": [], "failure": {"stage": "turns", "reason": "history"}})) == {
        "reply_received": True, "tool_calls_valid": True, "within_turns": False, "sam3_ran": True}
    assert funnel.passed(_scored(None, "crash"))["reply_received"] is False
    assert all(funnel.passed(_scored({"calls": []})).values())


@pytest.mark.parametrize("kwargs", [{"key_frame": "last"}, {"video_match_iou": 2}, {"max_new_tokens": 0}, {"colour": 1}])
def test_settings_are_checked(kwargs):
    with pytest.raises(AdapterError):
        A.Sam3AgentAdapter(backend="openai", model="m", base_url="http://x/v1", sam3={"checkpoint": "x"}, **kwargs)


def test_the_server_s_timeout_and_retries_are_settings():
    # a user facing a hung server sets model.timeout_s; it was refused as "not a setting" (only +model.timeout_s worked)
    from hydra.utils import instantiate

    from rvt_bench.harness.config import adapter_node
    from tests.test_config_schemas import composed

    agent = instantiate(adapter_node(composed("+dataset=demo", "+model=sam3_agent", "model.model=m", "model.timeout_s=7",
                                              "model.max_retries=0").model))
    assert (agent.backend.timeout_s, agent.backend.max_retries) == (7.0, 0)
    default = instantiate(adapter_node(composed("+dataset=demo", "+model=sam3_agent", "model.model=m").model))
    assert (default.backend.timeout_s, default.backend.max_retries) == (300.0, 4)  # OpenAIChatVLM's own defaults
