"""DepthAnything V2 (transformers ``DepthAnythingForDepthEstimation``): one depth map per frame.

The released V2 checkpoints (``depth-anything/Depth-Anything-V2-{Small,Base,Large}-hf``) are the
*relative* models: their output is affine-invariant inverse depth (disparity-like), so LARGER
values are NEARER and the unit is arbitrary per frame (Depth Anything V2, arXiv 2406.09414, sec. 4;
transformers' ``post_process_depth_estimation`` returns it as ``predicted_depth``). The twin says so:
``UNIT`` and ``CONVENTION`` below are what DepthStats writes into each instance's depth.
Metric checkpoints (``depth-anything/Depth-Anything-V2-Metric-{Indoor,Outdoor}-{Small,Base,Large}-hf``:
depth in metres, larger = farther; the head is a sigmoid scaled by the config's ``max_depth``, 20 m
indoor (trained on Hypersim), 80 m outdoor (Virtual KITTI 2)) are recognised by their config's
``depth_estimation_type == "metric"`` and reported as such: the twin's ``depth_unit`` then reads
"m, larger = farther" and each instance's depth mean/std are metres of the model's output. They are
chosen by the perception setting ``perception/depth=metric_indoor`` or ``metric_outdoor``
(conf/perception/depth/); the default, ``relative``, is the relative checkpoint above.
The backend's own ``depth_estimation_type`` setting declares which kind its checkpoint is, so the
unit is known before any weight loads (``declared_convention``: the DT-R1 system prompt states it);
a checkpoint whose config says otherwise is refused at its first frame (AdapterError, one line).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rvt_bench.adapters.twin.backends.common import ModelBackend, seeded
from rvt_bench.core.types import AdapterError

DEFAULT_MODEL = "depth-anything/Depth-Anything-V2-Small-hf"
RELATIVE_UNIT = "relative"
RELATIVE_CONVENTION = "relative inverse depth, larger = nearer"
METRIC_UNIT = "m"
METRIC_CONVENTION = "larger = farther"


class DepthAnythingBackend(ModelBackend):
    """Depth per frame.

    batch_size: frames per forward pass. Other arguments: rvt_bench.adapters.twin.backends.common.ModelBackend.
    """

    name = "depth_anything_v2"

    def __init__(self, model_id: str = DEFAULT_MODEL, revision: str = "main", device: str = "auto",
                 dtype: str = "auto", batch_size: int = 8, depth_estimation_type: str = "relative"):
        super().__init__(model_id, revision, device, dtype)
        self.batch_size = int(batch_size)
        if depth_estimation_type not in ("relative", "metric"):
            raise AdapterError(f"perception.depth.depth_estimation_type={depth_estimation_type!r}: "
                               "expected relative or metric")
        # not in the fingerprint: the checkpoint (model_id, revision) decides the maps; this declares them
        self.depth_estimation_type = depth_estimation_type

    def load(self) -> tuple[Any, Any]:
        from transformers import AutoImageProcessor, DepthAnythingForDepthEstimation

        kw = self.hub_kwargs()
        return (DepthAnythingForDepthEstimation.from_pretrained(self.model_id, **kw),
                AutoImageProcessor.from_pretrained(self.model_id, **kw))

    def convention(self) -> tuple[str, str]:
        """(unit, convention) of the maps ``estimate`` returns (relative unless the checkpoint's
        config declares ``depth_estimation_type: metric``)."""
        model, _ = self.components()
        if getattr(model.config, "depth_estimation_type", "relative") == "metric":
            return METRIC_UNIT, METRIC_CONVENTION
        return RELATIVE_UNIT, RELATIVE_CONVENTION

    def declared_convention(self) -> tuple[str, str]:
        """(unit, convention) as the ``depth_estimation_type`` setting declares them, without loading
        anything (``check_checkpoint`` holds the checkpoint to it)."""
        if self.depth_estimation_type == "metric":
            return METRIC_UNIT, METRIC_CONVENTION
        return RELATIVE_UNIT, RELATIVE_CONVENTION

    def check_checkpoint(self) -> None:
        """AdapterError when the loaded checkpoint's maps are not what ``declared_convention`` says."""
        if self.convention() != self.declared_convention():
            model, _ = self.components()
            actual = getattr(model.config, "depth_estimation_type", "relative")
            raise AdapterError(f"{self.name}: {self.model_id!r} is a {actual} depth checkpoint but "
                               f"perception.depth.depth_estimation_type is {self.depth_estimation_type}; set "
                               f"perception.depth.depth_estimation_type={actual}")

    def estimate(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        """Depth of each (H, W, 3) uint8 RGB frame as an (H, W) float32 map at the frame's own size
        (the model's output is resized back by the processor's ``post_process_depth_estimation``:
        bicubic, align_corners=False; the DepthAnything V2 repository's ``infer_image`` uses bilinear
        with align_corners=True, so values differ slightly at edges); see ``convention``."""
        import torch

        self.check_checkpoint()
        model, processor = self.components()
        out: list[np.ndarray] = []
        for start in range(0, len(frames), self.batch_size):
            batch = frames[start:start + self.batch_size]
            inputs = processor(images=list(batch), return_tensors="pt").to(self.device)
            inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
            with torch.inference_mode():
                outputs = model(**inputs)
            outputs = self._as_float(outputs)
            sizes = [(int(f.shape[0]), int(f.shape[1])) for f in batch]
            for result in processor.post_process_depth_estimation(outputs, target_sizes=sizes):
                out.append(result["predicted_depth"].detach().float().cpu().numpy().astype(np.float32))
        return out

    @staticmethod
    def _as_float(outputs: Any) -> Any:
        """The model's outputs that post-processing reads, in float32 (a bfloat16 model's included)."""
        outputs.predicted_depth = outputs.predicted_depth.float()
        return outputs

    @classmethod
    def tiny(cls, seed: int = 0, max_depth: int | None = None, **kwargs: Any) -> "DepthAnythingBackend":
        """A random-weight DepthAnything with a 4-layer, 16-wide DINOv2 backbone and a DPT processor
        at 56 px (the real one uses 518): the real code path, offline, in milliseconds. max_depth:
        None = a relative model (model id "tiny-random/depth-anything-v2"); a number = a metric one
        (``depth_estimation_type: metric``, sigmoid head scaled to max_depth metres; model id
        "tiny-random/depth-anything-v2-metric-<max_depth>")."""
        from transformers import (DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config,
                                  DPTImageProcessor)

        backbone = Dinov2Config(hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=32,
                                patch_size=14, image_size=56, reshape_hidden_states=False,
                                out_features=["stage1", "stage2", "stage3", "stage4"])
        config = DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=16,
                                     neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=8, head_hidden_size=8,
                                     patch_size=14, depth_estimation_type="relative" if max_depth is None else "metric",
                                     **({} if max_depth is None else {"max_depth": int(max_depth)}))
        with seeded(seed):
            model = DepthAnythingForDepthEstimation(config)
        # the V2 processor settings (keep aspect ratio, multiple of 14, bicubic), smaller
        processor = DPTImageProcessor(size={"height": 56, "width": 56}, keep_aspect_ratio=True,
                                      ensure_multiple_of=14, do_pad=False, resample=3)
        model_id = "tiny-random/depth-anything-v2" + ("" if max_depth is None else f"-metric-{int(max_depth)}")
        return cls.from_components(model, processor, model_id=model_id, revision=f"seed{seed}",
                                   depth_estimation_type=config.depth_estimation_type, **kwargs)
