"""The server's image resize, checked against the family's assumption before the first sample.

Qwen2.5-VL writes boxes in absolute pixels of the image *its processor* produced (arXiv
2502.13923, sec. 2.1). The adapter resizes every frame itself (smart_resize with ``model.frames``),
so those pixels are the frame it sent, provided the server's processor keeps it as sent. A server
whose processor has other bounds (vLLM ``--mm-processor-kwargs '{"max_pixels": N}'``, a checkpoint
whose preprocessor_config.json differs from the preset) resizes it again, and every box lands in
the wrong place: IoUs fall and nothing says why. An OpenAI-compatible chat server does not return
the size it used; it does return how many prompt tokens it counted (``usage.prompt_tokens``: vLLM,
SGLang, LMDeploy, Ollama), and a Qwen2/2.5-VL image of h x w pixels is (h / factor) * (w / factor)
tokens (14 px patches merged 2x2: factor 28; transformers ``Qwen2VLImageProcessor``).

The check (``check_input_size``): two requests that differ only in their image, the largest input
this run can send (a square at ``model.frames.max_pixels``) and the smallest (a square at
``min_pixels``), each with a one-token reply. Their prompt tokens differ by the two images' token
counts, the text's cancelling. Any other difference means the server saw another size: the run
stops before its first sample with one line (rvt_bench.core.types.AdapterError) that says the size
the server used and how to fix it. ``model.input_size_check=false`` skips the check by name.

It runs only where it is both needed and sound: for the families whose coordinates are absolute
pixels of the processed input (``TOKENS_PER_IMAGE``), and for backends that cannot read the
processed size back themselves (the hf backend reads Qwen's ``image_grid_thw``:
``VLMBackend.knows_input_size``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest
from rvt_bench.adapters.vlm.frames import smart_resize
from rvt_bench.core.types import AdapterError

TOKENS_PER_IMAGE: dict[str, Callable[[int, int, int], int]] = {
    # Qwen2-VL / Qwen2.5-VL: one token per factor x factor cell of the resized image
    "qwen2_5_vl": lambda h, w, factor: (h // factor) * (w // factor),
}
"""family -> the image tokens its processor gives an (h, w) input already resized to multiples of
``factor`` (the families whose boxes are absolute pixels of that input)."""


@dataclass(frozen=True)
class Probe:
    """The two probe sizes (h, w) of a run and the image tokens the family expects for each."""

    large: tuple[int, int]
    small: tuple[int, int]
    expected_large: int
    expected_small: int


def probe_sizes(family: str, frames: Mapping[str, Any]) -> Probe:
    """The largest and smallest inputs ``frames`` (factor, min_pixels, max_pixels) can produce:
    squares resized by smart_resize, with the tokens ``family`` expects for each."""
    factor, lo, hi = int(frames["factor"]), int(frames["min_pixels"]), int(frames["max_pixels"])
    large = smart_resize(*(2 * [max(factor, math.isqrt(hi))]), factor, lo, hi)
    small = smart_resize(factor, factor, factor, lo, hi)
    tokens = TOKENS_PER_IMAGE[family]
    return Probe(large, small, tokens(*large, factor), tokens(*small, factor))


def _request(hw: tuple[int, int]) -> VLMRequest:
    image = np.full((hw[0], hw[1], 3), 128, np.uint8)  # flat grey: a PNG of a few KB at any size
    return VLMRequest(None, [("text", "Image:"), ("image", image), ("text", "Reply with one word.")], 1)


def check_input_size(backend: VLMBackend, family: str, frames: Mapping[str, Any], what: str) -> dict:
    """Send the two probes of ``probe_sizes`` and compare the server's prompt-token difference with
    the family's. Returns {"large": [h, w], "small": [h, w], "tokens": difference} when they agree;
    AdapterError (one line; ``what`` names the model and server) when the server reports no token
    counts or saw another size."""
    probe = probe_sizes(family, frames)
    replies = backend.generate([_request(probe.large), _request(probe.small)])
    for reply in replies:
        if isinstance(reply, AdapterError):
            raise AdapterError(f"vlm: the input-size check of {what} failed: {reply}")
    counts = [reply.prompt_tokens for reply in replies]  # type: ignore[union-attr]
    if any(c is None for c in counts):
        raise AdapterError(f"vlm: {what} reports no usage.prompt_tokens, so the size its processor resizes images to "
                           f"cannot be checked against model.frames (family {family}: boxes in pixels of that size); "
                           f"model.input_size_check=false runs without the check")
    seen, expected = counts[0] - counts[1], probe.expected_large - probe.expected_small
    if seen != expected:
        factor = int(frames["factor"])
        pixels = (seen + probe.expected_small) * factor * factor
        raise AdapterError(
            f"vlm: {what} turned a {probe.large[0]}x{probe.large[1]} image into {seen + probe.expected_small} image "
            f"tokens (about {pixels} pixels), not the {probe.expected_large} of model.frames (min_pixels="
            f"{frames['min_pixels']}, max_pixels={frames['max_pixels']}): its processor resizes images itself, and "
            f"{family} boxes would be read in the wrong size; set model.frames.max_pixels/min_pixels to the server's, "
            f"or serve with the same bounds (vLLM: --mm-processor-kwargs '{{\"max_pixels\": {frames['max_pixels']}}}')")
    return {"large": list(probe.large), "small": list(probe.small), "tokens": seen}
