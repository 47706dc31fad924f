"""A tiny random-weight Qwen2.5-VL checkpoint on disk with the real model's processor settings and
chat template, shared by run_segzero_generation.py (the authors' code) and
tests/test_segzero_generation.py (the port), so both load the very same files.

What is Qwen2.5-VL-7B-Instruct's (and so Seg-Zero-7B's / VisionReasoner-7B's, which keep the base
model's processor): the chat template (its default system turn, its image parts), the image
processor (patch 14, merge 2, min_pixels 3136, max_pixels 12845056, CLIP mean/std), the generation
config (eos <|im_end|> and <|endoftext|>, pad <|endoftext|>, repetition_penalty 1.05), the
tokenizer's special tokens and clean_up_tokenization_spaces false. What is tiny: 2 text layers 64
wide, 2 vision blocks 32 wide, a byte-level BPE vocabulary of about 700 tokens trained here on the
prompts. The weights are seeded and drawn wider than the default init (std 0.5 embeddings and head)
so that greedy decoding writes varied tokens instead of one repeated token. Deterministic: the same
seed writes the same files (``weights_digest`` checks it).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

# Qwen2.5-VL-7B-Instruct's chat_template (the checkpoint's data, needed to build a like checkpoint)
QWEN25VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: "
    "{% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>", "<|box_start|>", "<|box_end|>"]
CORPUS = [
    "Please find the object with bbox and points. Compare the difference between objects and find the most closely "
    "matched one. Output the thinking process in <think> </think> and final answer in <answer> </answer> tags.",
    "Output the bbox(es) and point(s) inside the interested object(s) in JSON format. i.e., <think> thinking process "
    "here </think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}]</answer>",
    "{'bbox': [10,100,200,210], 'points_1': [30,110], 'points_2': [35,180]} 0123456789 , . : ; ? ! \" '",
    "You are a helpful assistant. what is the thing that people sit on when they are tired of standing",
    "the red cup on the left of the table, the dog, a person who walks, the largest window",
]


def build_checkpoint(directory: str | Path, seed: int = 0) -> Path:
    """Write the tiny checkpoint (model, processor, generation config) into ``directory``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (GenerationConfig, PreTrainedTokenizerFast, Qwen2_5_VLConfig,
                              Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor, Qwen2VLImageProcessor,
                              Qwen2VLVideoProcessor)

    directory = Path(directory)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        clean_up_tokenization_spaces=False, padding_side="left")
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL[1:]})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL}
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"], tie_word_embeddings=False),
        vision_config=dict(depth=2, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=64,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                           fullatt_block_indexes=[1]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            std = 1.0 if ("embed_tokens" in name or "lm_head" in name) else 0.2
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=generator) * std)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], pad_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], repetition_penalty=1.05)
    image_processor = Qwen2VLImageProcessor(min_pixels=3136, max_pixels=12845056, patch_size=14, merge_size=2,
                                            temporal_patch_size=2)
    processor = Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                    video_processor=Qwen2VLVideoProcessor(), chat_template=QWEN25VL_CHAT_TEMPLATE)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def weights_digest(model) -> str:
    """SHA-256 (16 hex) of the model's parameters as float32 bytes, in name order."""
    import torch

    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


if __name__ == "__main__":
    import sys

    print(build_checkpoint(sys.argv[1]))
