"""`sa2va`: Sa2VA's released checkpoints (ByteDance/Sa2VA-4B by default, ByteDance/Sa2VA-1B, or a
local directory in their format) behind the Adapter protocol. conf/model/sa2va.yaml configures it.

One sample is one ``predict_forward`` call, as the authors evaluate (evaluation/refcoco_eval.py,
ref_vos_eval.py): an image as InternVL tiles, a video's first five frames as one tile each, the
prompt ``image_prompt`` / ``video_prompt`` with the query, a greedily generated answer (at most
``max_new_tokens``), and SAM2 masks on every frame from the first [SEG] (the authors' evaluation
keeps ``prediction_masks[0]``; no [SEG] = empty masks, as theirs): prompted on the frames the LLM saw,
tracked from SAM2's memory over a video's later frames (sam.py). A video query holding '?' is the
whole prompt, as refVOS.py passes it (question_prompt). The answer goes to
Prediction.text.

Precision: bfloat16 on CUDA (``preparing_for_generation``'s default; SAM2 under CUDA autocast, as
``SAM2.language_embd_inference``), float32 on CPU (half precision on the CPU is refused in one line).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.adapters.checkpoint import checkpoint_dir, device_dtype
from rvt_bench.adapters.sa2va import prompts
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample, first_line

WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]
QUESTION_PROMPTS = ("refvos", "template")


def llm_text(prompt: str, config, n_tiles: int, video: bool) -> str:
    """The LLM's input text: a video's n_tiles frames as one image line each (256 tokens), an image's
    n_tiles tiles as one line of 256 * n_tiles tokens (``predict_forward``)."""
    if video:
        return prompts.build_prompt(prompt, config.num_image_token, n_tiles, config.template)
    return prompts.build_prompt(prompt, config.num_image_token * n_tiles, 1, config.template)


class Sa2VAAdapter(Adapter):
    """Sa2VA on transformers / sam2 modules (rvt_bench.adapters.sa2va.model).

    checkpoint:     a Sa2VA checkpoint directory, or a Hugging Face repo id fetched when the network is there.
    image_prompt, video_prompt: the user text; "{query}" is replaced by the sample's query, "<image>"
                    by the image tokens (defaults: the authors' RES and Ref-VOS evaluation prompts).
    max_new_tokens: the answer's budget (``preparing_for_generation``: 2048).
    question_prompt: "refvos" (the authors: refVOS.py passes a video query holding '?' as the whole
                    prompt, without video_prompt, so it holds no "<image>"; their ``generate`` then
                    asserts there are image tokens and fails, and so does the sample here, with that
                    reason) | "template" (a corrected variant: such a query gets video_prompt too).
    device:         "auto" (CUDA when present) | "cpu" | "cuda[:i]". dtype: "auto" | "bfloat16" | "float16" | "float32".

    predict(sample) -> Prediction(task="segmentation", masks=[RLE per frame], text=answer,
    trace={"answer", "n_seg", "generated_tokens"}). Raises AdapterError for a task other than segmentation.

    Its report: [SEG] emitted -> mask decoded (the first [SEG]'s masks hold foreground on some
    frame) -> result correct; [SEG] per sample (mean) and the seconds the model ran.
    """

    stages = (("seg_emitted", "[SEG] emitted"), ("mask_decoded", "mask decoded"))

    def __init__(self, checkpoint: str = "ByteDance/Sa2VA-4B", name: str = "sa2va",
                 image_prompt: str = prompts.IMAGE_PROMPT, video_prompt: str = prompts.VIDEO_PROMPT,
                 max_new_tokens: int = 2048, device: str = "auto", dtype: str = "auto", question_prompt: str = "refvos") -> None:
        for key, text in (("image_prompt", image_prompt), ("video_prompt", video_prompt)):
            if "{query}" not in text or "<image>" not in text:
                raise AdapterError(f"sa2va: {key} must contain '<image>' and '{{query}}', got {text!r}")
        if dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise AdapterError(f"sa2va: dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
        if question_prompt not in QUESTION_PROMPTS:
            raise AdapterError(f"sa2va: question_prompt must be one of {', '.join(QUESTION_PROMPTS)}, got {question_prompt!r}")
        if int(max_new_tokens) < 1:
            raise AdapterError(f"sa2va: max_new_tokens must be at least 1, got {max_new_tokens}")
        self.name = name
        self.checkpoint = str(checkpoint)
        self.image_prompt, self.video_prompt = image_prompt, video_prompt
        self.max_new_tokens = int(max_new_tokens)
        self.question_prompt = question_prompt
        self.device_setting, self.dtype_setting = device, dtype
        self._loaded = None

    # --- configuration ------------------------------------------------------------------------

    def _device_dtype(self) -> tuple[str, str]:
        return device_dtype(self.device_setting, self.dtype_setting)

    def fingerprint(self) -> dict:
        _, dtype = self._device_dtype()
        path = Path(self.checkpoint)
        return {"adapter": "sa2va", "name": self.name, "checkpoint": str(path.resolve()) if path.exists() else self.checkpoint,
                "image_prompt": self.image_prompt, "video_prompt": self.video_prompt,
                "max_new_tokens": self.max_new_tokens, "dtype": dtype, "decoding": "greedy",
                "question_prompt": self.question_prompt}

    def passed(self, item: ScoredSample) -> dict[str, bool]:
        from rvt_bench.core import masks

        pred = item.prediction
        seg = isinstance(pred.trace, dict) and int(pred.trace.get("n_seg", 0) or 0) >= 1
        decoded = seg and not pred.error and any(masks.area(m) > 0 for m in pred.masks or [])
        return {"seg_emitted": seg, "mask_decoded": decoded}

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        n_seg = [float(item.prediction.trace["n_seg"]) for item in scored
                 if isinstance(item.prediction.trace, dict) and "n_seg" in item.prediction.trace]
        return [*M.mean("seg_per_sample", "[SEG] per sample (mean)", n_seg, "count"),
                *M.latency(scored, (("sa2va", "model"), M.TOTAL))]

    # --- loading ------------------------------------------------------------------------------

    def preflight(self) -> None:
        self._load()

    def close(self) -> None:
        self._loaded = None

    def _resolve_checkpoint(self) -> Path:
        return checkpoint_dir(self.checkpoint, "sa2va", "Sa2VA", "ByteDance/Sa2VA-4B", WEIGHT_PATTERNS)

    def _load(self):
        if self._loaded is not None:
            return self._loaded
        import torch

        from rvt_bench.adapters.sa2va import model as sa2va_model
        from rvt_bench.adapters.sa2va.config import Sa2VAConfig
        from rvt_bench.adapters.sa2va.weights import load_into

        directory = self._resolve_checkpoint()
        config = Sa2VAConfig.from_json(directory / "config.json")
        prompts.template(config.template)
        try:
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging

            # transformers reads config.json's model_type "sa2va_chat" (a remote-code class it does
            # not know) and warns "You are using a model of type sa2va_chat to instantiate a model of
            # type ``": expected here, since only the tokenizer files are read; quiet for this call only
            level = hf_logging.get_verbosity()
            hf_logging.set_verbosity_error()
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(directory))
            finally:
                hf_logging.set_verbosity(level)
        except Exception as exc:  # missing or unreadable tokenizer files: one line
            raise AdapterError(f"sa2va: the tokenizer in {directory} cannot be loaded: {first_line(exc)}") from exc
        ids = {}
        for token in (prompts.SEG_TOKEN, prompts.IMG_CONTEXT):
            tid = tokenizer.convert_tokens_to_ids(token)
            if tid is None or tid == tokenizer.unk_token_id:
                raise AdapterError(f"sa2va: the tokenizer in {directory} has no {token} token")
            ids[token] = tid
        device, dtype_name = self._device_dtype()
        if device == "cpu" and dtype_name != "float32":
            raise AdapterError(f"sa2va: dtype {dtype_name} needs CUDA (the authors run SAM2 under CUDA autocast); use float32 on the CPU")
        net = sa2va_model.build(config, device, getattr(torch, dtype_name))
        load_into(net, directory)
        self._loaded = (net, tokenizer, ids, config)
        return self._loaded

    def _stop(self, tokenizer, config):
        words = prompts.template(config.template)["STOP_WORDS"]

        def stop(generated: list[int]) -> bool:  # StopWordStoppingCriteria
            text = tokenizer.decode(generated).replace("\r", "").replace("\n", "")
            return any(text.endswith(w) for w in words)
        return stop

    # --- prediction ---------------------------------------------------------------------------

    def prompt(self, sample: Sample) -> str:
        """The user text: image_prompt / video_prompt with the query; a video query holding '?' alone
        under question_prompt="refvos" (refVOS.py ``SEG_PROMPT.format(exp) if '?' not in exp else exp``)."""
        if sample.modality != "video":
            return self.image_prompt.replace("{query}", sample.query)
        if self.question_prompt == "refvos" and "?" in sample.query:
            return sample.query
        return self.video_prompt.replace("{query}", sample.query)

    def predict(self, sample: Sample) -> Prediction:
        if sample.task != "segmentation":
            raise AdapterError(f"sample {sample.id}: Sa2VA answers segmentation only, not {sample.task!r}")
        import numpy as np

        from rvt_bench.adapters.sa2va import preprocess
        from rvt_bench.adapters.sa2va.sam import sam_pixels
        from rvt_bench.core import masks
        from rvt_bench.core.frames import read_frame

        net, tokenizer, ids, config = self._load()
        video = sample.modality == "video"
        frames = [read_frame(f) for f in sample.frames]
        size = frames[0].shape[:2]
        if any(f.shape[:2] != size for f in frames):
            raise AdapterError(f"sample {sample.id}: Sa2VA needs frames of one size (predict_forward asserts it)")
        user_text = self.prompt(sample)
        if "<image>" not in user_text:
            raise AdapterError(f"sample {sample.id}: the query holds '?', which Sa2VA's Ref-VOS evaluation passes as the whole "
                               "prompt, without <image>; the authors' generate then fails (assert selected.sum() != 0: no "
                               "image tokens), so there is no prediction; question_prompt=template gives it the video prompt")
        t0 = time.perf_counter()
        pixels = preprocess.llm_pixels(frames, video=video)
        text = llm_text(user_text, config, pixels.shape[0], video)
        token_ids = tokenizer.encode(text)
        sam_frames = [sam_pixels(preprocess.sam_frame(f), net.dtype, image=not video) for f in frames]
        out = net.run(token_ids, pixels, sam_frames, size,
                      seg_id=ids[prompts.SEG_TOKEN], img_context_id=ids[prompts.IMG_CONTEXT], eos_id=tokenizer.eos_token_id,
                      max_new_tokens=self.max_new_tokens, stop=self._stop(tokenizer, config), all_masks=False)
        if len(out.logits):
            per_frame = [(out.logits[0, i] > 0).numpy() for i in range(len(frames))]
        else:
            per_frame = [np.zeros(size, bool)] * len(frames)
        answer = tokenizer.decode(out.generated).strip()
        return Prediction(sample_id=sample.id, task="segmentation", masks=[masks.encode(m) for m in per_frame], text=answer,
                          trace={"answer": answer, "n_seg": out.n_seg, "generated_tokens": len(out.generated)},
                          timings={"sa2va": time.perf_counter() - t0})
