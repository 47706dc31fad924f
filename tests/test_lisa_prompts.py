"""LISA's prompt strings and token ids, held to what LISA's own code produced.

Golden strings: model/llava/conversation.py conv_llava_v1 and utils/dataset.py ValDataset /
chat.py (LISA 3cb2d4301f1af4691bd4f3938335ef06e76f155a). Token ids: printed by LISA's code under
transformers 4.31.0 on the tiny checkpoint (tests/data/lisa/lisa_reference.json, made by
tests/data/lisa/reference/run_lisa.py).
"""
import json
from pathlib import Path

import pytest

from rvt_bench.adapters.lisa import prompts
from rvt_bench.adapters.lisa.tokenizer import LisaTokenizer
from tests.lisa_tiny import ADDED_7B, ADDED_13B, write_tokenizer

DATA = Path(__file__).parent / "data" / "lisa"
REFERENCE = json.loads((DATA / "lisa_reference.json").read_text())
SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the human's questions.")
QUERIES = {"bench_by_the_door.jpg": ("Where would a tired visitor sit down while waiting?", True),
           "red_mug.jpg": ("the red mug", False)}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    write_tokenizer(path, ADDED_7B)
    return LisaTokenizer(path)


def test_eval_prompt_sentence_golden():
    assert prompts.eval_prompt("Where would a tired visitor sit down while waiting?", True) == (
        SYSTEM + " USER: <im_start><image><im_end>\n Where would a tired visitor sit down while waiting? "
        "Please output segmentation mask. ASSISTANT: [SEG].</s>")


def test_eval_prompt_phrase_golden():
    assert prompts.eval_prompt(" the red mug ", False) == (
        SYSTEM + " USER: <im_start><image><im_end>\n What is the red mug in this image? "
        "Please output segmentation mask. ASSISTANT: [SEG].</s>")


def test_generate_prompt_golden():
    assert prompts.generate_prompt("the red mug", "{query} Please output segmentation mask.") == (
        SYSTEM + " USER: <im_start><image><im_end>\nthe red mug Please output segmentation mask. ASSISTANT:")


@pytest.mark.parametrize("case", [c for c in REFERENCE["cases"] if c["mode"] == "eval"], ids=lambda c: c["image"])
def test_eval_prompt_equals_lisa_valdataset(case):
    query, is_sentence = QUERIES[case["image"]]
    assert prompts.eval_prompt(query, is_sentence) == case["prompt"]


@pytest.mark.parametrize("case", [c for c in REFERENCE["cases"] if c["mode"] == "eval"], ids=lambda c: c["image"])
def test_eval_token_ids_equal_lisa(case, tokenizer):
    assert prompts.tokenize_with_image(case["prompt"], tokenizer) == case["input_ids"]


@pytest.mark.parametrize("case", [c for c in REFERENCE["cases"] if c["mode"] == "generate"], ids=lambda c: c["image"])
def test_generate_token_ids_are_the_start_of_lisa_output(case, tokenizer):
    ids = prompts.tokenize_with_image(prompts.generate_prompt(case["prompt"], "{query}"), tokenizer)
    assert case["output_ids"][: len(ids)] == ids and len(case["output_ids"]) > len(ids)


def test_image_placeholder_is_one_id_after_im_start(tokenizer):
    ids = prompts.tokenize_with_image(prompts.generate_prompt("x"), tokenizer)
    at = ids.index(prompts.IMAGE_TOKEN_INDEX)
    assert ids.count(prompts.IMAGE_TOKEN_INDEX) == 1
    assert ids[at - 1] == tokenizer.convert_tokens_to_ids("<im_start>") and ids[at + 1] == tokenizer.convert_tokens_to_ids("<im_end>")
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1


def test_added_tokens_strip_neighbouring_whitespace_but_eos_does_not(tokenizer):
    sp = tokenizer.sp
    assert tokenizer.tokenize("a <im_end>\n b") == sp.encode("a", out_type=str) + ["<im_end>"] + sp.encode("b", out_type=str)
    assert tokenizer.tokenize("a </s> b") == sp.encode("a ", out_type=str) + ["</s>"] + sp.encode(" b", out_type=str)


@pytest.mark.parametrize("added, seg_id", [(ADDED_7B, 403), (ADDED_13B, 400)], ids=["7b-layout", "13b-layout"])
def test_seg_id_comes_from_the_vocabulary(tmp_path, added, seg_id):
    write_tokenizer(tmp_path, added)
    assert LisaTokenizer(tmp_path).convert_tokens_to_ids("[SEG]") == seg_id


def test_tokenizer_without_model_file_names_it(tmp_path):
    from rvt_bench.core.types import AdapterError

    with pytest.raises(AdapterError, match="tokenizer.model"):
        LisaTokenizer(tmp_path)
