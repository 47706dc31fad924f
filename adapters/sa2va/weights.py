"""A Sa2VA checkpoint's files and its tensors in our modules.

A released checkpoint (ByteDance/Sa2VA-1B, -4B) holds ``model-0000i-of-0000n.safetensors`` shards
with ``model.safetensors.index.json`` (or one ``model.safetensors``), in the names of the
authors' ``Sa2VAChatModel``: ``vision_model.*`` (InternViT), ``mlp1.{0,1,3}.*``,
``language_model.model.*`` / ``language_model.lm_head.*`` (Qwen2), ``text_hidden_fcs.{0,2}.*`` and
``grounding_encoder.sam2_model.*`` (SAM2). Our modules (model.Sa2VAModel) use the same names but
one: the memory encoder's CXBlock layer scale, ``g_weight`` in Sa2VA's sam2.py (transformers 4.x
would rename a parameter called ``gamma`` on load), ``gamma`` in the sam2 package. A key we do not
have stops the load with one line naming it.
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.adapters.checkpoint import weight_files
from rvt_bench.core.types import AdapterError


import re

_GAMMA = re.compile(r"(memory_encoder\.fuser\.layers\.\d+\.)g_weight$")
_G_WEIGHT = re.compile(r"(memory_encoder\.fuser\.layers\.\d+\.)gamma$")


def our_key(key: str) -> str:
    """Our parameter name for a released checkpoint key."""
    return _GAMMA.sub(r"\1gamma", key)


def released_key(name: str) -> str:
    """The released checkpoint's key for one of our parameter names (inverse of our_key)."""
    return _G_WEIGHT.sub(r"\1g_weight", name)


def checkpoint_files(directory: str | Path) -> list[Path]:
    """The safetensors files of a checkpoint directory: the shards its index names, or the single
    file. Raises AdapterError naming the directory and what was expected (or the missing shard)."""
    return weight_files(directory, "sa2va", ("model.safetensors",))


def load_into(model, directory: str | Path) -> None:
    """Copy a Sa2VA checkpoint's tensors into ``model`` (a Sa2VAModel), shard by shard.

    Raises AdapterError naming the first key the model does not have, a shape that differs, or the
    first parameter the checkpoint lacks. A checkpoint without ``language_model.lm_head.weight``
    whose llm_config ties word embeddings gets the input embeddings there."""
    import torch
    from safetensors.torch import load_file

    params = model.state_dict()
    loaded: set[str] = set()
    for path in checkpoint_files(directory):
        for released, tensor in load_file(str(path)).items():
            key = our_key(released)
            if key not in params:
                raise AdapterError(f"sa2va: {path.name} key {released!r} is not a Sa2VA parameter this port knows")
            if tuple(params[key].shape) != tuple(tensor.shape):
                raise AdapterError(f"sa2va: {path.name} key {released!r} has shape {list(tensor.shape)}, the model expects {list(params[key].shape)}")
            with torch.no_grad():
                params[key].copy_(tensor.to(params[key].dtype))
            loaded.add(key)
    head, table = "language_model.lm_head.weight", "language_model.model.embed_tokens.weight"
    if head not in loaded and table in loaded and model.config.llm.get("tie_word_embeddings"):
        with torch.no_grad():
            params[head].copy_(params[table])
        loaded.add(head)
    missing = sorted(k for k in set(params) - loaded if not k.endswith("rotary_emb.inv_freq") and not k.endswith("rotary_emb.original_inv_freq"))
    if missing:
        raise AdapterError(f"sa2va: checkpoint {directory} lacks {missing[0]!r} ({len(missing)} parameters missing)")
