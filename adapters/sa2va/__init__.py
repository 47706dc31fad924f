"""Sa2VA (magic-research/Sa2VA, "Marrying SAM2 with LLaVA for Dense Grounded Understanding of
Images and Videos", arXiv 2501.04001) on transformers and sam2 building blocks, loading the
released checkpoints (ByteDance/Sa2VA-1B/-4B, InternVL2.5 + Qwen2) without trust_remote_code.

One job per module: config.py (the checkpoint's config.json), vit.py (InternViT, the vision
tower), sam.py (SAM2 from the sam2 package, and the language-prompted mask head),
preprocess.py (InternVL tiles, SAM2 input), prompts.py (template, image tokens), weights.py
(safetensors names -> our parameters), model.py (the network and its forward pass), adapter.py
(the Adapter a run instantiates).
Reference: Sa2VA commit d01bf3fa8ee239325a007e7b64ee2fd22578b045, projects/llava_sam2/hf/models/
(modeling_sa2va_chat.py ``predict_forward``, sam2.py, modeling_intern_vit.py, templates.py).
"""
