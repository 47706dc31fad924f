"""`lisa`: LISA's released v1 checkpoints (xinlai/LISA-7B-v1, xinlai/LISA-13B-llama2-v1, or a local
directory in their format) behind the Adapter protocol. conf/model/lisa.yaml configures it. The v1
models were trained on ReasonSeg train+val (LISA README @3cb2d43 line 246): they reproduce test rows
only. The v0 models (LISA-13B-llama2-v0, -v0-explanatory), which reproduce the validation rows, run
on LISA's legacy code (0e26916: another weight layout, the vicuna template, uncached decoding):
``code`` v0, detected from the layout by default (rvt_bench.adapters.lisa.legacy, docs/models.md
"LISA v0").

Each frame is answered on its own (LISA and VISA evaluate videos frame by frame): CLIP and SAM
inputs of the frame, the prompt, masks from every [SEG] (their union is the frame's mask; no
[SEG] = empty mask). Two prompting paths (``prompt_mode``):

- ``eval``: LISA's evaluation prompt (utils/dataset.py ValDataset, as train_ds.py ``validate``
  scores ReasonSeg): "{query} Please output segmentation mask." for a sentence query
  (sample.meta["is_sentence"], default true), "What is {query} in this image? Please output
  segmentation mask." for a phrase, with the answer "[SEG]." teacher-forced.
- ``generate``: chat.py: the user turn ``chat_template`` filled with the query, the answer
  generated greedily (at most ``max_new_tokens``); its text goes to Prediction.text.

Precision: bfloat16 on CUDA (chat.py's default ``--precision bf16``) or float16, float32 on CPU.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.adapters.checkpoint import checkpoint_dir, device_dtype, read_config_json
from rvt_bench.adapters.lisa import legacy, prompts
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample, first_line

WEIGHT_PATTERNS = ["*.json", "*.model", "*.bin", "*.safetensors"]


class LisaAdapter(Adapter):
    """LISA on transformers modules (rvt_bench.adapters.lisa.model).

    checkpoint:   a LISA checkpoint directory, or a Hugging Face repo id fetched when the network is there.
    prompt_mode:  "eval" | "generate" (module docstring).
    chat_template: the generate path's user text; "{query}" is replaced by the sample's query.
    max_new_tokens: generate path budget (chat.py: 512).
    vision_tower: CLIP id or directory; null = the checkpoint's config.vision_tower (a path relative
                  to the checkpoint directory is resolved against it).
    device:       "auto" (CUDA when present) | "cpu" | "cuda[:i]". dtype: "auto" | "bfloat16" | "float16" | "float32".
    code:         "auto" | "v1" | "v0": which LISA code path the checkpoint runs on (v1: LISA @3cb2d43;
                  v0: the legacy code @0e26916, rvt_bench.adapters.lisa.legacy); auto: v0 when the
                  directory holds pytorch_model-visual_model.bin.

    predict(sample) -> Prediction(task="segmentation", masks=[RLE per frame], text=answers when
    generated, trace={"frames": [{"tokens", "n_seg"}...]}). Raises AdapterError for a task other than
    segmentation; loading failures raise AdapterError naming what is missing.

    Its report: [SEG] emitted (on every frame; teacher-forced in eval mode) -> mask decoded (the
    masks decoded from the [SEG] embeddings hold foreground on some frame) -> result correct;
    [SEG] per frame (mean) and the seconds the model ran.
    """

    stages = (("seg_emitted", "[SEG] emitted"), ("mask_decoded", "mask decoded"))

    def __init__(self, checkpoint: str, name: str = "lisa", prompt_mode: str = "eval",
                 chat_template: str = "{query} Please output segmentation mask.", max_new_tokens: int = 512,
                 vision_tower: str | None = None, device: str = "auto", dtype: str = "auto",
                 code: str = "auto") -> None:
        if prompt_mode not in prompts.PROMPT_MODES:
            raise AdapterError(f"lisa: prompt_mode must be one of {list(prompts.PROMPT_MODES)}, got {prompt_mode!r}")
        if "{query}" not in chat_template:
            raise AdapterError(f"lisa: chat_template must contain '{{query}}', got {chat_template!r}")
        if dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise AdapterError(f"lisa: dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
        if code not in legacy.CODES:
            raise AdapterError(f"lisa: code must be one of {list(legacy.CODES)}, got {code!r}")
        self.code = code
        self.name = name
        self.checkpoint = str(checkpoint)
        self.prompt_mode = prompt_mode
        self.chat_template = chat_template
        self.max_new_tokens = int(max_new_tokens)
        self.vision_tower = vision_tower
        self.device_setting, self.dtype_setting = device, dtype
        self._loaded = None

    # --- configuration ------------------------------------------------------------------------

    def _device_dtype(self) -> tuple[str, str]:
        return device_dtype(self.device_setting, self.dtype_setting)

    def fingerprint(self) -> dict:
        device, dtype = self._device_dtype()
        out = {"adapter": "lisa", "name": self.name, "checkpoint": self._checkpoint_label(), "prompt_mode": self.prompt_mode,
               "dtype": dtype, "vision_tower": self.vision_tower, "code": self._code_label()}
        if self.prompt_mode == "generate":
            out.update(chat_template=self.chat_template, max_new_tokens=self.max_new_tokens, decoding="greedy")
        return out

    def passed(self, item: ScoredSample) -> dict[str, bool]:
        from rvt_bench.core import masks

        pred = item.prediction
        frames = pred.trace.get("frames") if isinstance(pred.trace, dict) else None
        seg = bool(frames) and all(isinstance(f, dict) and int(f.get("n_seg", 0)) >= 1 for f in frames)
        decoded = seg and not pred.error and any(masks.area(m) > 0 for m in pred.masks or [])
        return {"seg_emitted": seg, "mask_decoded": decoded}

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        per_frame = [float(f["n_seg"]) for item in scored if isinstance(item.prediction.trace, dict)
                     for f in item.prediction.trace.get("frames") or [] if isinstance(f, dict) and "n_seg" in f]
        return [*M.mean("seg_per_frame", "[SEG] per frame (mean)", per_frame, "count"),
                *M.latency(scored, (("lisa", "model"), M.TOTAL))]

    def _code_label(self) -> str:
        """The code path: the setting, or for "auto" what a local directory's layout says."""
        path = Path(self.checkpoint)
        if self.code == "auto" and path.is_dir():
            try:
                return legacy.detect(path)
            except AdapterError:
                return self.code
        return self.code

    def _checkpoint_label(self) -> str:
        path = Path(self.checkpoint)
        return str(path.resolve()) if path.exists() else self.checkpoint

    # --- loading ------------------------------------------------------------------------------

    def preflight(self) -> None:
        self._load()

    def close(self) -> None:
        self._loaded = None

    def _resolve_checkpoint(self) -> Path:
        return checkpoint_dir(self.checkpoint, "lisa", "LISA", "xinlai/LISA-7B-v1", WEIGHT_PATTERNS)

    def _resolve_tower(self, directory: Path, configured: str) -> str:
        tower = self.vision_tower or configured
        local = directory / tower
        if not Path(tower).is_absolute() and local.is_dir():
            return str(local)
        if not Path(tower).is_dir() and (Path(tower).is_absolute() or tower.count("/") != 1):
            raise AdapterError(f"lisa: CLIP vision tower {tower!r} (config.vision_tower or model.vision_tower) is neither a "
                               f"directory (here or under {directory}) nor a hub id such as openai/clip-vit-large-patch14")
        return tower

    def _load(self):
        if self._loaded is not None:
            return self._loaded
        import torch
        from transformers import CLIPImageProcessorPil, CLIPVisionModel

        from rvt_bench.adapters.lisa import model as lisa_model
        from rvt_bench.adapters.lisa.config import LisaConfig
        from rvt_bench.adapters.lisa.tokenizer import LisaTokenizer
        from rvt_bench.adapters.lisa.weights import load_into

        directory = self._resolve_checkpoint()
        code = legacy.detect(directory, self.code)
        tokenizer = LisaTokenizer(directory)
        if code == "v0":
            tokenizer.add_tokens(legacy.ADDED_TOKENS)
            config = LisaConfig.from_v0_dict(read_config_json(directory / "config.json", "lisa", "LISA"), len(tokenizer),
                                             str(directory / "config.json"))
        else:
            config = LisaConfig.from_json(directory / "config.json")
        seg_id = tokenizer.convert_tokens_to_ids(prompts.SEG_TOKEN)
        if seg_id is None:
            raise AdapterError(f"lisa: the tokenizer in {directory} has no {prompts.SEG_TOKEN} token (added_tokens.json)")
        device, dtype_name = self._device_dtype()
        dtype = getattr(torch, dtype_name)
        tower = self._resolve_tower(directory, config.vision_tower)
        try:
            # eager attention: LISA's 4.31 CLIP attention (sdpa rounds otherwise under bfloat16)
            clip, info = CLIPVisionModel.from_pretrained(tower, dtype=dtype, output_loading_info=True, attn_implementation="eager")
            # the PIL backend: LISA's 4.31 CLIPImageProcessor resized with PIL (the torchvision one differs by ~0.015)
            processor = CLIPImageProcessorPil.from_pretrained(tower)
        except Exception as exc:  # missing files / no network: one line naming the setting
            raise AdapterError(f"lisa: CLIP vision tower {tower!r} (config.vision_tower or model.vision_tower) cannot be loaded: {first_line(exc)}") from exc
        if info["missing_keys"]:
            raise AdapterError(f"lisa: CLIP vision tower {tower!r} lacks weights such as {sorted(info['missing_keys'])[0]!r}")
        if code == "v0":
            image_ids = (tokenizer.convert_tokens_to_ids(prompts.IM_START), tokenizer.convert_tokens_to_ids(prompts.IM_END))
            net = lisa_model.build(config, clip, device, dtype, image_ids)
            legacy.load_into(net, directory)
        else:
            net = lisa_model.build(config, clip, device, dtype)
            load_into(net, directory)
        self._loaded = (net, tokenizer, processor, seg_id, config)
        return self._loaded

    # --- prediction ---------------------------------------------------------------------------

    def prompt(self, sample: Sample, use_im_start_end: bool = True, code: str = "v1") -> str:
        """The prompt text for `sample` in this adapter's prompt_mode (rvt_bench.adapters.lisa.prompts;
        code "v0": rvt_bench.adapters.lisa.legacy, the image already expanded to its patch tokens)."""
        if code == "v0":
            if self.prompt_mode == "eval":
                return legacy.eval_prompt(sample.query, bool(sample.meta.get("is_sentence", True)))
            return legacy.generate_prompt(sample.query, self.chat_template)
        if self.prompt_mode == "eval":
            return prompts.eval_prompt(sample.query, bool(sample.meta.get("is_sentence", True)), use_im_start_end)
        return prompts.generate_prompt(sample.query, self.chat_template, use_im_start_end)

    def predict(self, sample: Sample) -> Prediction:
        if sample.task != "segmentation":
            raise AdapterError(f"sample {sample.id}: LISA answers segmentation only, not {sample.task!r}")
        import numpy as np

        from rvt_bench.adapters.lisa.preprocess import clip_input, sam_input
        from rvt_bench.core import masks
        from rvt_bench.core.frames import read_frame

        net, tokenizer, processor, seg_id, config = self._load()
        code = "v0" if net.image_ids is not None else "v1"
        text = self.prompt(sample, config.use_im_start_end, code)
        if code == "v0":
            token_ids = legacy.tokenize(text, tokenizer, self.prompt_mode == "eval")
        else:
            token_ids = prompts.tokenize_with_image(text, tokenizer)
        budget = self.max_new_tokens if self.prompt_mode == "generate" else 0
        rles, texts, frames_trace = [], [], []
        t0 = time.perf_counter()
        for frame in sample.frames:
            image = read_frame(frame)
            sam_pixels, resized = sam_input(image)
            out = net.run(token_ids, clip_input(image, processor), sam_pixels, resized, image.shape[:2], seg_id,
                          max_new_tokens=budget, eos_id=tokenizer.eos_token_id)
            mask = (out.logits > 0).any(dim=0).numpy() if len(out.logits) else np.zeros(image.shape[:2], bool)
            rles.append(masks.encode(mask))
            n_seg = int(out.logits.shape[0])
            entry = {"n_seg": n_seg}
            if budget:
                decoded = tokenizer.decode(out.generated)
                text = legacy.answer_text(decoded) if code == "v0" else decoded.replace("\n", "").replace("  ", " ")
                texts.append(text)
                entry["answer"] = text
            frames_trace.append(entry)
        text = texts[0] if len(texts) == 1 else ("\n".join(texts) if texts else None)
        return Prediction(sample_id=sample.id, task="segmentation", masks=rles, text=text,
                          trace={"prompt_mode": self.prompt_mode, "frames": frames_trace},
                          timings={"lisa": time.perf_counter() - t0})
