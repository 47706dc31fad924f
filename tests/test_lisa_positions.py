"""Which hidden state becomes a [SEG] prompt: the one at the position *before* each [SEG], counted
in the image-expanded sequence (one <image> id -> 256 CLIP features, so +255), as LISA's
model_forward / evaluate compute ``seg_token_mask`` (model/LISA.py, 3cb2d430)."""
import pytest
import torch

from rvt_bench.adapters.lisa.config import LisaConfig
from rvt_bench.adapters.lisa.model import LisaModel, seg_hidden_positions
from rvt_bench.adapters.lisa.prompts import IMAGE_TOKEN_INDEX
from tests.lisa_tiny import lisa_config

SEG = 403


def test_position_before_seg_shifted_by_255():
    # bos, "x", <image>, "y", [SEG], "." : [SEG] at 4, the token before it at 3 -> 3 + 255
    assert seg_hidden_positions([1, 50, IMAGE_TOKEN_INDEX, 60, SEG, 70], SEG) == [258]


def test_one_position_per_seg_in_order():
    ids = [1, IMAGE_TOKEN_INDEX, 60, SEG, 61, 62, SEG, 2]
    assert seg_hidden_positions(ids, SEG) == [2 + 255, 5 + 255]


def test_no_seg_no_position():
    assert seg_hidden_positions([1, IMAGE_TOKEN_INDEX, 60, 2], SEG) == []


def test_a_leading_token_equal_to_seg_is_not_counted():
    # LISA looks at input_ids[:, 1:]: the first id never marks a position
    assert seg_hidden_positions([SEG, IMAGE_TOKEN_INDEX, 60], SEG) == []


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return LisaModel(LisaConfig.from_dict(lisa_config(404))).eval()


def test_expanded_position_holds_the_token_before_seg(tiny_model):
    ids = [1, 40, 41, IMAGE_TOKEN_INDEX, 42, 43, SEG, 44]
    features = torch.randn(1, 256, 64)
    with torch.no_grad():
        embeds = tiny_model.embed(ids, features)
        (position,) = seg_hidden_positions(ids, SEG)
        table = tiny_model.llm.get_input_embeddings().weight
    assert embeds.shape == (1, len(ids) + 255, 64)
    assert torch.equal(embeds[0, position], table[43])
    assert torch.equal(embeds[0, 3:3 + 256], features[0])


def test_prompt_with_two_images_is_refused(tiny_model):
    from rvt_bench.core.types import AdapterError

    with pytest.raises(AdapterError, match="exactly one <image>"):
        tiny_model.embed([1, IMAGE_TOKEN_INDEX, IMAGE_TOKEN_INDEX], torch.zeros(1, 256, 64))
