"""A policy that replays fixed continuations: for tests and demos of the rollout machinery.

Each `generate` call consumes the next scripted continuation and applies real stop semantics
to it (earliest stop string wins; the text is cut before it), so a script can also exercise
failures (a continuation with no closing tag ends with "eos"; one longer than max_new_tokens
ends with "length"). Tokens are whitespace-separated words.

From the command line (conf/policy/scripted.yaml), `policy=scripted policy.turns_file=FILE` replays
the JSON list of continuations in FILE through the real rollout loop, the same script for every
sample (per_rollout): to re-run a recorded rollout, for demos, and to try the sandbox by hand.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rvt_bench.adapters.policy.base import Generation, Policy, split_at_stop
from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError

_ASSISTANT = "[assistant]\n"


class ScriptedPolicy(Policy):
    """turns: the continuations, in the order the rollout asks for them. per_rollout: False = one
    script consumed across all calls; True = every rollout (every distinct chat) replays the script
    from its first turn. Prompts received are kept in `prompts` (the latest last)."""

    def __init__(self, turns: list[str], name: str = "scripted", per_rollout: bool = False):
        self.turns = list(turns)
        self.name = name
        self.per_rollout = bool(per_rollout)
        self.prompts: list[str] = []
        self._next = 0
        self._cursor: dict[str, int] = {}

    @classmethod
    def from_file(cls, turns_file: str, name: str = "scripted", per_rollout: bool = True) -> "ScriptedPolicy":
        """turns_file: a JSON file holding a list of strings (the continuations). Raises
        AdapterError naming the file when it is missing, not a regular file (a FIFO, a device), over
        rvt_bench.core.files.TEXT_MB, or not such a list."""
        path = Path(turns_file)
        try:
            turns = files.loads(files.read_text(path, "turns_file"), str(path))
        except (OSError, ValueError, DatasetFormatError) as exc:
            raise AdapterError(f"scripted policy: cannot read turns_file {path}: {exc}") from exc
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
            raise AdapterError(f"scripted policy: turns_file {path} must hold a JSON list of strings")
        return cls(turns, name=name, per_rollout=per_rollout)

    def fingerprint(self) -> dict:
        digest = hashlib.sha256(json.dumps(self.turns).encode()).hexdigest()[:16]
        return {"policy": "scripted", "name": self.name, "turns": len(self.turns), "sha256": digest,
                "per_rollout": self.per_rollout}

    def render(self, messages: list[dict], assistant_prefix: str = "") -> str:
        chat = "".join(f"[{m['role']}]\n{m['content']}\n" for m in messages)
        return f"{chat}[assistant]\n{assistant_prefix}"

    def generate(self, prompt: str, stop: list[str], max_new_tokens: int) -> Generation:
        chat = prompt.split(_ASSISTANT, 1)[0] if self.per_rollout else ""
        index = self._cursor.get(chat, 0) if self.per_rollout else self._next
        if index >= len(self.turns):
            raise AdapterError(f"scripted policy {self.name!r}: all {len(self.turns)} turns used")
        self.prompts.append(prompt)
        text = self.turns[index]
        if self.per_rollout:
            self._cursor[chat] = index + 1
        else:
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
