"""Depth Pro (transformers ``DepthProForDepthEstimation``, ``apple/DepthPro-hf``): metric depth per frame.

Depth Pro (Bochkovskii et al., arXiv 2410.02073) predicts a *canonical inverse depth* map and, with
its field-of-view head, the image's horizontal field of view in degrees; depth in metres follows
from the focal length. This backend does exactly what transformers'
``DepthProImageProcessor.post_process_depth_estimation`` does (transformers 5.x,
models/depth_pro/image_processing_depth_pro.py), per frame of width W px:

    focal_px = 0.5 * W / tan(0.5 * deg2rad(fov_deg))      # the estimated focal length
    inverse  = canonical_inverse_depth * W / focal_px      # = canonical * 2 tan(fov / 2)
    inverse  = resize(inverse, (H, W))                     # the processor's resample (bilinear)
    depth_m  = 1 / clamp(inverse, 1e-4, 1e4)               # metres, larger = farther

as Apple's reference ``DepthPro.infer`` (ml-depth-pro, src/depth_pro/depth_pro.py) does when no
focal length is given. The field of view is estimated from each frame on its own, so in a video the
scale may differ from frame to frame. The twin's ``depth_unit`` reads "m, larger = farther", as for
DepthAnything V2's metric checkpoints (rvt_bench.adapters.twin.backends.depth_anything).

A checkpoint without the field-of-view head (config ``use_fov_model: false``) gives depth only at
an assumed focal length (transformers then skips the scaling: metres only if the focal length equals
the image width); the backend refuses it with AdapterError rather than label it metres.

Chosen by ``perception/depth=depth_pro`` (conf/perception/depth/depth_pro.yaml); the plan node stays
``DepthAnything2`` (the plan grammar's depth tool), served by this model.
"""
from __future__ import annotations

from typing import Any

from rvt_bench.adapters.twin.backends.common import seeded
from rvt_bench.adapters.twin.backends.depth_anything import (METRIC_CONVENTION, METRIC_UNIT,
                                                             DepthAnythingBackend)
from rvt_bench.core.types import AdapterError

DEFAULT_MODEL = "apple/DepthPro-hf"


class DepthProBackend(DepthAnythingBackend):
    """Metric depth per frame from Depth Pro (see module docstring).

    batch_size: frames per forward pass. Other arguments: rvt_bench.adapters.twin.backends.common.ModelBackend.
    ``estimate`` is DepthAnythingBackend's (the processor's ``post_process_depth_estimation`` at each
    frame's size); the maps are metres.
    """

    name = "depth_pro"

    def __init__(self, model_id: str = DEFAULT_MODEL, revision: str = "main", device: str = "auto",
                 dtype: str = "auto", batch_size: int = 4):
        super().__init__(model_id, revision, device, dtype, batch_size, depth_estimation_type="metric")

    def load(self) -> tuple[Any, Any]:
        from transformers import AutoImageProcessor, DepthProForDepthEstimation

        kw = self.hub_kwargs()
        return (DepthProForDepthEstimation.from_pretrained(self.model_id, **kw),
                AutoImageProcessor.from_pretrained(self.model_id, **kw))

    def convention(self) -> tuple[str, str]:
        """("m", "larger = farther"); raises AdapterError for a checkpoint without the field-of-view
        head (its depth has no known scale)."""
        self.check_checkpoint()
        return METRIC_UNIT, METRIC_CONVENTION

    def declared_convention(self) -> tuple[str, str]:
        """("m", "larger = farther"), without loading anything."""
        return METRIC_UNIT, METRIC_CONVENTION

    def check_checkpoint(self) -> None:
        """AdapterError for a checkpoint without the field-of-view head (called before any forward pass)."""
        model, _ = self.components()
        if getattr(model, "fov_model", None) is None:
            raise AdapterError(f"{self.name}: {self.model_id!r} has no field-of-view head (use_fov_model is false), "
                               "so its depth has no metric scale; use a checkpoint with it (apple/DepthPro-hf) "
                               "or perception/depth=metric_indoor")

    @staticmethod
    def _as_float(outputs: Any) -> Any:
        outputs = DepthAnythingBackend._as_float(outputs)
        outputs.field_of_view = outputs.field_of_view.float()
        return outputs

    @classmethod
    def tiny(cls, seed: int = 0, **kwargs: Any) -> "DepthProBackend":
        """A random-weight Depth Pro (2-layer, 16-wide DINOv2 encoders with 4 px patches on 16 px
        tiles, two scales, the field-of-view head) and a processor at 32 px (the real one: 1536):
        the real code path, offline, in milliseconds; model id "tiny-random/depth-pro". Random
        weights would give a field of view near 0 degrees and a ReLU depth head mostly at 0 (every
        pixel clamped to 1e4 m), so two weights are set: the field-of-view head's output bias to
        60 degrees and the depth head's last convolution scaled by 0.003 with bias 1 (canonical
        inverse depth near 1, varying by pixel): metres of the order of 1, meaningless."""
        import torch
        from transformers import DepthProConfig, DepthProForDepthEstimation, DepthProImageProcessor

        encoder = {"model_type": "dinov2", "num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 2,
                   "patch_size": 4}
        config = DepthProConfig(patch_size=16, fusion_hidden_size=16, intermediate_hook_ids=[1, 0],
                                intermediate_feature_dims=[8, 8], scaled_images_ratios=[0.5, 1.0],
                                scaled_images_overlap_ratios=[0.0, 0.25], scaled_images_feature_dims=[8, 8],
                                use_fov_model=True, image_model_config=dict(encoder),
                                patch_model_config=dict(encoder), fov_model_config=dict(encoder))
        with seeded(seed):
            model = DepthProForDepthEstimation(config)
        with torch.no_grad():
            model.fov_model.head.layers[-1].bias.fill_(60.0)
            model.head.layers[4].weight.mul_(0.003)
            model.head.layers[4].bias.fill_(1.0)
        processor = DepthProImageProcessor(size={"height": 32, "width": 32})  # 32 x 0.5 = one 16 px tile
        return cls.from_components(model, processor, model_id="tiny-random/depth-pro", revision=f"seed{seed}",
                                   **kwargs)
