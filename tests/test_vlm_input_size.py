"""The server's image resize checked at preflight (adapters/vlm/calibrate.py): Qwen2.5-VL's boxes are
pixels of the image its processor produced, so a server whose processor resizes the adapter's frames
again must stop the run before any sample. The loopback server counts prompt tokens with
transformers' own Qwen2VLImageProcessor under the bounds a real server would be started with."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.adapters.vlm.calibrate import probe_sizes
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core.types import AdapterError
from rvt_bench.harness.config import group_node
from tests.test_vlm_adapter import Canned
from tests.vlm_server import ChatServer, qwen_prompt_tokens

REPO = Path(__file__).resolve().parents[1]
QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"


def node(name: str) -> dict:
    conf = OmegaConf.to_container(group_node("model", name), resolve=False)
    return {k: v for k, v in conf.items() if k not in ("_target_", "name", "sam2")}


def adapter(server: ChatServer, name: str = "qwen2_5_vl", **overrides) -> VLMAdapter:
    return VLMAdapter(**dict(node(name), model=server.model, base_url=server.url, backoff_s=0.0, **overrides))


def probes(server: ChatServer) -> list[dict]:
    """The requests whose prompt asks for one word and whose max_tokens is 1 beyond the first (the
    backend's own image probe)."""
    return [b for b in server.bodies if b["max_tokens"] == 1][1:]


@pytest.fixture()
def served():
    servers = []

    def start(**kw) -> ChatServer:
        servers.append(ChatServer(**{"model": QWEN, **kw}))
        return servers[-1]

    yield start
    for srv in servers:
        srv.close()


def test_the_probes_are_the_largest_and_smallest_inputs_the_preset_sends():
    probe = probe_sizes("qwen2_5_vl", node("qwen2_5_vl")["frames"])
    # Qwen2.5-VL-7B-Instruct's bounds: 12845056 = 3584^2 px, 3136 = 56^2 px; one token per 28 x 28 px
    assert (probe.large, probe.small) == ((3584, 3584), (56, 56))
    assert (probe.expected_large, probe.expected_small) == ((3584 // 28) ** 2, 4)


def test_a_server_with_the_presets_bounds_passes(served):
    server = served(prompt_tokens=qwen_prompt_tokens(3136, 12845056))
    model = adapter(server)
    model.preflight()
    assert model.input_size == {"large": [3584, 3584], "small": [56, 56], "tokens": 128 * 128 - 4}
    assert [len(p["messages"][0]["content"]) for p in probes(server)] == [3, 3]


def test_a_server_that_shrinks_large_images_is_refused_in_one_line(served):
    # vllm serve ... --mm-processor-kwargs '{"max_pixels": 1003520}': 3584^2 becomes 70 x 70 patches
    server = served(prompt_tokens=qwen_prompt_tokens(3136, 1003520))
    with pytest.raises(AdapterError) as err:
        adapter(server).preflight()
    message = str(err.value)
    assert "\n" not in message and "3584x3584 image into 1225 image tokens" in message
    assert "about 960400 pixels" in message and "max_pixels=12845056" in message


def test_a_server_that_enlarges_small_images_is_refused(served):
    server = served(prompt_tokens=qwen_prompt_tokens(200704, 12845056))  # min_pixels 256 merged tokens
    with pytest.raises(AdapterError, match="image tokens"):
        adapter(server).preflight()


def test_the_check_follows_the_runs_own_bounds(served):
    # +model=vlm's default frames (max_pixels 401408) under a server with Qwen's bounds: nothing is
    # resized again, so a model.model of the family passes, the probe being the run's own largest input
    server = served(prompt_tokens=qwen_prompt_tokens(3136, 12845056))
    model = adapter(server, "vlm")
    model.preflight()
    assert model.input_size["large"] == [616, 616] and model.input_size["tokens"] == 22 * 22 - 4


def test_a_server_without_token_counts_is_refused_unless_the_check_is_off_by_name(served):
    server = served(prompt_tokens=lambda body: None)
    with pytest.raises(AdapterError, match="reports no usage.prompt_tokens.*model.input_size_check=false"):
        adapter(server).preflight()
    before = len(server.bodies)
    model = adapter(server, input_size_check=False)
    model.preflight()
    assert model.input_size is None and len(server.bodies) == before + 1  # the backend's own probe only


def test_no_probe_where_the_family_is_unknown_custom_or_relative(served):
    server = served(model="tiny-vlm")  # +model=vlm with a served name of no known family
    adapter(server, "vlm").preflight()
    server2 = served(model=QWEN)
    adapter(server2, "qwen2_5_vl", family="custom").preflight()
    server3 = served(model="Qwen/Qwen3-VL-8B-Instruct")  # 0-1000 relative: the resize cannot move a box
    adapter(server3, "qwen3_vl").preflight()
    assert probes(server) == probes(server2) == probes(server3) == []


def test_a_backend_that_reads_the_size_back_is_not_probed():
    backend = Canned(Reply("x", "stop", 1))
    backend.knows_input_size = True  # the hf backend: image_grid_thw per image
    VLMAdapter(**dict(node("qwen2_5_vl"), backend=backend, model=QWEN)).preflight()
    assert backend.requests == []


def test_the_check_is_not_in_the_fingerprint(served):
    server = served()
    assert adapter(server).fingerprint() == adapter(server, input_size_check=False).fingerprint()


def test_the_command_line_stops_before_any_sample(served, tmp_path):
    server = served(prompt_tokens=qwen_prompt_tokens(3136, 1003520))
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "+model=qwen2_5_vl", f"model.model={QWEN}",
         f"model.base_url={server.url}", "model.backoff_s=0", f"run.root={tmp_path / 'runs'}",
         f"leaderboard.dir={tmp_path / 'boards'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if "image tokens" in line]
    assert len(lines) == 1 and "3584x3584" in lines[0], proc.stderr[-2000:]
    assert not list((tmp_path / "runs").rglob("predictions.jsonl"))
    assert all(b["max_tokens"] == 1 for b in server.bodies)  # no sample's request was sent
