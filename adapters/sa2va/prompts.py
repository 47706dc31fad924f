"""Sa2VA's prompt text: the chat template, the image tokens and the evaluation prompts.

Source: Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045: hf/models/templates.py (``qwen_chat``),
modeling_sa2va_chat.py ``predict_forward`` (image token string, no system message, round 1),
evaluation/dataset/RES.py (images: "<image>\\n Please segment {} in this image.") and
evaluation/dataset/refVOS.py (videos: ``SEG_PROMPT = "<image>\\nPlease segment {}."``).
"""
from __future__ import annotations

from rvt_bench.core.types import AdapterError

SEG_TOKEN = "[SEG]"
IMG_CONTEXT, IMG_START, IMG_END = "<IMG_CONTEXT>", "<img>", "</img>"
IMAGE_PROMPT = "<image>\n Please segment {query} in this image."
VIDEO_PROMPT = "<image>\nPlease segment {query}."
TEMPLATES = {
    "qwen_chat": {"INSTRUCTION": "<|im_start|>user\n{input}<|im_end|>\n<|im_start|>assistant\n",
                  "STOP_WORDS": ["<|im_end|>", "<|endoftext|>"]},
}


def template(name: str) -> dict:
    if name not in TEMPLATES:
        raise AdapterError(f"sa2va: chat template {name!r} (config.json template) is not ported; known: {sorted(TEMPLATES)}")
    return TEMPLATES[name]


def build_prompt(text: str, tokens_per_frame: int, n_frames: int, template_name: str = "qwen_chat") -> str:
    """The full input text: "<image>" in `text` replaced by n_frames lines of
    "<img>" + "<IMG_CONTEXT>" * tokens_per_frame + "</img>" (stripped), in the user turn."""
    if "<image>" not in text:
        raise AdapterError(f"sa2va: a prompt must contain '<image>', got {text!r}")
    image = ((IMG_START + IMG_CONTEXT * tokens_per_frame + IMG_END + "\n") * n_frames).strip()
    return template(template_name)["INSTRUCTION"].format(input=text.replace("<image>", image), round=1, bot_name="BOT")
