"""DINOv2 (transformers ``Dinov2Model``): appearance features of twin instances, as the JiT
digital twin (arXiv 2503.21056) uses DINOv2 for the visual attributes of its scene-graph nodes.

One feature per instance: the final-layer CLS token (after the model's layernorm, the pooler output)
of a crop around the instance's box on the frame where it is largest, L2-normalised, so the dot
product of two features is their cosine similarity. Crops are resized by the checkpoint's own image
processor (DINOv2: shortest edge 256, centre crop 224, ImageNet normalisation).

The same node gives each instance of the twin its *semantic embedding* (``Instance.embedding``, the
DT-R1 paper's instance semantic embeddings, arXiv 2511.12365): the final-layer patch tokens of the
same crop averaged with weights = the fraction of each 14 px patch that the instance's own mask
covers (the mask goes through the image processor's resize and centre crop with the crop, so the
weights sit on the patches the model saw), L2-normalised; the CLS feature when the mask covers no
patch of the centre crop. Pooling over the mask keeps a neighbour that shares the crop out of the
instance's embedding; the CLS feature above (JiT's) is left as it was.

The plan node "DINOv2" (rvt_bench.adapters.twin.registry) runs ``dinov2_step``; FoundationPerception serves it
through its public helpers, so the tool is this module, its ToolSpec and its config block.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rvt_bench.adapters.twin.backends.common import ModelBackend, seeded
from rvt_bench.adapters.twin.foundation import crop_box
from rvt_bench.adapters.twin.schema import Twin
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import Sample

if TYPE_CHECKING:
    from rvt_bench.adapters.twin.foundation import FoundationPerception

DEFAULT_MODEL = "facebook/dinov2-small"


class Dinov2Backend(ModelBackend):
    """Instance appearance features.

    batch_size: crops per forward pass. Other arguments: rvt_bench.adapters.twin.backends.common.ModelBackend.
    """

    name = "dinov2"

    def __init__(self, model_id: str = DEFAULT_MODEL, revision: str = "main", device: str = "auto",
                 dtype: str = "auto", batch_size: int = 16):
        super().__init__(model_id, revision, device, dtype)
        self.batch_size = int(batch_size)

    def load(self) -> tuple[Any, Any]:
        from transformers import AutoImageProcessor, Dinov2Model

        kw = self.hub_kwargs()
        return Dinov2Model.from_pretrained(self.model_id, **kw), AutoImageProcessor.from_pretrained(self.model_id, **kw)

    def embed(self, crops: list[np.ndarray]) -> np.ndarray:
        """(N, D) float32 L2-normalised features of N (h, w, 3) uint8 RGB crops; (0, D) for none."""
        import torch

        model, processor = self.components()
        rows: list[np.ndarray] = []
        for start in range(0, len(crops), self.batch_size):
            inputs = processor(images=list(crops[start:start + self.batch_size]), return_tensors="pt").to(self.device)
            inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
            with torch.inference_mode():
                pooled = model(**inputs).pooler_output.float()
            rows.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
        dim = int(model.config.hidden_size)
        return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, dim), np.float32)

    def embed_masked(self, crops: list[np.ndarray], masks: list[np.ndarray]) -> np.ndarray:
        """(N, D) float32 L2-normalised mask-pooled features (module docstring) of N (h, w, 3) uint8
        RGB crops and their (h, w) bool masks; (0, D) for none. Raises ValueError when a mask's shape
        is not its crop's (h, w) or the lists differ in length."""
        import torch

        if len(crops) != len(masks) or any(m.shape != c.shape[:2] for c, m in zip(crops, masks)):
            raise ValueError("embed_masked: one (h, w) mask per (h, w, 3) crop expected")
        model, processor = self.components()
        patch = int(model.config.patch_size)
        rows: list[np.ndarray] = []
        for start in range(0, len(crops), self.batch_size):
            batch = list(crops[start:start + self.batch_size])
            inputs = processor(images=batch, return_tensors="pt").to(self.device)
            inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
            # the masks as 0/255 images through the same resize and centre crop, not normalised: [0, 1]
            as_images = [np.repeat(m[..., None], 3, axis=2).astype(np.uint8) * 255
                         for m in masks[start:start + self.batch_size]]
            cover = processor(images=as_images, return_tensors="pt", do_normalize=False)["pixel_values"][:, :1]
            weights = torch.nn.functional.avg_pool2d(cover.float().clamp(0, 1), patch).flatten(1).to(self.device)
            with torch.inference_mode():
                out = model(**inputs)
            tokens = out.last_hidden_state[:, 1:].float()  # (B, P, D) patch tokens after the layernorm
            if tokens.shape[1] != weights.shape[1]:
                raise ValueError(f"embed_masked: {tokens.shape[1]} patch tokens but {weights.shape[1]} mask patches")
            total = weights.sum(1, keepdim=True)
            pooled = (weights[..., None] * tokens).sum(1) / total.clamp_min(1e-12)
            pooled = torch.where(total > 0, pooled, out.pooler_output.float())
            rows.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
        dim = int(model.config.hidden_size)
        return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, dim), np.float32)

    @classmethod
    def tiny(cls, seed: int = 0, **kwargs: Any) -> "Dinov2Backend":
        """A random-weight DINOv2 (1 layer, 16 wide, patch 14) with its processor at 56 px."""
        from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

        config = Dinov2Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                              patch_size=14, image_size=56)
        with seeded(seed):
            model = Dinov2Model(config)
        processor = BitImageProcessor(size={"shortest_edge": 64}, crop_size={"height": 56, "width": 56},
                                      do_convert_rgb=True)
        return cls.from_components(model, processor, model_id="tiny-random/dinov2", revision=f"seed{seed}", **kwargs)


def dinov2_step(perception: "FoundationPerception", sample: Sample, twin: Twin) -> None:
    """The "DINOv2" plan node: leave ``twin.artifacts["dinov2"]`` = {instance id: (D,) L2-normalised
    float32 feature} of each SAM2 instance's crop (rvt_bench.adapters.twin.foundation.crop_box), {} for no
    instance, and set each instance's ``embedding`` to its mask-pooled feature (module docstring) as
    a list of D floats rounded to 1e-6. Two cached calls: "DINOv2" keyed by the crop boxes,
    "DINOv2/instances" by the crop boxes and the instances' masks on the crops' frames. Raises
    AdapterError when no DINOv2 backend is configured (perception.dinov2)."""
    if not twin.instances:
        twin.artifacts["dinov2"] = {}
        return
    backend = perception.backend("DINOv2", sample)
    crops = [crop_box(inst, twin.size) for inst in twin.instances]

    def compute() -> dict:
        frames = perception.frames(sample, twin)
        return {"features": backend.embed([frames[t][y1:y2, x1:x2] for t, (x1, y1, x2, y2) in crops])}

    features = perception.cached("DINOv2", sample, twin, {"crops": crops}, compute)["features"]
    twin.artifacts["dinov2"] = {inst.id: np.asarray(f, dtype=np.float32) for inst, f in zip(twin.instances, features)}
    masks = [twin.masks[inst.frames[t].mask] for inst, (t, _) in zip(twin.instances, crops)]

    def compute_masked() -> dict:
        frames = perception.frames(sample, twin)
        return {"features": backend.embed_masked(
            [frames[t][y1:y2, x1:x2] for t, (x1, y1, x2, y2) in crops],
            [mask_io.decode(rle)[y1:y2, x1:x2] for rle, (t, (x1, y1, x2, y2)) in zip(masks, crops)])}

    pooled = perception.cached("DINOv2/instances", sample, twin, {"crops": crops, "masks": masks}, compute_masked)
    for inst, f in zip(twin.instances, pooled["features"]):
        inst.embedding = [round(float(v), 6) for v in np.asarray(f, dtype=np.float32)]
