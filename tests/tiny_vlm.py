"""A tiny random-weight Qwen2.5-VL checkpoint on disk, for the VLM adapter's hf backend:
the model and processor of rvt_bench.adapters.twin.backends.qwen_vl.QwenVLBackend.tiny (1 text layer 32 wide,
1 vision block 16 wide, a local byte-level BPE tokenizer with Qwen's special tokens and a Qwen-style
chat template, images at 56..112 px per side) saved with save_pretrained, so that
AutoModelForImageTextToText / AutoProcessor load it as they load a hub checkpoint. Nothing is
downloaded.

    python -m tests.tiny_vlm DIR      # writes the checkpoint (for a CPU smoke run of +model=vlm)
"""
from __future__ import annotations

from pathlib import Path


def build_tiny_vlm(directory: str | Path, seed: int = 0) -> Path:
    """Write the checkpoint into ``directory`` and return it."""
    from rvt_bench.adapters.twin.backends.qwen_vl import QwenVLBackend

    directory = Path(directory)
    model, processor = QwenVLBackend.tiny(seed=seed, device="cpu").components()
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.tiny_vlm", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the checkpoint's directory (created)")
    print(build_tiny_vlm(ap.parse_args().dir))
