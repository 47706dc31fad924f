"""The VLM adapter's openai backend (adapters/vlm/openai_chat.py) against a loopback
OpenAI-compatible chat server: what goes over the wire, and what comes back."""
from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from PIL import Image

from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.core.frames import read_frame
from rvt_bench.core.types import AdapterError
from tests.vlm_server import ChatServer
from rvt_bench.harness.config import group_node

REPO = Path(__file__).resolve().parents[1]
# the composed `model` node (schema defaults + conf/model/vlm.yaml), unresolved: as run_bench.py builds it
CONF = OmegaConf.to_container(group_node("model", "vlm"), resolve=False)


@pytest.fixture(scope="module")
def demo():
    return {s.id: s for s in DemoDataset(REPO / "demo")}


@pytest.fixture()
def server():
    srv = ChatServer()
    yield srv
    srv.close()


def adapter(server, **overrides):
    kw = {k: v for k, v in CONF.items() if k not in ("_target_", "name", "sam2")}
    kw.update(model="tiny-vlm", base_url=server.url, backoff_s=0.0)
    kw.update(overrides)
    return VLMAdapter(**kw)


def _decode(url: str) -> np.ndarray:
    assert url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))


def test_the_request_carries_the_frames_as_data_urls_and_the_prompt(server, demo):
    sample = demo["rvt/vqa/launch_pad"]
    adapter(server, frames=dict(CONF["frames"], num_frames=2)).predict(sample)
    (body,) = server.bodies
    assert body["model"] == "tiny-vlm" and body["max_tokens"] == 512 and body["temperature"] == 0.0
    (message,) = body["messages"]
    parts = message["content"]
    assert message["role"] == "user" and [p["type"] for p in parts] == ["text", "image_url", "text", "image_url", "text"]
    assert parts[0]["text"] == "Frame 0:" and parts[2]["text"] == "Frame 15:"
    assert "Question: What flies upward in this video?" in parts[-1]["text"]
    # the frame resized to smart_resize(240, 320) = 252 x 308, pixels intact (PNG)
    sent = _decode(parts[1]["image_url"]["url"])
    expected = np.asarray(Image.fromarray(read_frame(sample.frames[0])).resize((308, 252), Image.BICUBIC))
    assert np.array_equal(sent, expected)


def test_a_system_prompt_is_its_own_message(server, demo):
    adapter(server, prompts=dict(CONF["prompts"], system="You are precise.")).predict(demo["rvt/vqa/launch_pad"])
    assert server.bodies[0]["messages"][0] == {"role": "system", "content": "You are precise."}


def test_the_reply_becomes_the_answer_after_think(server, demo):
    pred = adapter(server).predict(demo["rvt/vqa/launch_pad"])
    assert pred.text == "A small object moves." and pred.trace["thought"] == "looking"
    assert set(pred.timings) == {"frames", "vlm"}


def test_grounding_boxes_come_back_in_frame_pixels(server, demo):
    pred = adapter(server, frames=dict(CONF["frames"], num_frames=None)).predict(demo["rvt/grounding/launch_pad"])
    # [10, 10, 150, 120] on the 252 x 308 input of a 240 x 320 frame
    assert pred.boxes[3] == [pytest.approx([10 * 320 / 308, 10 * 240 / 252, 150 * 320 / 308, 120 * 240 / 252])]


def test_a_length_cut_inside_think_is_a_parse_failure(demo):
    srv = ChatServer(reply=lambda body: "<think>first the rocket", finish_reason="length")
    try:
        with pytest.raises(AdapterError) as err:
            adapter(srv).predict(demo["rvt/vqa/launch_pad"])
        assert err.value.kind == "parse" and err.value.reason == "think_unclosed"
    finally:
        srv.close()


def test_server_errors_are_retried(server, demo):
    server.fail = [503]
    assert adapter(server).predict(demo["rvt/vqa/launch_pad"]).text
    assert len(server.bodies) == 2


def test_a_server_that_keeps_failing_fails_the_sample_naming_it(server, demo):
    server.fail = [500] * 10
    with pytest.raises(AdapterError, match="HTTP 500"):
        adapter(server, max_retries=1).predict(demo["rvt/vqa/launch_pad"])


def test_a_deterministic_server_error_is_not_retried(server, demo):
    server.fail = [500] * 10  # the same answer every time: "image input is not supported"
    with pytest.raises(AdapterError, match="HTTP 500 after 1 attempt"):
        adapter(server, max_retries=4).predict(demo["rvt/vqa/launch_pad"])
    assert len(server.bodies) == 1


class TextOnlyServer(ChatServer):
    """A chat server of a text-only model: any request with an image part gets HTTP 500, as vLLM
    answers for a model without a vision tower."""

    def take(self, body):
        super().take(body)
        parts = [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]
        return 500 if any(p.get("type") == "image_url" for p in parts) else 200


def test_a_text_only_server_is_refused_at_preflight():
    srv = TextOnlyServer()
    try:
        with pytest.raises(AdapterError, match=r"cannot answer a request with an image .*HTTP 500 after 1 attempt"):
            adapter(srv, max_retries=4).preflight()
        assert len(srv.bodies) == 1  # one probe, not retried
        assert any(p["type"] == "image_url" for p in srv.bodies[0]["messages"][-1]["content"])
    finally:
        srv.close()


def test_preflight_names_a_model_the_server_does_not_serve(server):
    with pytest.raises(AdapterError, match="tiny-vlm"):
        adapter(server, model="other").preflight()
    adapter(server).preflight()


def test_server_location_and_patience_are_not_in_the_fingerprint(server):
    assert adapter(server).fingerprint() == adapter(server, base_url="http://elsewhere:1/v1", timeout_s=5.0,
                                                    max_concurrency=2).fingerprint()


def test_the_run_fingerprint_ignores_where_the_vlm_server_is():
    from rvt_bench.harness.manifest import fingerprint

    cfg = {"dataset": {"name": "demo"}, "model": {k: v for k, v in CONF.items()}}
    moved = {"dataset": {"name": "demo"}, "model": dict(CONF, base_url="http://gpu-node:9000/v1", timeout_s=10.0)}
    assert fingerprint(cfg) == fingerprint(moved)
    assert fingerprint(cfg) != fingerprint({"dataset": {"name": "demo"}, "model": dict(CONF, model="Qwen/Qwen2-VL-7B")})
