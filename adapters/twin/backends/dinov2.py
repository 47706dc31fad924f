"""DINOv2 (transformers ``Dinov2Model``): appearance features of twin instances, as the JiT
digital twin (arXiv 2503.21056) uses DINOv2 for the visual attributes of its scene-graph nodes.

One feature per instance: the final-layer CLS token (after the model's layernorm, the pooler output)
of a crop around the instance's box on the frame where it is largest, L2-normalised, so the dot
product of two features is their cosine similarity. Crops are resized by the checkpoint's own image
processor (DINOv2: shortest edge 256, centre crop 224, ImageNet normalisation).

The plan node "DINOv2" (rvt_bench.adapters.twin.registry) runs ``dinov2_step``; FoundationPerception serves it
through its public helpers, so the tool is this module, its ToolSpec and its config block.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rvt_bench.adapters.twin.backends.common import ModelBackend, seeded
from rvt_bench.adapters.twin.foundation import crop_box
from rvt_bench.adapters.twin.schema import Twin
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
    instance. One cached call "DINOv2" keyed by the crop boxes. Raises AdapterError when no DINOv2
    backend is configured (perception.dinov2)."""
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
