"""Chat-template rendering shared by every local runtime, so llama.cpp and transformers see the
same prompt string.

The template is the GGUF's own `tokenizer.chat_template` (Jinja2), rendered the way transformers'
`apply_chat_template` renders it (sandboxed Jinja2, trim_blocks, lstrip_blocks,
`raise_exception`). A GGUF without a template (gemma-3-270m, a pretrained model) gets the
fallback named in its policy config; there is no silent generic default, because a wrong template
makes a small model end its turn at once (the 0-token answers seen with create_chat_completion).
"""
from __future__ import annotations

from functools import lru_cache

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from rvt_bench.core.types import AdapterError

# Gemma 3's turn format (google/gemma-3-*-it tokenizer_config.json chat_template): no system role,
# the system text is prepended to the first user turn; the assistant role is called "model".
# BOS is left to the tokenizer (the GGUF sets add_bos_token), so the template does not emit it.
GEMMA3_TEMPLATE = (
    "{%- set ns = namespace(prefix='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.prefix = message['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
    "{{ ns.prefix + message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- set ns.prefix = '' -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

NAMED_TEMPLATES = {"gemma3": GEMMA3_TEMPLATE}


def _raise(message: str) -> None:
    raise TemplateError(message)


@lru_cache(maxsize=8)
def _compile(template: str):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    return env.from_string(template)


def render_chat(template: str, messages: list[dict], assistant_prefix: str = "", **special_tokens: str) -> str:
    """Render `messages` with `add_generation_prompt=True`, then append `assistant_prefix`.

    template: a Jinja2 chat template, or a key of NAMED_TEMPLATES ("gemma3").
    special_tokens: variables some templates use (bos_token, eos_token); default "".
    Raises AdapterError when the template fails to render (the message names the template error).
    """
    source = NAMED_TEMPLATES.get(template, template)
    variables = {"bos_token": "", "eos_token": "", **special_tokens}
    try:
        prompt = _compile(source).render(messages=messages, add_generation_prompt=True, **variables)
    except TemplateError as exc:
        raise AdapterError(f"chat template failed to render: {exc}") from exc
    return prompt + assistant_prefix
