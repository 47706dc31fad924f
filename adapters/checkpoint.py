"""What the adapters that port a released checkpoint onto our modules share (LISA, Sa2VA): the
device / dtype a setting resolves to, and the checkpoint's config.json read with one-line errors."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError


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
