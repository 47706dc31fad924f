"""What the adapters that port a released checkpoint onto our modules share (LISA, Sa2VA): the
device / dtype a setting resolves to, and the checkpoint's config.json read with one-line errors."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError, first_line


def device_dtype(device: str, dtype: str) -> tuple[str, str]:
    """(device, dtype name) for the settings: device "auto" -> "cuda" when torch sees a GPU, else
    "cpu"; dtype "auto" -> "float32" on the CPU, "bfloat16" elsewhere (the authors' GPU default);
    any other value is returned as given."""
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        dtype = "float32" if device == "cpu" else "bfloat16"
    return device, dtype


def read_config_json(path: str | Path, model: str, label: str) -> dict[str, Any]:
    """The JSON object of a checkpoint's config.json at `path`. Raises AdapterError, prefixed with
    the adapter's name `model` ("lisa") and naming its checkpoints by `label` ("LISA"), when the
    file is missing or is not valid JSON."""
    path = Path(path)
    if not path.is_file():
        raise AdapterError(f"{model}: {path} is missing (a {label} checkpoint directory holds config.json)")
    try:
        return files.loads(files.read_text(path, f"{model} config"), str(path), duplicates="last")
    except (OSError, DatasetFormatError) as exc:
        raise AdapterError(f"{model}: {path} is not valid JSON ({exc})") from exc


def checkpoint_dir(checkpoint: str, model: str, label: str, example: str, patterns: list[str]) -> Path:
    """The local directory of `checkpoint`: itself when it is a directory, else the hub snapshot of
    that id (only the files matching `patterns`). Raises AdapterError, prefixed with `model`, for a
    path that is no directory (`label` and the hub id `example` say what was expected) and for a
    hub id that cannot be fetched."""
    path = Path(checkpoint)
    if path.is_dir():
        return path
    if path.exists() or checkpoint.startswith((".", "/")) or checkpoint.count("/") != 1:
        raise AdapterError(f"{model}: model.checkpoint {checkpoint} is not a directory (expected a {label} checkpoint "
                           f"directory or a hub id such as {example})")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(checkpoint, allow_patterns=patterns))
    except Exception as exc:  # hub/network errors come in many types; one line names the setting
        raise AdapterError(f"{model}: cannot fetch model.checkpoint {checkpoint} from the hub and no such directory "
                           f"exists: {first_line(exc)}") from exc


def weight_files(directory: str | Path, model: str, singles: tuple[str, ...]) -> list[Path]:
    """The weight files of a checkpoint directory: the shards the first `<single>.index.json` found
    names (in `singles` order), else the first single file present. Raises AdapterError, prefixed with
    `model`, for an unreadable index, a missing shard, or a directory holding none of them."""
    directory = Path(directory)
    for single in singles:
        index = directory / f"{single}.index.json"
        if index.is_file():
            try:
                shards = sorted(set(files.loads(files.read_text(index, "checkpoint index"), str(index))["weight_map"].values()))
            except (OSError, DatasetFormatError, KeyError, TypeError, AttributeError) as exc:
                raise AdapterError(f"{model}: cannot read {index} ({exc})") from exc
            missing = [s for s in shards if not (directory / s).is_file()]
            if missing:
                raise AdapterError(f"{model}: shard {directory / missing[0]} named by {index.name} is missing "
                                   f"({len(missing)} of {len(shards)})")
            return [directory / s for s in shards]
    for single in singles:
        if (directory / single).is_file():
            return [directory / single]
    expected = " or ".join(f"{single}[.index.json]" for single in singles)
    raise AdapterError(f"{model}: no weights in {directory} (expected {expected})")
