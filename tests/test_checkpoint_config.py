"""adapters/checkpoint.py: what LISA and Sa2VA share when they read a released checkpoint."""
from __future__ import annotations

import pytest

from rvt_bench.adapters.checkpoint import device_dtype
from rvt_bench.adapters.lisa.config import LisaConfig
from rvt_bench.adapters.sa2va.config import Sa2VAConfig
from rvt_bench.core.types import AdapterError


@pytest.mark.parametrize("cls,name,label", [(LisaConfig, "lisa", "LISA"), (Sa2VAConfig, "sa2va", "Sa2VA")])
def test_a_missing_or_broken_config_json_is_one_line_naming_the_model(tmp_path, cls, name, label):
    with pytest.raises(AdapterError) as missing:
        cls.from_json(tmp_path / "config.json")
    assert str(missing.value) == f"{name}: {tmp_path / 'config.json'} is missing (a {label} checkpoint directory holds config.json)"
    (tmp_path / "config.json").write_text('{"vocab_size": 3,')
    with pytest.raises(AdapterError, match=rf"^{name}: .*config.json is not valid JSON") as broken:
        cls.from_json(tmp_path / "config.json")
    assert "\n" not in str(broken.value)


def test_device_and_dtype_resolve_as_the_authors_run_them():
    import torch

    gpu = torch.cuda.is_available()
    assert device_dtype("auto", "auto") == (("cuda", "bfloat16") if gpu else ("cpu", "float32"))
    assert device_dtype("cpu", "auto") == ("cpu", "float32")
    assert device_dtype("cuda:1", "auto") == ("cuda:1", "bfloat16")
    assert device_dtype("cpu", "float16") == ("cpu", "float16")


def test_a_checkpoint_is_a_directory_or_a_hub_id_else_one_line(tmp_path, monkeypatch):
    import huggingface_hub

    from rvt_bench.adapters.checkpoint import checkpoint_dir

    assert checkpoint_dir(str(tmp_path), "sa2va", "Sa2VA", "ByteDance/Sa2VA-4B", ["*.json"]) == tmp_path
    for wrong in (str(tmp_path / "nope"), "./ckpt", "a/b/c", "plain"):
        with pytest.raises(AdapterError, match=rf"^sa2va: model.checkpoint {wrong} is not a directory \(expected a "
                                              r"Sa2VA checkpoint directory or a hub id such as ByteDance/Sa2VA-4B\)$"):
            checkpoint_dir(wrong, "sa2va", "Sa2VA", "ByteDance/Sa2VA-4B", ["*.json"])

    asked = []

    def offline(repo_id, allow_patterns=None):
        asked.append((repo_id, allow_patterns))
        raise OSError("We couldn't connect to 'https://huggingface.co'\nretry later")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(AdapterError) as failed:
        checkpoint_dir("xinlai/LISA-7B-v1", "lisa", "LISA", "xinlai/LISA-7B-v1", ["*.json", "*.bin"])
    assert asked == [("xinlai/LISA-7B-v1", ["*.json", "*.bin"])]
    assert str(failed.value) == ("lisa: cannot fetch model.checkpoint xinlai/LISA-7B-v1 from the hub and no such "
                                 "directory exists: We couldn't connect to 'https://huggingface.co'")
