"""A full-size meta-device build of our LISA modules holds exactly the parameters of LISA's released
checkpoints, under the names weights.our_key maps them to.

Key lists: tests/data/lisa/*.keys.json, printed by LISA's own LISAForCausalLM (3cb2d430) built on the
meta device from the checkpoint configs (tests/data/lisa/reference/keylist.py), minus the
vision_tower keys LISA's merge script drops. Config values: tests/data/lisa/README.md.
"""
import json
from pathlib import Path

import pytest
import torch

from rvt_bench.adapters.lisa.config import LisaConfig
from rvt_bench.adapters.lisa.model import LisaModel
from rvt_bench.adapters.lisa.weights import our_key, sam_key

DATA = Path(__file__).parent / "data" / "lisa"
CHECKPOINTS = ["lisa-7b-v1", "lisa-13b-llama2-v1"]


def meta_model(name: str) -> LisaModel:
    with torch.device("meta"):
        return LisaModel(LisaConfig.from_json(DATA / f"{name}.config.json"))


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_every_checkpoint_key_maps_to_a_parameter_of_the_same_shape(name):
    keys = json.loads((DATA / f"{name}.keys.json").read_text())["keys"]
    ours = {k: list(v.shape) for k, v in meta_model(name).state_dict().items()}
    mapped = {k: our_key(k) for k in keys}
    assert {k for k, v in mapped.items() if v is None} == {k for k in keys if k.endswith("rotary_emb.inv_freq")}
    wrong = {k: (shape, ours.get(mapped[k])) for k, shape in keys.items() if mapped[k] and ours.get(mapped[k]) != shape}
    assert wrong == {}


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_every_parameter_outside_clip_is_in_the_checkpoint(name):
    keys = json.loads((DATA / f"{name}.keys.json").read_text())["keys"]
    covered = {our_key(k) for k in keys}
    # transformers ties SAM's image-wide positional matrix to the prompt encoder's (one tensor in LISA)
    covered.add("sam.shared_image_embedding.positional_embedding")
    ours = {k for k in meta_model(name).state_dict() if not k.startswith("clip.")}
    assert ours - covered == set()


def test_llama_is_plain_llama_not_transformers_llava():
    model = meta_model("lisa-7b-v1")
    assert type(model.llm).__name__ == "LlamaForCausalLM"
    assert model.llm.config.model_type == "llama" and model.llm.config.vocab_size == 32004


@pytest.mark.parametrize("lisa, hf", [
    ("image_encoder.blocks.3.norm1.weight", "vision_encoder.layers.3.layer_norm1.weight"),
    ("image_encoder.neck.2.weight", "vision_encoder.neck.conv2.weight"),
    ("mask_decoder.output_hypernetworks_mlps.2.layers.1.weight", "mask_decoder.output_hypernetworks_mlps.2.layers.0.weight"),
    ("mask_decoder.output_hypernetworks_mlps.0.layers.2.bias", "mask_decoder.output_hypernetworks_mlps.0.proj_out.bias"),
    ("mask_decoder.iou_prediction_head.layers.0.weight", "mask_decoder.iou_prediction_head.proj_in.weight"),
    ("mask_decoder.transformer.norm_final_attn.bias", "mask_decoder.transformer.layer_norm_final_attn.bias"),
    ("prompt_encoder.pe_layer.positional_encoding_gaussian_matrix", "prompt_encoder.shared_embedding.positional_embedding"),
])
def test_sam_names_follow_transformers_conversion(lisa, hf):
    assert sam_key(lisa) == hf
