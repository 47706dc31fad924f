"""A policy that replays fixed continuations: for tests and demos of the rollout machinery.

Each `generate` call consumes the next scripted continuation and applies real stop semantics
to it (earliest stop string wins; the text is cut before it), so a script can also exercise
failures (a continuation with no closing tag ends with "eos"; one longer than max_new_tokens
ends with "length"). Tokens are whitespace-separated words.
"""
from __future__ import annotations

from adapters.policy.base import Generation, Policy, split_at_stop
from bench.types import AdapterError


class ScriptedPolicy(Policy):
    """turns: the continuations, in the order the rollout asks for them. Prompts received are kept
    in `prompts` (the latest last)."""

    def __init__(self, turns: list[str], name: str = "scripted"):
        self.turns = list(turns)
        self.name = name
        self.prompts: list[str] = []
        self._next = 0

    def fingerprint(self) -> dict:
        return {"policy": "scripted", "name": self.name, "turns": len(self.turns)}

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        chat = "".join(f"[{m['role']}]\n{m['content']}\n" for m in messages)
        return f"{chat}[assistant]\n{assistant_prefix}"

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int) -> Generation:
        if self._next >= len(self.turns):
            raise AdapterError(f"scripted policy {self.name!r}: all {len(self.turns)} turns used")
        self.prompts.append(prompt)
        text = self.turns[self._next]
        self._next += 1
        head, matched = split_at_stop(text, stop)
        emitted = head + (matched or "")
        words = emitted.split()
        if len(words) > max_new_tokens:
            cut = _after_words(emitted, max_new_tokens)
            return Generation(cut, "length", None, max_new_tokens)
        if matched is None:
            return Generation(text, "eos", None, len(words))
        return Generation(head, "stop", matched, len(words))


def _after_words(text: str, n: int) -> str:
    """The prefix of `text` that holds its first n whitespace-separated words."""
    count, i, in_word = 0, 0, False
    for i, ch in enumerate(text):
        if ch.isspace():
            if in_word and count == n:
                return text[:i]
            in_word = False
        elif not in_word:
            in_word = True
            count += 1
    return text
