"""The interface of a VLM backend: chat requests with images in, replies out.

Backends (adapters/vlm/openai_chat.py: any OpenAI-compatible multimodal chat server;
adapters/vlm/hf.py: transformers ``AutoModelForImageTextToText``) differ only in how they reach the
model; the adapter (adapters/vlm/adapter.py) builds requests and reads replies. ``BACKENDS`` maps
the names ``model.backend`` takes to their classes, imported lazily.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass

from rvt_bench.adapters.vlm.prompts import Content
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core.types import AdapterError

BACKENDS = {"openai": "rvt_bench.adapters.vlm.openai_chat:OpenAIChatVLM", "hf": "rvt_bench.adapters.vlm.hf:HFVLM"}


@dataclass
class VLMRequest:
    """One chat turn: optional system text, the user content (text and image parts in order),
    and the most tokens the reply may have. turns: earlier turns of a multi-turn conversation
    (("user" | "assistant", Content) in order) between the system text and `content`; () for a
    single turn (every request of the vlm adapter; the sam3_agent loop sends its history)."""

    system: str | None
    content: Content
    max_new_tokens: int
    turns: tuple[tuple[str, Content], ...] = ()


class VLMBackend(ABC):
    """A vision-language model behind chat requests. Loads or connects lazily."""

    name: str
    batch_size: int = 1
    """Requests worth sending together (hf: decoded as one batch; openai: in flight at once)."""
    knows_input_size: bool = False
    """True where replies carry the size each image was processed at (Reply.input_sizes); else the
    adapter checks the server's resize at preflight (rvt_bench.adapters.vlm.calibrate)."""

    @abstractmethod
    def generate(self, requests: list[VLMRequest]) -> list[Reply | AdapterError]:
        """One reply per request, in order; a request that fails gives its AdapterError (naming the
        model and why), so one bad request does not fail the others. Replies must not depend on the
        batch (greedy decoding)."""

    @abstractmethod
    def fingerprint(self) -> dict:
        """Model id, weights revision and decoding settings, JSON-serialisable."""

    def preflight(self) -> None:
        """Load the model or reach the server once; AdapterError naming the setting to fix."""

    def close(self) -> None:
        """Release the model or connection."""


def backend_class(name: str) -> type[VLMBackend]:
    """The class registered under ``name`` in BACKENDS; AdapterError for another name."""
    if name not in BACKENDS:
        raise AdapterError(f"model.backend={name!r}: expected one of {sorted(BACKENDS)}")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)
