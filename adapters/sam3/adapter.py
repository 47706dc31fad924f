"""`sam3`: SAM 3 ("Segment Anything with Concepts", arXiv 2511.16719) on transformers' port
(Sam3VideoModel with its detector Sam3Model; Sam3Processor, Sam3VideoProcessor), the sample's query
as the concept prompt. conf/model/sam3.yaml configures it; docs/models.md gives the settings' sources.

Image: one detector pass; a query's score is sigmoid(class logit) x sigmoid(presence logit)
(transformers' post_process_instance_segmentation, as facebookresearch/sam3's
Sam3Processor._forward_grounding); the detections scoring above `threshold` (0.5, the repository's
Sam3Processor confidence_threshold) are kept, their masks (sigmoid > `mask_threshold`, 0.5, after
a bilinear resize to the frame) united into the sample's mask; each kept detection is also in the
trace as an instance (its own mask and score), which a benchmark that scores instances reads (SA-Co/
Gold, as SAM 3's evaluation dumps one COCO result per detection). No detection above the threshold
is the "no target" answer, its score 1 - the best detection score.

Video: SAM 3's video model (the detector on every frame, the tracker carrying the masklets, with
the thresholds of the checkpoint's Sam3VideoConfig), every tracked object of the prompt united per
frame; no object on any frame is the "no target" answer (score None: the video model reports only
the objects it keeps).

Grounding: per frame, the box enclosing the kept masks ([] where there is none). VQA and
summarization are refused in one line.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.adapters.checkpoint import checkpoint_dir, device_dtype
from rvt_bench.adapters.sam3 import cv_utils
from rvt_bench.adapters.sam3.detect import with_geometry_cls
from rvt_bench.core.codec import unencodable_reason
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample, first_line

ADAPTER_VERSION = 2  # 2: an image prediction carries its instances (trace "instances"), which SA-Co/Gold scores;
                     # facebookresearch/sam3's prompt (geometry_cls) and CPU video post-processing
WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.txt", "tokenizer*", "vocab*", "merges*"]
TASKS = ("segmentation", "grounding")


class Sam3Adapter(Adapter):
    """SAM 3 behind the Adapter protocol (module docstring).

    checkpoint:     a SAM 3 checkpoint directory (facebook/sam3's format: a sam3_video config.json,
                    its weights, the processor and tokenizer files) or a hub id fetched when online.
    prompt:         the concept prompt; "{query}" is replaced by the sample's query.
    threshold:      detection score above which a detection is kept (images), in [0, 1].
    mask_threshold: mask probability above which a pixel is foreground (images), in [0, 1].
    geometry_cls:   True (facebookresearch/sam3's prompt): the empty geometric prompt's CLS token
                    follows the text tokens, on images and every video frame; False: transformers'
                    Sam3Model (text only). rvt_bench.adapters.sam3.detect gives the sources.
    device:         "auto" (CUDA when present) | "cpu" | "cuda[:i]". dtype: "auto" | "bfloat16" | "float16" | "float32".

    predict(sample) -> Prediction(masks=[RLE per frame] | boxes=[[box] or [] per frame]) with trace
    {"prompt", "detections" (per frame: kept objects), "scores" (image: the kept scores; video: per
    frame [[object id, score], ...]), "best_score", and for an image "instances": [[RLE, score], ...]
    (each kept detection's mask at the frame's size, its score; the protocols' instance interface,
    e.g. SA-Co/Gold's)}, or Prediction.none_found. Raises AdapterError for vqa / summarization, a
    missing checkpoint.
    """

    stages = (("detected", "concept detected"), ("mask_decoded", "mask non-empty"))

    def __init__(self, checkpoint: str = "facebook/sam3", name: str = "sam3", prompt: str = "{query}",
                 threshold: float = 0.5, mask_threshold: float = 0.5, geometry_cls: bool = True, device: str = "auto",
                 dtype: str = "auto") -> None:
        if "{query}" not in prompt:
            raise AdapterError(f"sam3: model.prompt must contain '{{query}}', got {prompt!r}")
        for key, value in (("threshold", threshold), ("mask_threshold", mask_threshold)):
            if not 0.0 <= float(value) <= 1.0:
                raise AdapterError(f"sam3: model.{key} must lie in [0, 1], got {value}")
        if dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise AdapterError(f"sam3: model.dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
        self.name, self.checkpoint, self.prompt_template = name, str(checkpoint), prompt
        self.threshold, self.mask_threshold = float(threshold), float(mask_threshold)
        self.geometry_cls = bool(geometry_cls)
        self.device_setting, self.dtype_setting = device, dtype
        self._loaded: tuple | None = None

    def fingerprint(self) -> dict:
        _, dtype = device_dtype(self.device_setting, self.dtype_setting)
        path = Path(self.checkpoint)
        return {"adapter": "sam3", "version": ADAPTER_VERSION, "name": self.name,
                "checkpoint": str(path.resolve()) if path.exists() else self.checkpoint, "prompt": self.prompt_template,
                "threshold": self.threshold, "mask_threshold": self.mask_threshold,
                "geometry_cls": self.geometry_cls, "dtype": dtype}

    # --- loading ------------------------------------------------------------------------------

    def preflight(self) -> None:
        self._load()

    def close(self) -> None:
        self._loaded = None

    def _load(self) -> tuple:
        if self._loaded is not None:
            return self._loaded
        import torch

        directory = checkpoint_dir(self.checkpoint, "sam3", "SAM 3", "facebook/sam3", WEIGHT_PATTERNS)
        if not (directory / "config.json").is_file():
            raise AdapterError(f"sam3: {directory / 'config.json'} is missing (a SAM 3 checkpoint directory holds "
                               f"config.json, model.safetensors and the processor files)")
        device, dtype_name = device_dtype(self.device_setting, self.dtype_setting)
        if device == "cpu" and dtype_name != "float32":
            raise AdapterError(f"sam3: dtype {dtype_name} on the CPU is not supported; use float32 there")
        try:
            from transformers import Sam3Processor, Sam3VideoModel, Sam3VideoProcessor

            model = Sam3VideoModel.from_pretrained(str(directory), dtype=getattr(torch, dtype_name)).to(device).eval()
            if self.geometry_cls:
                with_geometry_cls(model.detector_model)
            cv_utils.install()
            image_processor = Sam3Processor.from_pretrained(str(directory))
            video_processor = Sam3VideoProcessor.from_pretrained(str(directory))
        except Exception as exc:  # missing / unreadable files come in many types: one line naming the setting
            raise AdapterError(f"sam3: model.checkpoint {directory} cannot be loaded as SAM 3: {first_line(exc)}") from exc
        self._loaded = (model, image_processor, video_processor, device, getattr(torch, dtype_name))
        return self._loaded

    # --- prediction ---------------------------------------------------------------------------

    def prompt(self, sample: Sample) -> str:
        """The concept prompt for `sample`: `prompt` with the query put in."""
        return self.prompt_template.replace("{query}", sample.query.strip())

    def predict(self, sample: Sample) -> Prediction:
        if sample.task not in TASKS:
            raise AdapterError(f"sample {sample.id}: SAM 3 answers segmentation and grounding, not {sample.task!r}")
        import numpy as np

        from rvt_bench.core.frames import read_frame

        frames = [np.ascontiguousarray(read_frame(f)) for f in sample.frames]
        if not frames:
            raise AdapterError(f"sample {sample.id}: no frames")
        text = self.prompt(sample)
        t0 = time.perf_counter()
        instances = None
        if sample.modality == "video":
            masks, best, detections, scores = self._video(frames, text)
        else:
            masks, best, detections, scores, instances = self._image(frames[0], text)
        timings = {"sam3": round(time.perf_counter() - t0, 4)}
        trace = {"prompt": text, "detections": detections, "scores": scores, "best_score": best}
        if instances is not None:
            trace["instances"] = instances
        if not any(detections):
            return Prediction.none_found(sample.id, None if best is None else round(1.0 - best, 6), task=sample.task,
                                         trace=trace, timings=timings)
        return self._answer(sample, masks, trace, timings)

    def _answer(self, sample: Sample, masks: list, trace: dict, timings: dict) -> Prediction:
        import numpy as np

        from rvt_bench.core import masks as mask_io

        pred = Prediction(sample_id=sample.id, task=sample.task, trace=trace, timings=timings)
        if sample.task == "segmentation":
            pred.masks = [mask_io.encode(m) for m in masks]
            return pred
        boxes = []
        for m in masks:
            ys, xs = np.nonzero(m)
            boxes.append([[float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]] if len(xs) else [])
        pred.boxes = boxes
        return pred

    @staticmethod
    def _tokens(tokenizer, model, text: str):
        """The prompt's token ids padded to, and cut at, the text encoder's context (32 for SAM 3:
        facebookresearch/sam3's tokenizer cuts at its context_length keeping the end token, as
        truncation=True does; transformers' processors pad to 32 but do not cut, so a long query
        would overflow the position embeddings). AdapterError for a text UTF-8 cannot encode (a lone
        surrogate, which a JSON query or an agent's phrase may hold): the tokenizer raises TypeError."""
        why = unencodable_reason("the concept prompt", text)
        if why is not None:
            raise AdapterError(f"sam3: {why}; SAM 3's tokenizer reads UTF-8 text only")
        context = int(model.config.detector_config.text_config.max_position_embeddings)
        return tokenizer(text, padding="max_length", truncation=True, max_length=context, return_tensors="pt")

    def detect(self, frame, text: str) -> tuple:
        """SAM 3's detections of the concept `text` on one (H, W, 3) uint8 RGB `frame`, above
        `threshold`: (masks (N, H, W) bool numpy, boxes [[x0, y0, x1, y1] frame pixels] * N,
        scores [float] * N, best score of any query or None). The detector pass of `_image`
        (sam3_agent's segment_phrase tool calls it per text prompt)."""
        import torch

        model, processor, _, device, dtype = self._load()
        pixels = processor(images=frame, return_tensors="pt")["pixel_values"].to(device, dtype)
        ids = self._tokens(processor.tokenizer, model, text)
        with torch.no_grad():
            out = model.detector_model(pixel_values=pixels, input_ids=ids.input_ids.to(device),
                                       attention_mask=ids.attention_mask.to(device))
        scores = out.pred_logits.float().sigmoid()
        if out.presence_logits is not None:
            scores = scores * out.presence_logits.float().sigmoid()
        best = float(scores.max()) if scores.numel() else None
        result = processor.post_process_instance_segmentation(out, threshold=self.threshold, mask_threshold=self.mask_threshold,
                                                              target_sizes=[list(frame.shape[:2])])[0]
        kept = result["masks"].bool().cpu().numpy().reshape(-1, *frame.shape[:2])
        boxes = [[float(v) for v in box] for box in result["boxes"].float().cpu().tolist()]
        return kept, boxes, [float(s) for s in result["scores"].float().cpu()], best

    def _image(self, frame, text: str) -> tuple[list, float | None, list[int], list[float], list]:
        import numpy as np

        from rvt_bench.core import masks as mask_io

        kept, _, scores, best = self.detect(frame, text)
        union = kept.any(axis=0) if len(kept) else np.zeros(frame.shape[:2], dtype=bool)
        scores = [round(s, 6) for s in scores]
        instances = [[mask_io.encode(m), s] for m, s in zip(kept, scores)]
        return [union], best, [int(len(kept))], scores, instances

    def _propagate(self, frames: list, text: str):
        """SAM 3's video model on `frames` with the concept `text`: yields (frame index, its
        postprocess_outputs dict: "object_ids", "scores", "masks" (N, H, W))."""
        import torch

        model, _, processor, device, dtype = self._load()
        height, width = frames[0].shape[:2]
        if any(f.shape[:2] != (height, width) for f in frames):
            raise AdapterError("SAM 3's video model needs frames of one size")
        session = processor.init_video_session(video=frames, inference_device=device, processing_device="cpu",
                                               video_storage_device="cpu", dtype=dtype)
        # add_text_prompt's steps, with the prompt cut to the text encoder's context (it does not cut)
        prompt_id = session.add_prompt(text)
        ids = self._tokens(processor.tokenizer, model, text)
        session.prompt_input_ids[prompt_id] = ids.input_ids.to(device)
        session.prompt_attention_masks[prompt_id] = ids.attention_mask.to(device)
        with torch.no_grad():
            for out in model.propagate_in_video_iterator(inference_session=session, max_frame_num_to_track=len(frames)):
                yield int(out.frame_idx), processor.postprocess_outputs(session, out)

    def tracks(self, frames: list, text: str) -> dict[int, "np.ndarray"]:
        """Every object SAM 3's video model tracks for the concept `text` through `frames`
        ((H, W, 3) uint8 RGB, one size): {object id: (T, H, W) bool masks}."""
        import numpy as np

        height, width = frames[0].shape[:2]
        out: dict[int, np.ndarray] = {}
        for idx, post in self._propagate(frames, text):
            for i, obj in enumerate(post["object_ids"].tolist()):
                track = out.setdefault(int(obj), np.zeros((len(frames), height, width), bool))
                track[idx] = post["masks"][i].bool().cpu().numpy()
        return out

    def _video(self, frames: list, text: str) -> tuple[list, float | None, list[int], list[list]]:
        """(per frame the union of the kept objects' masks (H, W) bool, the best object score over the
        clip or None, per frame the number of kept objects, per frame [[object id, score], ...])."""
        import numpy as np

        height, width = frames[0].shape[:2]
        masks = [np.zeros((height, width), bool) for _ in frames]
        counts = [0] * len(frames)
        objects: list[list] = [[] for _ in frames]
        best: float | None = None
        for idx, post in self._propagate(frames, text):
            kept = post["masks"].bool().cpu()
            counts[idx] = int(len(kept))
            objects[idx] = [[int(o), round(float(p), 6)] for o, p in zip(post["object_ids"].tolist(), post["scores"].float())]
            if len(kept):
                masks[idx] = kept.any(dim=0).numpy()
            if len(post["scores"]):
                top = float(post["scores"].float().max())
                best = top if best is None else max(best, top)
        return masks, best, counts, objects

    # --- report -------------------------------------------------------------------------------

    def passed(self, item: ScoredSample) -> dict[str, bool | None]:
        from rvt_bench.core import masks as mask_io

        pred = item.prediction
        trace = pred.trace if isinstance(pred.trace, dict) else {}
        if pred.error is not None and "detections" not in trace:
            return {"detected": False, "mask_decoded": False}
        detected = any(trace.get("detections") or [])
        if pred.task == "grounding":
            return {"detected": detected, "mask_decoded": None}
        return {"detected": detected, "mask_decoded": detected and any(mask_io.area(m) > 0 for m in pred.masks or [])}

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        traces = [item.prediction.trace for item in scored if isinstance(item.prediction.trace, dict)
                  and "detections" in item.prediction.trace]
        per_frame = [float(max(t["detections"])) for t in traces if t["detections"]]
        return [*M.mean("detections", "objects kept per sample (most on a frame; mean)", per_frame, "count"),
                *M.no_target(scored),
                *M.latency(scored, (("sam3", "model"), M.TOTAL))]
