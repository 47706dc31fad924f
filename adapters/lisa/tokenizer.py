"""The LLaMA tokenizer of a LISA checkpoint, encoding exactly as LISA's pinned transformers 4.31 does.

LISA loads ``AutoTokenizer.from_pretrained(version, use_fast=False)``: the slow sentencepiece
``LlamaTokenizer`` with ``legacy=True`` (4.31's default). Its ``tokenize`` (tokenization_utils.py,
4.31.0) splits the text at added tokens (``added_tokens.json``: <im_patch>, <im_start>, <im_end>,
[SEG]) and at bos/eos/unk, then:

- an added token that is not one of the AddedToken special tokens (bos/eos/unk) strips the
  whitespace of the text on both its sides ("We strip left and right by default");
- bos/eos/unk (AddedToken, lstrip=rstrip=False) strip nothing;
- each remaining non-empty piece of text is encoded by sentencepiece on its own (which prefixes
  its dummy "▁" to every piece: legacy behaviour);
- ``encode`` prepends bos (add_bos_token) and appends no eos.

transformers 5 no longer ships that slow tokenizer, and its converted fast tokenizer splits
differently around added tokens, so this module reimplements those rules on the sentencepiece
model directly. Tested against ids printed by transformers 4.31 (tests/data/lisa/).
"""
from __future__ import annotations

import re
from pathlib import Path

from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError


class LisaTokenizer:
    """tokenizer.model + added_tokens.json (+ tokenizer_config.json, special_tokens_map.json) of a
    LISA checkpoint directory.

    Raises AdapterError naming the file when tokenizer.model is missing or the tokenizer asks for a
    behaviour LISA's checkpoints do not use (legacy=False).
    """

    def __init__(self, directory: str | Path):
        import sentencepiece as spm

        directory = Path(directory)
        model_file = directory / "tokenizer.model"
        if not model_file.is_file():
            raise AdapterError(f"lisa: tokenizer file {model_file} is missing (a LISA checkpoint holds the LLaMA tokenizer.model)")
        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))
        config = _read_json(directory / "tokenizer_config.json")
        if config.get("legacy") is False:
            raise AdapterError(f"lisa: {directory / 'tokenizer_config.json'} sets legacy=false; LISA's tokenizers use the legacy (4.31 default) encoding")
        self.add_bos = bool(config.get("add_bos_token", True))
        specials = {**config, **_read_json(directory / "special_tokens_map.json")}
        self.bos_token = _content(specials.get("bos_token")) or self.sp.id_to_piece(self.sp.bos_id())
        self.eos_token = _content(specials.get("eos_token")) or self.sp.id_to_piece(self.sp.eos_id())
        self.unk_token = _content(specials.get("unk_token")) or self.sp.id_to_piece(self.sp.unk_id())
        self.added = {str(k): int(v) for k, v in _read_json(directory / "added_tokens.json").items()}
        self.special = {t: self.sp.piece_to_id(t) for t in (self.bos_token, self.eos_token, self.unk_token)}
        self.bos_token_id = self.special[self.bos_token]
        self.eos_token_id = self.special[self.eos_token]
        self._by_id = {v: k for k, v in self.added.items()}
        # longest first, so that a token containing another is matched whole (4.31's trie does the same)
        names = sorted({*self.added, *self.special}, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(n) for n in names) + ")")

    def add_tokens(self, tokens) -> None:
        """Add each token the tokenizer lacks, with the next free id, in the given order
        (4.31's ``add_tokens``; LISA @0e26916 adds its tokens at run time, the v0 checkpoints carry
        none). Added tokens split and strip as those of added_tokens.json do."""
        for token in tokens:
            if token not in self.added and token not in self.special:
                self.added[token] = len(self)
        self._by_id = {v: k for k, v in self.added.items()}
        names = sorted({*self.added, *self.special}, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(n) for n in names) + ")")

    def __len__(self) -> int:
        return self.sp.get_piece_size() + len(self.added)

    def convert_tokens_to_ids(self, token: str) -> int | None:
        """Id of one token (added tokens first, then the sentencepiece vocabulary); None when
        the token is unknown. This is how the [SEG] id is resolved: never by tokenising text."""
        if token in self.added:
            return self.added[token]
        piece_id = self.sp.piece_to_id(token)
        return None if piece_id == self.sp.unk_id() and token != self.unk_token else piece_id

    def tokenize(self, text: str) -> list[str]:
        """Tokens of `text` without bos, following the module docstring's rules."""
        parts = [p for p in self._split.split(text) if p != ""]
        for i, part in enumerate(parts):
            if part in self.added:
                if i + 1 < len(parts) and parts[i + 1] not in self.special:
                    parts[i + 1] = parts[i + 1].lstrip()
                if i > 0 and parts[i - 1] not in self.special:
                    parts[i - 1] = parts[i - 1].rstrip()
        tokens: list[str] = []
        for part in parts:
            if not part:
                continue
            if part in self.added or part in self.special:
                tokens.append(part)
            else:
                tokens.extend(self.sp.encode(part, out_type=str))
        return tokens

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        """Token ids of `text`, with bos first when the tokenizer adds it (LISA's do)."""
        ids = [self.added[t] if t in self.added else self.sp.piece_to_id(t) for t in self.tokenize(text)]
        bos = self.add_bos if add_bos is None else add_bos
        return ([self.bos_token_id] if bos else []) + ids

    def decode(self, ids: list[int]) -> str:
        """Text of `ids` as 4.31's ``decode(skip_special_tokens=False)`` writes it: added tokens
        verbatim, joined to the text around them by one space."""
        pieces: list[str] = []
        run: list[int] = []
        for i in ids:
            if i in self._by_id:
                if run:
                    pieces.append(self.sp.decode(run))
                    run = []
                pieces.append(self._by_id[i])
            else:
                run.append(int(i))
        if run:
            pieces.append(self.sp.decode(run))
        return " ".join(pieces)


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        return files.loads(files.read_text(path, "lisa tokenizer file"), str(path), duplicates="last")
    except (OSError, DatasetFormatError) as exc:
        raise AdapterError(f"lisa: {path} is not valid JSON ({exc})") from exc


def _content(token) -> str | None:
    """A special token as special_tokens_map.json writes it: a string or an AddedToken dict."""
    if isinstance(token, dict):
        return token.get("content")
    return token
