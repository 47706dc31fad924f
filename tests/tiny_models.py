"""Tiny random-weight Qwen2 causal LMs and a tokenizer built on the spot, for policy and training
tests: nothing is downloaded.

The tokenizer is a byte-level BPE trained on the DT-R1 system prompt and a few hundred short
strings, with the rollout tags added as ordinary (non-special) tokens, as train_dtr1.py adds them,
so they survive `decode(skip_special_tokens=True)`. Its chat template is the DeepSeek-R1-Distill
turn format (deepseek-ai/DeepSeek-R1-Distill-Qwen-7B tokenizer_config.json, reduced to the parts
a rollout uses): BOS, system text, <｜User｜>, <｜Assistant｜>, and the "<think>\\n" pre-fill.
"""
from __future__ import annotations

from pathlib import Path

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
TAGS = [f"<{t}>" for t in ("think", "dt_plan", "dt_rep", "execute", "results", "task", "answer")]
TAGS += [t.replace("<", "</") for t in TAGS]

R1_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}{{ '" + USER + "' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '" + ASSISTANT + "' + message['content'] + '" + EOS + "' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '" + ASSISTANT + "<think>\\n' }}{% endif %}"
)


def _corpus() -> list[str]:
    from rvt_bench.adapters.dtr1.prompt import system_prompt
    from rvt_bench.adapters.twin.registry import describe_tools

    lines = system_prompt(describe_tools(), 10).splitlines()
    words = ["the", "dog", "cat", "left", "right", "red", "frame", "segment", "instances", "print", "for", "in"]
    lines += [f"{a} {b} {i} {{\"id\": {i}}} [{i}, {i + 1}]" for i, (a, b) in enumerate(zip(words * 20, words[::-1] * 20))]
    lines += ['{"SAM2": []}', '{"instances": [1]}', "segmentation grounding vqa summarization"]
    return lines


def build_tokenizer(directory: str | Path):
    """Train and save (to `directory`) a byte-level BPE tokenizer of ~600 tokens as a
    Qwen2Tokenizer (so AutoTokenizer reloads the same class beside a qwen2 config.json), with the
    R1-distill chat template and BOS/EOS/PAD set; returns it."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=[BOS, EOS, PAD, USER, ASSISTANT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(_corpus(), trainer=trainer)
    bpe = json.loads(core.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in bpe["merges"]]
    tok = Qwen2Tokenizer(vocab=bpe["vocab"], merges=merges, unk_token=None, bos_token=BOS, eos_token=EOS,
                         pad_token=PAD, additional_special_tokens=[USER, ASSISTANT])
    tok.add_tokens(TAGS)  # ordinary tokens: atomic, and kept by skip_special_tokens=True
    tok.chat_template = R1_TEMPLATE
    tok.save_pretrained(str(directory))
    return tok


def build_model(tokenizer, directory: str | Path | None = None, seed: int = 0, layers: int = 2, hidden: int = 32,
                initializer_range: float = 0.5):
    """A random-weight Qwen2ForCausalLM over `tokenizer`'s vocabulary, rows padded to a multiple of 64 as real
    checkpoints pad them (float32, ~50k parameters);
    saved to `directory` when given."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=-(-(len(tokenizer) + 1) // 64) * 64, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True, initializer_range=initializer_range,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    if directory is not None:
        model.save_pretrained(str(directory))
    return model


def build_checkpoint(directory: str | Path, seed: int = 0):
    """Tokenizer and model saved together in `directory` (a loadable `policy.model`)."""
    tok = build_tokenizer(directory)
    return tok, build_model(tok, directory, seed)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.tiny_models",
                                 description="Write a tiny random R1-style checkpoint (tokenizer + model) for CPU smoke "
                                             "runs: train_dtr1.py base_model=DIR, run_bench.py policy=hf policy.model=DIR.")
    ap.add_argument("dir", help="the checkpoint's directory (created)")
    build_checkpoint(ap.parse_args().dir)
    print(f"tiny checkpoint: {ap.parse_args().dir}")
