"""SAM 3 as a twin segmenter: the `segment` interface of the twin's SAM2 backends
(rvt_bench.adapters.twin.backends.sam2_hf.Sam2HFBackend.segment -> list[Track]) served by SAM 3's
video model (transformers' Sam3VideoModel + Sam3VideoProcessor): concept detection on every frame and
tracking, one Track per object SAM 3 keeps; the detector's prompt and the video post-processing are
facebookresearch/sam3's, as in the sam3 adapter (rvt_bench.adapters.sam3.detect, .cv_utils).

Concepts: the detector's labels when a detector prompted the segmenter (OWLv2's phrases, upstream in
the plan; an empty prompt list yields no tracks), else `concepts` (the foundation perception's
vocabulary by default). SAM 3 detects on every frame, so the key frame is not needed: objects found
anywhere in the clip are tracked from where they appear. Track.score = the object's best detection
score over the frames, Track.label = its concept. At most `max_instances` tracks, best score first.

Selected by `perception/segmenter=sam3` (conf/perception/segmenter/sam3.yaml; `sam3_tiny` for a
tiny random model), which the foundation perception puts in the SAM2 node's place.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rvt_bench.adapters.sam3 import cv_utils
from rvt_bench.adapters.sam3.adapter import Sam3Adapter
from rvt_bench.adapters.sam3.detect import with_geometry_cls
from rvt_bench.adapters.twin.backends.common import ModelBackend
from rvt_bench.adapters.twin.backends.sam2_common import Track

DEFAULT_CONCEPTS = ("person", "animal", "vehicle", "object")


class Sam3Segmenter(ModelBackend):
    """SAM 3 concept segmentation + tracking behind the twin's segmenter interface (module docstring).

    model_id: facebook/sam3 or a local directory in its format. concepts: the noun phrases prompted
    when no detector labels are given. max_instances: most tracks returned.
    """

    name = "sam3_hf"

    def __init__(self, model_id: str = "facebook/sam3", revision: str = "main", device: str = "auto",
                 dtype: str = "float32", concepts: list[str] | tuple[str, ...] = DEFAULT_CONCEPTS,
                 max_instances: int = 10):
        # "meta": facebookresearch/sam3's prompt and CPU post-processing (segment()), in the fingerprint
        super().__init__(model_id, revision, device, dtype, concepts=[str(c) for c in concepts],
                         max_instances=int(max_instances), behaviour="meta")

    @classmethod
    def tiny(cls, seed: int = 0, **kwargs: Any) -> "Sam3Segmenter":
        """Around a random-weight SAM 3 (rvt_bench.adapters.sam3.tiny): no download, meaningless tracks."""
        from rvt_bench.adapters.sam3 import tiny

        model, processor = tiny.model(seed)
        return cls.from_components(model, processor, model_id=f"tiny-random-sam3-seed{seed}", revision="none", **kwargs)

    def load(self) -> tuple[Any, Any]:
        from transformers import Sam3VideoModel, Sam3VideoProcessor

        kw = self.hub_kwargs()
        return Sam3VideoModel.from_pretrained(self.model_id, **kw), Sam3VideoProcessor.from_pretrained(self.model_id, **kw)

    def segment(self, frames: list[np.ndarray], key_frame: int, boxes: list[list[float]] | None = None,
                labels: list[str] | None = None, scores: list[float] | None = None) -> list[Track]:
        """Tracks of the objects of the concepts through all (H, W, 3) uint8 RGB `frames`;
        `key_frame` is accepted for the interface and unused (SAM 3 detects on every frame);
        `boxes` only say whether a detector ran (an empty list: no tracks), `scores` are unused."""
        import torch

        if boxes is not None and not boxes:
            return []
        concepts = list(dict.fromkeys(str(label) for label in labels if label)) if labels else list(self.params["concepts"])
        if not concepts:
            return []
        model, processor = self.components()
        with_geometry_cls(model.detector_model)  # facebookresearch/sam3's prompt, as Sam3Adapter's default
        cv_utils.install()  # Meta's CPU NMS and hole filling where transformers' hub kernel is missing
        height, width = frames[0].shape[:2]
        session = processor.init_video_session(video=frames, inference_device=self.device, processing_device="cpu",
                                               video_storage_device="cpu", dtype=next(model.parameters()).dtype)
        prompt_of: dict[int, str] = {}
        for text in concepts:  # add_text_prompt's steps, the prompt cut at the text context (Sam3Adapter._tokens)
            prompt_id = session.add_prompt(text)
            ids = Sam3Adapter._tokens(processor.tokenizer, model, text)
            session.prompt_input_ids[prompt_id] = ids.input_ids.to(self.device)
            session.prompt_attention_masks[prompt_id] = ids.attention_mask.to(self.device)
            prompt_of[prompt_id] = text
        masks: dict[int, np.ndarray] = {}
        best: dict[int, float] = {}
        label_of: dict[int, str] = {}
        with torch.no_grad():
            for out in model.propagate_in_video_iterator(inference_session=session, max_frame_num_to_track=len(frames)):
                post = processor.postprocess_outputs(session, out)
                t = int(out.frame_idx)
                for text, ids in post["prompt_to_obj_ids"].items():
                    for obj in ids:
                        label_of[int(obj)] = text
                for i, obj in enumerate(post["object_ids"].tolist()):
                    track = masks.setdefault(int(obj), np.zeros((len(frames), height, width), bool))
                    track[t] = post["masks"][i].cpu().numpy()
                    best[int(obj)] = max(best.get(int(obj), 0.0), float(post["scores"][i]))
        order = sorted((obj for obj in masks if masks[obj].any()), key=lambda obj: (-best[obj], obj))
        return [Track(masks=masks[obj], score=best[obj], label=label_of.get(obj)) for obj in order[:self.params["max_instances"]]]
