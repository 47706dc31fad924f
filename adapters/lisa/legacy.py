"""LISA's legacy (v0) code path: the public v0 checkpoints (xinlai/LISA-13B-llama2-v0 and
-v0-explanatory), which LISA's README (@3cb2d43 line 246) says reproduce the validation rows and
which run only on the legacy code (git checkout 0e26916).

What differs from the v1 path (model.py, prompts.py, weights.py; LISA @3cb2d43), read in LISA @
0e26916dff58c9f2eaad981f127e1171a7c1e3e0 (chat.py, model/LISA.py, model/llava/model/llava.py, utils/conversation.py,
utils/dataset.py ValDataset and collate_fn):

- layout: the directory is a LLaVA language model (``LlavaLlamaForCausalLM``: ``model.*``,
  ``model.mm_projector.*``, ``lm_head.*``; its tokenizer without LISA's tokens) plus
  ``pytorch_model-visual_model.bin`` and ``pytorch_model-text_hidden_fcs.bin`` in the names of
  ``LISA(nn.Module)`` (``visual_model.*``, ``text_hidden_fcs.0.*``, any ``lm.*``), loaded after the
  language model with ``load_state_dict(strict=False)`` (chat.py): a key of those files that is
  not a parameter is ignored, one that is replaces the language model's tensor.
- tokens: chat.py adds "[SEG]" first, then LISA.__init__ <im_patch>, <im_start>, <im_end> (ids in
  that order after the tokenizer's own) and resizes the embeddings to the tokenizer's length.
- prompt: fastchat's ``vicuna_v1.1`` conversation (``get_default_conv_template("vicuna")``: "A
  chat between a curious user ...", ADD_COLON_TWO, sep " ", sep2 "</s>"); the user turn is
  "<image> " + text (a space; v1 writes "<image>\\n"), and <image> is replaced by <im_start>, 256
  <im_patch> and <im_end> in the text, which is tokenised as one string; the features replace the
  256 ids after each <im_start> (llava.py ``LlavaLlamaModel.forward``). CLIP's select layer is -2
  and <im_start>/<im_end> are always used (LISA.__init__ sets both, whatever config.json says).
- decoding: ``self.lm.config.use_cache = False`` makes 4.31's ``generate`` (generation_config
  ``_from_model_config``) run the whole sequence at every step, without a KV cache; the [SEG]
  hidden states are those of that last step (every token but the final one), as in v1.
- eval (ValDataset + collate_fn): the prompt, with "[SEG]." teacher-forced, is tokenised with
  ``truncation=True, max_length=512``: a query longer than 512 tokens minus the template loses its
  answer, hence its [SEG] (an empty mask). chat.py does not truncate.
Unchanged: image preprocessing (CLIP processor, ResizeLongestSide, SAM normalisation and padding;
utils/dataset.py and model/segment_anything/ are the same code), the SAM decoder call, the mask
postprocessing, the [SEG] position rule (the hidden state before each [SEG]).
"""
from __future__ import annotations

import re
from pathlib import Path

from rvt_bench.adapters.lisa import prompts
from rvt_bench.core.types import AdapterError

VISUAL_FILE = "pytorch_model-visual_model.bin"
FCS_FILE = "pytorch_model-text_hidden_fcs.bin"
CODES = ("auto", "v1", "v0")
ADDED_TOKENS = (prompts.SEG_TOKEN, "<im_patch>", prompts.IM_START, prompts.IM_END)
"""chat.py's add_tokens("[SEG]"), then LISA.__init__'s <im_patch>, <im_start>, <im_end>."""
IM_PATCH = "<im_patch>"
EVAL_MAX_LENGTH = 512
"""train_ds.py --model_max_length (512): collate_fn truncates the eval prompt to it."""

SYSTEM_V0 = ("A chat between a curious user and an artificial intelligence assistant. "
             "The assistant gives helpful, detailed, and polite answers to the user's questions.")
ROLES_V0 = ("USER", "ASSISTANT")


def detect(directory: str | Path, code: str = "auto") -> str:
    """"v0" or "v1" for a checkpoint directory: `code` when it is v0 or v1; for "auto", v0 when the
    directory holds pytorch_model-visual_model.bin (the v0 layout), else v1. Raises AdapterError for
    another `code`, or for v0 without the two extra files."""
    if code not in CODES:
        raise AdapterError(f"lisa: model.code must be one of {list(CODES)}, got {code!r}")
    directory = Path(directory)
    if code == "auto":
        code = "v0" if (directory / VISUAL_FILE).is_file() else "v1"
    if code == "v0":
        missing = [f for f in (VISUAL_FILE, FCS_FILE) if not (directory / f).is_file()]
        if missing:
            raise AdapterError(f"lisa: model.code=v0 needs {missing[0]} in {directory} (the v0 layout: a LLaVA model "
                               f"plus {VISUAL_FILE} and {FCS_FILE}); v1 checkpoints take model.code=v1")
    return code


# --- prompt -----------------------------------------------------------------------------------------

def vicuna(messages: list[tuple[str, str]]) -> str:
    """``conv_vicuna_v1_1.get_prompt()`` (utils/conversation.py @0e26916) for (role, message) pairs;
    an empty message opens that role's turn ("ASSISTANT:")."""
    seps = (" ", "</s>")
    out = SYSTEM_V0 + seps[0]
    for i, (role, message) in enumerate(messages):
        out += f"{role}: {message}{seps[i % 2]}" if message else f"{role}:"
    return out


def expand_image(prompt: str) -> str:
    """<image> -> <im_start> + 256 <im_patch> + <im_end> (chat.py, ValDataset)."""
    return prompt.replace(prompts.IMAGE_TOKEN, prompts.IM_START + IM_PATCH * prompts.IMAGE_TOKENS + prompts.IM_END)


def generate_prompt(query: str, template: str = "{query}") -> str:
    """chat.py @0e26916: "<image> " + the typed prompt as the user turn, the assistant turn open."""
    user = prompts.IMAGE_TOKEN + " " + template.format(query=query)
    return expand_image(vicuna([(ROLES_V0[0], user), (ROLES_V0[1], "")]))


def eval_prompt(query: str, is_sentence: bool) -> str:
    """ValDataset @0e26916: the sentence / phrase prompt after "<image> " (stripped query), answer
    "[SEG]." teacher-forced."""
    text = (prompts.EVAL_SENTENCE if is_sentence else prompts.EVAL_PHRASE).format(query=query.strip())
    user = prompts.IMAGE_TOKEN + " " + text
    return expand_image(vicuna([(ROLES_V0[0], user), (ROLES_V0[1], prompts.EVAL_ANSWER)]))


def tokenize(prompt: str, tokenizer, eval_mode: bool) -> list[int]:
    """``tokenizer(prompt).input_ids`` (bos first, the patch tokens as ids); the eval prompt cut to
    EVAL_MAX_LENGTH as collate_fn's ``truncation=True`` cuts it."""
    ids = tokenizer.encode(prompt)
    return ids[:EVAL_MAX_LENGTH] if eval_mode else ids


def answer_text(decoded: str) -> str:
    """chat.py @0e26916's clean-up of a decoded answer: <im_patch> removed, line breaks removed, and
    every double space removed (v1's chat.py turns a double space into one)."""
    return decoded.replace(IM_PATCH, "").replace("\n", "").replace("  ", "")


# --- weights ----------------------------------------------------------------------------------------

def extra_key(key: str) -> str | None:
    """Our parameter name for a key of the two extra files (LISA(nn.Module) names); None for a key
    ``load_state_dict(strict=False)`` would not find in LISA (ignored there, ignored here)."""
    from rvt_bench.adapters.lisa.weights import SKIPPED, our_key, sam_key

    if key.startswith("visual_model."):
        return "sam." + sam_key(key[len("visual_model."):])
    match = re.match(r"text_hidden_fcs\.0\.(\d+)\.(weight|bias)$", key)
    if match:
        return f"text_hidden_fcs.{match.group(1)}.{match.group(2)}"
    if key.startswith("lm.") and not SKIPPED.search(key):
        try:
            name = our_key(key[len("lm."):])
        except AdapterError:
            return None
        return None if name is None or name.startswith(("sam.", "text_hidden_fcs.")) else name
    return None


def load_into(model, directory: str | Path) -> dict[str, list[str]]:
    """Copy a v0 checkpoint into `model` (a LisaModel built with the tokenizer's length as vocab):
    the language-model shards (weights.checkpoint_files), then the two extra files over them, as
    chat.py's ``load_state_dict(strict=False)`` does after ``from_pretrained``; a shard tensor an
    extra file replaces is not read into the model.

    Returns {"skipped": [...], "ignored": [...]} (keys not loaded: rotary/CLIP, and extra-file keys
    that name no parameter). Raises AdapterError for a shape that differs (an embedding table
    smaller than the tokenizer is refused unless an extra file replaces it: LISA would draw the new
    rows at random) and for any parameter left unloaded (LISA's strict=False would keep its random
    initialisation: a v0 file that lacks SAM or text_hidden_fcs weights fails here instead).
    """
    import torch

    from rvt_bench.adapters.lisa.weights import checkpoint_files, finish_load, our_key, read_state_dict

    directory = Path(directory)
    params = {k: v for k, v in model.state_dict().items() if not k.startswith("clip.")}
    extras: dict[str, torch.Tensor] = {}
    ignored: list[str] = []
    for filename in (VISUAL_FILE, FCS_FILE):
        for key, tensor in read_state_dict(directory / filename).items():
            name = extra_key(key)
            if name is None or name not in params:
                ignored.append(key)
                continue
            extras[name] = tensor
    loaded: set[str] = set()
    skipped: list[str] = []

    def put(name: str, tensor, origin: str, key: str) -> None:
        if tuple(params[name].shape) != tuple(tensor.shape):
            hint = (" (LISA would initialise the rows of its added tokens at random; this port refuses)"
                    if name.endswith(("embed_tokens.weight", "lm_head.weight")) else "")
            raise AdapterError(f"lisa: {origin} key {key!r} has shape {list(tensor.shape)}, the model expects "
                               f"{list(params[name].shape)}{hint}")
        with torch.no_grad():
            params[name].copy_(tensor.to(params[name].dtype))
        loaded.add(name)

    for path in checkpoint_files(directory):
        for key, tensor in read_state_dict(path).items():
            name = our_key(key)
            if name is None:
                skipped.append(key)
                continue
            if name in extras:
                continue
            if name not in params:
                raise AdapterError(f"lisa: {path.name} key {key!r} maps to {name!r}, which the model does not have")
            put(name, tensor, path.name, key)
    for name, tensor in extras.items():
        put(name, tensor, "v0 extra file", name)
    finish_load(params, loaded, f"v0 checkpoint {directory}", "; LISA's strict=False load would leave them random")
    return {"skipped": skipped, "ignored": ignored}
