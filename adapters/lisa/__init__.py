"""LISA (dvlab-research/LISA, "Reasoning Segmentation via Large Language Model") on transformers
building blocks: CLIPVisionModel + a linear projector + LlamaForCausalLM + text_hidden_fcs + SamModel.

One job per module: config.py (checkpoint config.json), tokenizer.py (the LLaMA sentencepiece
tokenizer as LISA's transformers 4.31 runs it), prompts.py (conversation templates, image token),
weights.py (checkpoint files and LISA -> our parameter names), preprocess.py (CLIP and SAM inputs),
model.py (the network and its forward passes), adapter.py (the Adapter a run instantiates),
legacy.py (the v0 checkpoints on LISA's legacy code: layout, vicuna prompt, weight loading).
Reference: LISA commit 3cb2d4301f1af4691bd4f3938335ef06e76f155a (model/LISA.py, chat.py,
utils/dataset.py, train_ds.py); for v0, LISA commit 0e26916dff58c9f2eaad981f127e1171a7c1e3e0.
"""
