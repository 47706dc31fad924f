"""Which hidden states become SAM2 prompts: Sa2VA's ``get_seg_hidden_states`` on generate's output.

generate(output_hidden_states=True) returns, per step, the last layer's states of the tokens that
step fed in: the whole prompt (P) at step 1, then one generated token per step; their
concatenation has P + n - 1 rows for n generated ids. Sa2VA takes ``hidden_states[-n_out:]`` with
``n_out = len(sequences[0][:-1])`` and keeps the rows whose id is [SEG]: the state *at* each
generated [SEG] (the step that fed it in), never at a final [SEG] (modeling_sa2va_chat.py,
magic-research/Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045).
"""
import torch

from rvt_bench.adapters.sa2va.model import seg_hidden_positions

SEG = 7


def authors(prompt_len: int, generated: list[int]) -> list[int]:
    """get_seg_hidden_states on row indices (a copy of its three lines, with indices for states)."""
    hidden = torch.arange(prompt_len + len(generated) - 1)
    output_ids = torch.tensor(generated)[:-1]
    seg_mask = output_ids == SEG
    if len(seg_mask) == 0:
        return []
    return hidden[-len(seg_mask):][seg_mask].tolist()


def test_positions_are_the_generated_seg_tokens_own_steps():
    for generated in ([SEG, 2], [1, SEG, 3, SEG, 2], [SEG, SEG, SEG], [SEG], [2], [1, 1, SEG]):
        assert seg_hidden_positions(10, generated, SEG) == authors(10, generated), generated


def test_a_final_seg_has_no_state_and_a_middle_one_has_its_own():
    assert seg_hidden_positions(5, [1, SEG], SEG) == []
    assert seg_hidden_positions(5, [SEG, SEG, 2], SEG) == [5, 6]
