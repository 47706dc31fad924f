"""Our LISA port's legacy path (model.code=v0) against LISA's legacy code on the same tiny v0 checkpoint,
float32 and bfloat16.

Reference: tests/data/lisa/lisa_v0_reference.json, printed by tests/data/lisa/reference/run_lisa_v0.py,
which runs dvlab-research/LISA 0e26916dff58c9f2eaad981f127e1171a7c1e3e0 (the legacy code LISA's README
names for the v0 models) under transformers 4.31.0 on CPU: chat.py main (LISA.evaluate: the vicuna
template, <image> as 256 <im_patch>, uncached greedy decoding) and, on the model chat.py builds and
loads (LLaVA language model + the two extra files under strict=False), train_ds.py validate's inputs
(ValDataset + collate_fn + LISA.forward(inference=True)), each under --precision fp32 and bf16 (chat.py's
default; ``model.bfloat16()`` and both images cast). The checkpoint is rebuilt here from the same seed in
the v0 layout (tests/lisa_tiny.py build_v0_checkpoint, V0_SEED, V0_PARITY_CHECKPOINT).

Tolerances are tests/test_lisa_equivalence.py's (float32: 1e-5 and equal thresholded masks; bfloat16:
16 x 2^-8 of the largest |logit|, flipped pixels only within that band of 0). Token ids are compared
exactly: the eval prompt as our port tokenises it against collate_fn's input_ids, the generated
sequence against LISA.evaluate's output_ids.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rvt_bench.adapters.lisa import legacy
from rvt_bench.adapters.lisa.adapter import LisaAdapter
from rvt_bench.core.types import AdapterError
from tests.lisa_tiny import V0_PARITY_CHECKPOINT, V0_SEED, build_checkpoint, build_v0_checkpoint
from tests.test_lisa_equivalence import BF16_RELATIVE, DATA, MIN_LOGIT_STD, assert_logits_match, expected_logits, run_case

REFERENCE = json.loads((DATA / "lisa_v0_reference.json").read_text())
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_v0_checkpoint(tmp_path_factory.mktemp("tiny_lisa_v0"), V0_SEED, **V0_PARITY_CHECKPOINT)


@pytest.fixture(scope="module")
def models(checkpoint):
    cache = {}

    def get(precision):
        if precision not in cache:
            cache[precision] = LisaAdapter(str(checkpoint), device="cpu", dtype=DTYPES[precision])._load()
        return cache[precision]
    return get


def cases(mode):
    chosen = [c for c in REFERENCE["cases"] if c["mode"] == mode]
    return pytest.mark.parametrize("case", chosen, ids=lambda c: f"{c['precision']}-{c['image']}")


def fixture_query(image: str) -> tuple[str, bool]:
    raw = json.loads((DATA / "reasonseg" / "val" / image.replace(".jpg", ".json")).read_text())
    return raw["text"][0], bool(raw["is_sentence"])


def test_reference_covers_both_precisions_and_paths():
    kinds = {(c["mode"], c["precision"]) for c in REFERENCE["cases"]}
    assert kinds == {(m, p) for m in ("eval", "generate") for p in ("fp32", "bf16")}
    assert "0e26916" in REFERENCE["source"] and "bf16" in REFERENCE["source"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_reference_is_not_degenerate(precision):
    """Logits that vary across pixels, masks neither empty nor full, a [SEG] in every generated answer
    (the answer without [SEG], an empty mask, is the v1 reference's case: the same code after decoding)."""
    chosen = [c for c in REFERENCE["cases"] if c["precision"] == precision]
    for case in chosen:
        for mask in expected_logits(case):
            assert float(mask.std()) > MIN_LOGIT_STD, (case["image"], float(mask.std()))
            assert 0.05 < float((mask > 0).float().mean()) < 0.95, case["image"]
    generated = [c for c in chosen if c["mode"] == "generate"]
    assert len(generated) == 2 and all(len(c["logits"]) >= 1 and "[SEG]" in c["text"] for c in generated)


def test_bf16_bound_holds_lisa_against_itself():
    by_key = {(c["mode"], c["precision"], c["image"]): c for c in REFERENCE["cases"]}
    for (mode, precision, image), case in by_key.items():
        if mode == "eval" and precision == "fp32":
            fp32, bf16 = expected_logits(case), expected_logits(by_key[(mode, "bf16", image)])
            assert float((fp32 - bf16).abs().max()) <= BF16_RELATIVE * float(fp32.abs().max())


@cases("eval")
def test_eval_prompt_tokens_match_lisa(models, case):
    """The vicuna prompt, <image> as <im_start> + 256 <im_patch> + <im_end>, "[SEG]." teacher-forced,
    tokenised as collate_fn does (the run-time ids of [SEG] and the image tokens included)."""
    query, is_sentence = fixture_query(case["image"])
    prompt = legacy.eval_prompt(query, is_sentence)
    assert prompt == case["prompt"]
    assert legacy.tokenize(prompt, models(case["precision"])[1], eval_mode=True) == case["input_ids"]
    assert models(case["precision"])[3] == case["seg_token_idx"]


@cases("eval")
def test_eval_path_matches_lisa(models, case):
    out = run_case(models(case["precision"]), case, case["input_ids"])
    assert out.logits.shape == (1, *expected_logits(case).shape[1:])
    assert_logits_match(out, case)


def generate(models, case):
    loaded = models(case["precision"])
    ids = legacy.tokenize(legacy.generate_prompt(case["prompt"]), loaded[1], eval_mode=False)
    return run_case(loaded, case, ids, max_new_tokens=512)


@cases("generate")
def test_generate_path_matches_lisa(models, case):
    out = generate(models, case)
    assert out.token_ids == case["output_ids"]
    assert_logits_match(out, case)


def test_v0_is_detected_from_the_layout_and_v1_is_not(checkpoint, tmp_path):
    assert legacy.detect(checkpoint) == "v0"
    assert LisaAdapter(str(checkpoint)).fingerprint()["code"] == "v0"
    v1 = build_checkpoint(tmp_path / "v1", 0)
    assert legacy.detect(v1) == "v1"
    with pytest.raises(AdapterError, match="pytorch_model-visual_model.bin"):
        legacy.detect(v1, "v0")
    with pytest.raises(AdapterError, match="model.code"):
        legacy.detect(v1, "v2")


def test_v0_checkpoint_without_sam_weights_is_refused(checkpoint, tmp_path):
    """LISA's strict=False load would keep a random SAM; the port refuses with the missing name."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    visual = torch.load(broken / legacy.VISUAL_FILE, weights_only=True)
    torch.save({k: v for k, v in visual.items() if "mask_decoder" not in k}, broken / legacy.VISUAL_FILE)
    with pytest.raises(AdapterError, match="lacks 'sam.mask_decoder"):
        LisaAdapter(str(broken), device="cpu", dtype="float32")._load()


def test_v0_extra_tables_replace_the_smaller_shard_tables(checkpoint):
    """The shards hold 400 embedding rows, the extra file 404 (the tokenizer's length after LISA's
    four tokens): the extra file's table is the one loaded, as strict=False loads it over the resized one."""
    net = LisaAdapter(str(checkpoint), device="cpu", dtype="float32")._load()[0]
    extra = torch.load(Path(checkpoint) / legacy.FCS_FILE, weights_only=True)
    assert torch.equal(net.llm.model.embed_tokens.weight, extra["lm.model.embed_tokens.weight"])
    assert torch.equal(net.llm.lm_head.weight, extra["lm.lm_head.weight"])
    assert np.prod(net.llm.lm_head.weight.shape) == 404 * 64


@pytest.mark.parametrize("mode", ["eval", "generate"])
def test_adapter_predict_on_the_v0_layout_gives_lisas_masks(checkpoint, mode):
    """The adapter end to end (layout detected, v0 prompt and tokens chosen, masks encoded) on the
    ReasonSeg fixture: each image's mask is LISA's thresholded fp32 logits (generate: the default
    chat_template gives the text reference/chat_prompts.json typed at chat.py)."""
    from rvt_bench.core import masks
    from rvt_bench.loaders.reasonseg import ReasonSegDataset

    adapter = LisaAdapter(str(checkpoint), prompt_mode=mode, device="cpu", dtype="float32")
    dataset = ReasonSegDataset(DATA / "reasonseg", "val")
    by_image = {c["image"]: c for c in REFERENCE["cases"] if c["mode"] == mode and c["precision"] == "fp32"}
    for i in range(len(dataset)):
        sample = dataset[i]
        case = by_image[Path(sample.frames[0]).name]
        prediction = adapter.predict(sample)
        assert prediction.trace["frames"][0]["n_seg"] == 1
        expected = expected_logits(case)[0].numpy() > 0
        assert np.array_equal(masks.decode(prediction.masks[0]), expected)
        if mode == "generate":
            assert prediction.text.strip() == "[SEG]" and case["text"].endswith("ASSISTANT: [SEG] </s>")


def test_an_eval_prompt_over_512_tokens_loses_its_seg_as_collate_fn_truncates(models):
    """collate_fn @0e26916 tokenises with truncation=True, max_length=512: with 258 image ids in the
    prompt, a long query pushes the teacher-forced "[SEG]." past the cut (LISA then decodes no mask)."""
    _, tokenizer, _, seg_id, _ = models("fp32")
    short = legacy.tokenize(legacy.eval_prompt("the red mug", False), tokenizer, eval_mode=True)
    long = legacy.tokenize(legacy.eval_prompt("a mug " * 200, True), tokenizer, eval_mode=True)
    assert seg_id in short and len(short) < legacy.EVAL_MAX_LENGTH
    assert len(long) == legacy.EVAL_MAX_LENGTH and seg_id not in long
    assert len(legacy.tokenize(legacy.generate_prompt("a mug " * 200), tokenizer, eval_mode=False)) > legacy.EVAL_MAX_LENGTH


@cases("generate")
def test_answer_text_is_chat_pys(models, case):
    """chat.py prints the whole sequence decoded and cleaned (legacy.answer_text); ours, on the same ids,
    is that text apart from <s> and </s>, which our decode leaves out (the answer text of both paths)."""
    text = legacy.answer_text(models(case["precision"])[1].decode(case["output_ids"]))
    assert text == case["text"].replace("<s>", "").replace("</s>", "")
    assert legacy.answer_text("a  b\n<im_patch>c") == "abc"
