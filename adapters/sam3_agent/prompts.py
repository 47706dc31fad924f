"""SAM 3 Agent's prompts: the two system prompts, read from the user's copy of facebookresearch/sam3,
and the loop's own messages, written here as the repository writes them.

System prompts (sam3/agent/system_prompts/system_prompt.txt, the agent's; ..._iterative_checking.txt,
examine_each_mask's per-mask verdict) are not shipped: they are SAM Materials under the SAM License,
whose redistribution binds the recipient to that agreement. They are read from `prompts_dir`, by
default the installed `sam3` package's agent/system_prompts/ (found without importing sam3), and
stripped as agent_core.agent_inference strips them. Their sha256 at the reference commit is
REFERENCE_SHA256; a different copy is used as given and its digest recorded in the fingerprint.

The message texts below are agent_core.py's f-strings at facebookresearch/sam3
99d02f28c8d34610ab35559b72642b01f10fdb1e (line numbers of that file).
"""
from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, RvtBenchError

REFERENCE_COMMIT = "99d02f28c8d34610ab35559b72642b01f10fdb1e"
FILES = {"agent": "system_prompt.txt", "checking": "system_prompt_iterative_checking.txt"}
REFERENCE_SHA256 = {"agent": "aa28b5af9e2f979fdda0cfc9e681ccd014604ec24dac3b3d32387a63c694720d",
                    "checking": "ef96da82cd24572e743e3000d78e7b466777850d41396d5fadb0c1f74d1ce253"}
# A wheel of facebookresearch/sam3 (`pip install git+...`) holds no system_prompts/*.txt (its
# pyproject's package-data is assets/*.txt.gz alone), and its numpy==1.26 pin would downgrade ours:
# the prompts are taken from a clone.
INSTALL = ("git clone https://github.com/facebookresearch/sam3 and pass "
           "model.prompts_dir=<the clone>/sam3/agent/system_prompts (a pip-installed sam3 lacks these files)")


@dataclass(frozen=True)
class ImageRef:
    """An image in the conversation: `label` names it in the trace ("raw", "masks <text_prompt>",
    "mask 2", "zoom 2", "kept 1-3"), `pixels` is its (H, W, 3) uint8 RGB array (not compared)."""

    label: str
    pixels: Any = field(compare=False, repr=False, default=None)


def default_dir() -> Path | None:
    """sam3/agent/system_prompts of the installed `sam3` package, None when it is not installed."""
    try:
        spec = importlib.util.find_spec("sam3")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "agent" / "system_prompts"


def load(prompts_dir: str | None) -> dict[str, str]:
    """{"agent": the agent's system prompt, "checking": examine_each_mask's}, each stripped.
    prompts_dir: a directory holding FILES' names; None = default_dir(). Raises AdapterError (one
    line: install sam3 or set model.prompts_dir) when a file is missing or unreadable."""
    directory = Path(prompts_dir) if prompts_dir else default_dir()
    if directory is None:
        raise AdapterError(f"sam3_agent: SAM 3 Agent's system prompts come from facebookresearch/sam3 and are not "
                           f"shipped (SAM License): {INSTALL}")
    out = {}
    for key, name in FILES.items():
        path = directory / name
        try:
            out[key] = files.read_text(path, "SAM 3 Agent system prompt", max_mb=1.0).strip()
        except (OSError, RvtBenchError) as exc:
            raise AdapterError(f"sam3_agent: cannot read {path} ({type(exc).__name__}); model.prompts_dir must hold "
                               f"sam3/agent/system_prompts/{name} of facebookresearch/sam3: {INSTALL}") from exc
    return out


def digests(prompts: dict[str, str]) -> dict[str, str]:
    """sha256 of each stripped system prompt (compare REFERENCE_SHA256)."""
    return {key: hashlib.sha256(text.encode("utf-8")).hexdigest() for key, text in prompts.items()}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def image(ref: ImageRef) -> dict:
    return {"type": "image", "image": ref}


def initial_user(raw: ImageRef, query: str) -> dict:
    """The first user turn (agent_core.py 184-193)."""
    return {"role": "user", "content": [image(raw), text(
        f"The above image is the raw input image. The initial user input query is: '{query}'.")]}


def warned_user(raw: ImageRef, query: str, previously_used: list) -> dict:
    """The first user turn with the used-prompts warning (_prune_messages_for_next_round, 101-112)."""
    warning = (f'Note that we have previously called the segment_phrase tool with each "text_prompt" in this list: '
               f'{list(previously_used)}, but none of the generated results were satisfactory. So make sure that you do '
               f'not use any of these phrases as the "text_prompt" to call the segment_phrase tool again.')
    return {"role": "user", "content": [image(raw), text(
        f"The above image is the raw input image. The initial user input query is: '{query}'." + " " + warning)]}


def assistant(reply: str) -> dict:
    return {"role": "assistant", "content": [text(reply)]}


def user(*parts: dict) -> dict:
    return {"role": "user", "content": list(parts)}


def duplicate_prompt(prompt: Any, used: list) -> str:
    """A text_prompt used before (238)."""
    return (f"You have previously used '{prompt}' as your text_prompt to call the segment_phrase tool. You may not use "
            f"it again. Please call the segment_phrase tool again with a different, perhaps more general, or more "
            f"creative simple noun phrase prompt, while adhering to all the rules stated in the system prompt. You must "
            f"also never use any of the following text_prompt(s): {str(list(used))}.")


def no_masks(prompt: Any, query: str) -> str:
    """segment_phrase found nothing (272)."""
    return (f"The segment_phrase tool did not generate any masks for the text_prompt '{prompt}'. Now, please call the "
            f"segment_phrase tool again with a different, perhaps more general, or more creative simple noun phrase "
            f"text_prompt, while adhering to all the rules stated in the system prompt. Please be reminded that the "
            f"original user query was '{query}'.")


def masks_found(n: int, query: str) -> str:
    """segment_phrase's n masks, rendered in the image after this text (282)."""
    return (f"The segment_phrase tool generated {n} available masks. All {n} available masks are rendered in this "
            f"image below, now you must analyze the {n} available mask(s) carefully, compare them against the raw input "
            f"image and the original user query, and determine your next action. Please be reminded that the original "
            f"user query was '{query}'.")


SIMPLIFIED = ("The segment_phrase tool generated several masks. Now you must analyze the mask(s) carefully, compare them "
              "against the raw input image and the original user query, and determine your next action.")
"""What replaces segment_phrase's result turn when examine_each_mask runs (305-311)."""


def checking_messages(system: str, raw: ImageRef, query: str, mask: ImageRef, zoom: ImageRef) -> list[dict]:
    """examine_each_mask's request for one mask (333-362)."""
    return [{"role": "system", "content": system}, user(
        text("The raw input image: "), image(raw), text(f"The initial user input query is: '{query}'"),
        text("Image with the predicted segmentation mask rendered on it: "), image(mask),
        text("Image with the zoomed-in mask: "), image(zoom))]


def all_rejected(query: str) -> str:
    """examine_each_mask kept no mask (419)."""
    return (f"The original user query was: '{query}'. The examine_each_mask tool examined and rejected all of the masks "
            f"generated by the segment_phrase tool. Now, please call the segment_phrase tool again with a different, "
            f"perhaps more general, or more creative simple noun phrase text_prompt, while adhering to all the rules "
            f"stated in the system prompt.")


def some_kept(n: int, query: str) -> str:
    """examine_each_mask kept n masks, rendered in the image after this text (431)."""
    return (f"The original user query was: '{query}'. After calling the examine_each_mask tool on the available masks, "
            f"the number of available masks is now {n}. All {n} available masks are rendered in this image below, now "
            f"you must analyze the {n} available mask(s) carefully, compare them against the raw input image and the "
            f"original user query, and determine your next action.")
