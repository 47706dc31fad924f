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


def test_weight_files_reads_an_index_or_a_single_file_else_one_line(tmp_path):
    import json

    from rvt_bench.adapters.lisa.weights import checkpoint_files as lisa_files
    from rvt_bench.adapters.sa2va.weights import checkpoint_files as sa2va_files

    with pytest.raises(AdapterError, match=r"^lisa: no weights in .* \(expected pytorch_model.bin\[.index.json\] or "
                                           r"model.safetensors\[.index.json\]\)$"):
        lisa_files(tmp_path)
    with pytest.raises(AdapterError, match=r"^sa2va: no weights in .* \(expected model.safetensors\[.index.json\]\)$"):
        sa2va_files(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"x")
    assert lisa_files(tmp_path) == [tmp_path / "pytorch_model.bin"]
    with pytest.raises(AdapterError, match="^sa2va: no weights in"):
        sa2va_files(tmp_path)  # Sa2VA's releases are safetensors only
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "b-00002.safetensors", "c": "a-00001.safetensors"}}))
    (tmp_path / "a-00001.safetensors").write_bytes(b"x")
    with pytest.raises(AdapterError, match=r"^sa2va: shard .*b-00002.safetensors named by model.safetensors.index.json "
                                           r"is missing \(1 of 2\)$"):
        sa2va_files(tmp_path)
    (tmp_path / "b-00002.safetensors").write_bytes(b"x")
    assert sa2va_files(tmp_path) == [tmp_path / "a-00001.safetensors", tmp_path / "b-00002.safetensors"]
    assert lisa_files(tmp_path) == sa2va_files(tmp_path)  # an index comes before a single file
    index.write_text("{not json")
    with pytest.raises(AdapterError, match=r"^lisa: cannot read .*model.safetensors.index.json"):
        lisa_files(tmp_path)
