"""A LISA checkpoint's files and the names of its parameters in our modules.

A released checkpoint (xinlai/LISA-7B-v1, xinlai/LISA-13B-llama2-v1) holds ``pytorch_model.bin``
or ``pytorch_model-0000i-of-0000n.bin`` shards with ``pytorch_model.bin.index.json`` (safetensors
are read too), in LISA's names: ``model.*`` / ``lm_head.*`` (LLaMA), ``model.mm_projector.*``,
``model.text_hidden_fcs.0.{0,2}.*`` and ``model.visual_model.*`` (SAM ViT-H). CLIP is not inside:
LISA's merge script drops every ``vision_tower`` key, and CLIP loads from ``config.vision_tower``.

SAM names map to transformers' ``SamModel`` by the rules of transformers' own conversion script
(models/sam/convert_sam_to_hf.py, ``KEYS_TO_MODIFY_MAPPING`` and the hypernetwork MLP rule).
"""
from __future__ import annotations

import re
from pathlib import Path

from rvt_bench.adapters.checkpoint import weight_files
from rvt_bench.core.types import AdapterError

SAM_RULES = (
    ("iou_prediction_head.layers.0", "iou_prediction_head.proj_in"),
    ("iou_prediction_head.layers.1", "iou_prediction_head.layers.0"),
    ("iou_prediction_head.layers.2", "iou_prediction_head.proj_out"),
    ("mask_decoder.output_upscaling.0", "mask_decoder.upscale_conv1"),
    ("mask_decoder.output_upscaling.1", "mask_decoder.upscale_layer_norm"),
    ("mask_decoder.output_upscaling.3", "mask_decoder.upscale_conv2"),
    ("mask_downscaling.0", "mask_embed.conv1"),
    ("mask_downscaling.1", "mask_embed.layer_norm1"),
    ("mask_downscaling.3", "mask_embed.conv2"),
    ("mask_downscaling.4", "mask_embed.layer_norm2"),
    ("mask_downscaling.6", "mask_embed.conv3"),
    ("point_embeddings", "point_embed"),
    ("pe_layer.positional_encoding_gaussian_matrix", "shared_embedding.positional_embedding"),
    ("image_encoder", "vision_encoder"),
    ("neck.0", "neck.conv1"),
    ("neck.1", "neck.layer_norm1"),
    ("neck.2", "neck.conv2"),
    ("neck.3", "neck.layer_norm2"),
    ("patch_embed.proj", "patch_embed.projection"),
    (".norm", ".layer_norm"),
    ("blocks", "layers"),
)
_HYPER = re.compile(r".*\.output_hypernetworks_mlps\.(\d+)\.layers\.(\d+).*")
_HYPER_LAYERS = {"0": "proj_in", "1": "layers.0", "2": "proj_out"}
SKIPPED = re.compile(r"(rotary_emb\.inv_freq$|vision_tower)")
"""Keys LISA's checkpoints may hold that we do not load: rotary inverse frequencies (recomputed by
LlamaRotaryEmbedding from the config) and any CLIP copy (CLIP loads from config.vision_tower)."""


def sam_key(key: str) -> str:
    """One SAM state-dict key (without ``model.visual_model.``) in transformers' SamModel names."""
    for old, new in SAM_RULES:
        if old in key:
            key = key.replace(old, new)
    match = _HYPER.match(key)
    if match:
        key = key.replace(f"layers.{match.group(2)}", _HYPER_LAYERS[match.group(2)])
    return key


def our_key(key: str) -> str | None:
    """Our parameter name (rvt_bench.adapters.lisa.model.LisaModel) for a LISA checkpoint key; None for a
    key we skip (SKIPPED). Raises AdapterError for a key no rule knows."""
    if SKIPPED.search(key):
        return None
    if key.startswith("model.visual_model."):
        return "sam." + sam_key(key[len("model.visual_model."):])
    if key.startswith("model.mm_projector."):
        return "mm_projector." + key[len("model.mm_projector."):]
    match = re.match(r"model\.text_hidden_fcs\.0\.(\d+)\.(weight|bias)$", key)
    if match:
        return f"text_hidden_fcs.{match.group(1)}.{match.group(2)}"
    if key.startswith("model.") or key.startswith("lm_head."):
        return "llm." + key
    raise AdapterError(f"lisa: checkpoint key {key!r} is not a LISA parameter")


def checkpoint_files(directory: str | Path) -> list[Path]:
    """The weight files of a checkpoint directory: the shards an index names, or the single file.
    Raises AdapterError naming the directory and what was expected (or the missing shard)."""
    return weight_files(directory, "lisa", ("pytorch_model.bin", "model.safetensors"))


def read_state_dict(path: Path) -> dict:
    """One weight file's tensors (CPU). .bin files are read with ``weights_only=True``."""
    import torch

    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    return torch.load(str(path), map_location="cpu", weights_only=True)


def load_into(model, directory: str | Path) -> dict[str, list[str]]:
    """Copy a LISA checkpoint's tensors into ``model`` (a LisaModel; CLIP excluded), shard by
    shard so that memory holds one shard at a time.

    Returns {"skipped": [...]} (keys of SKIPPED). Raises AdapterError naming the first parameter the
    checkpoint lacks, or a shape that differs.
    """
    import torch

    params = {k: v for k, v in model.state_dict().items() if not k.startswith("clip.")}
    loaded: set[str] = set()
    skipped: list[str] = []
    for path in checkpoint_files(directory):
        for key, tensor in read_state_dict(path).items():
            name = our_key(key)
            if name is None:
                skipped.append(key)
                continue
            if name not in params:
                raise AdapterError(f"lisa: {path.name} key {key!r} maps to {name!r}, which the model does not have")
            if tuple(params[name].shape) != tuple(tensor.shape):
                raise AdapterError(f"lisa: {path.name} key {key!r} has shape {list(tensor.shape)}, the model expects {list(params[name].shape)}")
            with torch.no_grad():
                params[name].copy_(tensor.to(params[name].dtype))
            loaded.add(name)
    finish_load(params, loaded, f"checkpoint {directory}")
    return {"skipped": skipped}


def finish_load(params: dict, loaded: set[str], what: str, why: str = "") -> None:
    """The end of a load (v1 here, v0 in legacy.py): SAM's one positional matrix tied, then every
    parameter of ``params`` required in ``loaded``. Raises AdapterError "lisa: <what> lacks <first>
    (<n> parameters missing<why>)"."""
    import torch

    # SAM's one positional matrix: the prompt encoder's is also the model-wide image one
    # (transformers ties the two; copied explicitly in case a device move untied them)
    shared, image_wide = "sam.prompt_encoder.shared_embedding.positional_embedding", "sam.shared_image_embedding.positional_embedding"
    if shared in loaded and image_wide in params:
        with torch.no_grad():
            params[image_wide].copy_(params[shared])
        loaded.add(image_wide)
    missing = sorted(set(params) - loaded)
    if missing:
        raise AdapterError(f"lisa: {what} lacks {missing[0]!r} ({len(missing)} parameters missing{why})")
