"""Parameter names/shapes of LISA's own LISAForCausalLM (dvlab-research/LISA 3cb2d430), built on the meta
device from a checkpoint config.json, minus vision_tower keys (merge_lora_weights_and_save_hf_model.py
drops them before save_pretrained). Usage: python keylist.py CONFIG.json SEG_ID OUT.json"""
import json, sys
import torch
from transformers import AutoConfig
from model.LISA import LISAForCausalLM

cfg_path, seg, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cfg = AutoConfig.from_pretrained(cfg_path)  # model_type llava registered by LISA's llava_llama
cfg.vision_tower = cfg.mm_vision_tower = "/tmp/clipL"  # offline: CLIP-L/14 config only (its keys are dropped)
with torch.device("meta"):
    model = LISAForCausalLM(cfg, seg_token_idx=seg, vision_tower="/tmp/clipL")
keys = {k: list(v.shape) for k, v in model.state_dict().items() if "vision_tower" not in k}
json.dump({"source": "dvlab-research/LISA@3cb2d4301f1af4691bd4f3938335ef06e76f155a model/LISA.py::LISAForCausalLM, meta device, state_dict() minus vision_tower", "config": cfg_path.split("/")[-1], "keys": keys}, open(out, "w"), indent=0, sort_keys=True)
print(len(keys), sum(1 for k in keys if k.startswith("model.visual_model")))
