"""A loopback OpenAI-compatible multimodal chat server for the VLM adapter's tests: it lists one
model, keeps every request body, and answers chat completions with `reply(body)` (default: a
plausible answer per task, read from the prompt's wording in conf/model/vlm.yaml)."""
from __future__ import annotations

import json
import re

from tests.loopback import JSONHandler, Loopback, RequestLog


def default_reply(body: dict) -> str:
    """Boxes in Qwen2.5-VL pixel coordinates of the first image, or a short text answer."""
    parts = body["messages"][-1]["content"]
    prompt = parts[-1]["text"]
    frames = [int(m.group(1)) for p in parts if p["type"] == "text" for m in [re.fullmatch(r"Frame (\d+):", p["text"])] if m]
    frame = {"frame": frames[len(frames) // 2]} if frames else {}
    if "point_2d" in prompt:
        return json.dumps([{"bbox_2d": [20, 20, 120, 100], "point_2d": [70, 60], **frame}])
    if "bbox_2d" in prompt:
        return json.dumps([{"bbox_2d": [10, 10, 150, 120], "frame": t} for t in frames] or [{"bbox_2d": [10, 10, 150, 120]}])
    return "<think>looking</think>A small object moves."


class ChatServer(RequestLog):
    """Serves GET /v1/models and POST /v1/chat/completions on 127.0.0.1; url = ".../v1"."""

    def __init__(self, model: str = "tiny-vlm", reply=default_reply, finish_reason: str = "stop", prompt_tokens=None):
        """prompt_tokens: body -> the usage.prompt_tokens to report (None: no usage block at all);
        default: 1 for every request. `qwen_prompt_tokens` counts as a Qwen2.5-VL server does."""
        self.model, self.reply, self.finish_reason = model, reply, finish_reason
        count = prompt_tokens if prompt_tokens is not None else (lambda body: 1)
        RequestLog.__init__(self)
        server = self

        class Handler(JSONHandler):
            def do_GET(self):
                self.send_json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})

            def do_POST(self):
                body = self.read_json()
                status = server.take(body)
                if status != 200:
                    return self.send_json(status, {"error": {"message": f"injected {status}", "type": "server_error"}})
                text = server.reply(body)
                tokens = count(body)
                usage = {} if tokens is None else {"usage": {"prompt_tokens": tokens, "completion_tokens": len(text.split()),
                                                             "total_tokens": tokens + len(text.split())}}
                self.send_json(200, {
                    "id": "chat-1", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": server.finish_reason}], **usage})

        self.loopback = Loopback(Handler)
        self.url = self.loopback.root + "/v1"

    def close(self) -> None:
        self.loopback.close()


def qwen_prompt_tokens(min_pixels: int = 3136, max_pixels: int = 12845056):
    """body -> prompt tokens as a Qwen2.5-VL server counts them: each image through transformers'
    own Qwen2VLImageProcessor with these bounds (its image_grid_thw / merge_size**2 tokens, plus the
    two vision markers), each text part one token per 4 characters (any count the images do not
    change would do)."""
    import base64
    import io

    import numpy as np
    from PIL import Image
    from transformers import Qwen2VLImageProcessor

    processor = Qwen2VLImageProcessor(min_pixels=min_pixels, max_pixels=max_pixels)

    def count(body: dict) -> int:
        total = 0
        for message in body["messages"]:
            parts = message["content"] if isinstance(message["content"], list) else [{"type": "text", "text": message["content"]}]
            for part in parts:
                if part["type"] == "text":
                    total += 1 + len(part["text"]) // 4
                    continue
                data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                image = np.array(Image.open(io.BytesIO(data)).convert("RGB"))
                grid = processor(images=[image], return_tensors="np")["image_grid_thw"][0]
                total += 2 + int(np.prod(grid)) // processor.merge_size ** 2
        return total

    return count
