"""LISA's prompts: the llava_v1 conversation, the image placeholder, and the two prompting paths.

Sources (LISA 3cb2d4301f1af4691bd4f3938335ef06e76f155a): model/llava/conversation.py
(``conv_llava_v1``: SeparatorStyle.TWO, sep " ", sep2 "</s>"), utils/utils.py (image tokens),
chat.py (the generated-answer path), utils/dataset.py ``ValDataset.__getitem__`` (the evaluation
prompt, with its answer "[SEG]." teacher-forced) and collate_fn (<image> -> <im_start><image><im_end>),
model/llava/mm_utils.py ``tokenizer_image_token`` (<image> -> IMAGE_TOKEN_INDEX).
"""
from __future__ import annotations

IMAGE_TOKEN_INDEX = -200
IMAGE_TOKEN = "<image>"
IM_START, IM_END = "<im_start>", "<im_end>"
SEG_TOKEN = "[SEG]"
IMAGE_TOKENS = 256
"""CLIP ViT-L/14 at 224: (224 / 14) ** 2 patch features replace the one <image> id, so every
position after the image moves by IMAGE_TOKENS - 1 = 255 (LISA's "hack for IMAGE_TOKEN_INDEX")."""

SYSTEM_V1 = ("A chat between a curious human and an artificial intelligence assistant. "
             "The assistant gives helpful, detailed, and polite answers to the human's questions.")
ROLES_V1 = ("USER", "ASSISTANT")

EVAL_SENTENCE = "{query} Please output segmentation mask."
EVAL_PHRASE = "What is {query} in this image? Please output segmentation mask."
EVAL_ANSWER = "[SEG]."
PROMPT_MODES = ("generate", "eval")


def llava_v1(messages: list[tuple[str, str]]) -> str:
    """``conv_llava_v1.get_prompt()`` for (role, message) pairs; an empty message opens that
    role's turn ("ASSISTANT:") for generation."""
    seps = (" ", "</s>")
    out = SYSTEM_V1 + seps[0]
    for i, (role, message) in enumerate(messages):
        out += f"{role}: {message}{seps[i % 2]}" if message else f"{role}:"
    return out


def user_turn(text: str, use_im_start_end: bool = True, lead: str = "\n") -> str:
    """The user message: the image placeholder, a line break, then `text` (chat.py writes
    "<image>\\n" + prompt; ValDataset writes "<image>\\n " + text, with a space)."""
    image = IM_START + IMAGE_TOKEN + IM_END if use_im_start_end else IMAGE_TOKEN
    return image + lead + text


def generate_prompt(query: str, template: str = "{query}", use_im_start_end: bool = True) -> str:
    """chat.py's prompt: ``template`` filled with the query as the user turn, the assistant turn open."""
    return llava_v1([(ROLES_V1[0], user_turn(template.format(query=query), use_im_start_end)), (ROLES_V1[1], "")])


def eval_prompt(query: str, is_sentence: bool, use_im_start_end: bool = True) -> str:
    """ValDataset's prompt with its teacher-forced answer "[SEG].": a sentence query is followed by
    "Please output segmentation mask.", a phrase is asked as "What is {query} in this image? ...".
    The query is stripped, as ValDataset strips it."""
    text = (EVAL_SENTENCE if is_sentence else EVAL_PHRASE).format(query=query.strip())
    return llava_v1([(ROLES_V1[0], user_turn(text, use_im_start_end, lead="\n ")), (ROLES_V1[1], EVAL_ANSWER)])


def tokenize_with_image(prompt: str, tokenizer) -> list[int]:
    """``tokenizer_image_token``: each chunk between <image> placeholders tokenised on its own
    (with bos), chunks joined by IMAGE_TOKEN_INDEX, only the first chunk's bos kept."""
    chunks = [tokenizer.encode(chunk) for chunk in prompt.split(IMAGE_TOKEN)]
    ids: list[int] = []
    offset = 0
    if chunks and chunks[0] and chunks[0][0] == tokenizer.bos_token_id:
        offset = 1
        ids.append(chunks[0][0])
    for i, chunk in enumerate(chunks):
        if i:
            ids.append(IMAGE_TOKEN_INDEX)
        ids.extend(chunk[offset:])
    return ids
