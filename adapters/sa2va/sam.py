"""Sa2VA's grounding encoder: SAM2 (Hiera-L) from the ``sam2`` package, prompted by the [SEG]
embedding.

The network is ``sam2.modeling.sam2_base.SAM2Base`` built from the package's sam2_hiera_l.yaml with
the values Sa2VA's sam2.py ``SAM2.__init__`` passes (the same as that YAML but memory attention's
RoPE feat_sizes [32, 32]), so the checkpoint's ``grounding_encoder.sam2_model.*`` names are the
module's own. The forward pass is ours, written from Sa2VA's (sam2.py ``SAM2.language_embd_inference``
-> ``SAM2VideoPredictor.add_language_embd`` -> ``SAM2Base.track_step`` / ``_forward_sam_heads`` with
the ``language_embd`` extension, then ``propagate_in_video``):

- every frame gets the same [SEG] embedding and is added as an *initial conditioning frame*
  (``frame_idx not in frames_already_tracked`` holds for each), so no frame reads another's memory:
  backbone features + ``no_mem_embed`` (directly_add_no_mem_embed); ``propagate_in_video`` then
  returns the stored outputs of those conditioning frames. The memory encoder it runs on them
  feeds no output, so it is not run here.
- prompt encoder with no points (a zero point with label -1, and the encoder's own padding point:
  both embed as ``not_a_point_embed``) and no mask (``no_mask_embed``); the language embedding
  (1, 1, 256) is appended to the sparse embeddings -> (1, 3, 256).
- mask decoder with the high-resolution features, ``multimask_output=True`` (no points, initial
  conditioning frame), the mask with the highest predicted IoU; Sa2VA comments out SAM2's
  ``NO_OBJ_SCORE`` replacement of masks with a negative object score, so none is applied here.
- 256 x 256 low-resolution logits -> bilinear (align_corners=False) to 1024 x 1024
  (``_get_orig_video_res_output`` with video size = image_size) -> bilinear to the frame's size
  (``predict_forward``).

Source: Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 projects/llava_sam2/hf/models/sam2.py.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F


SAM_SIZE = 1024
SAM_MEAN = (0.485, 0.456, 0.406)
SAM_STD = (0.229, 0.224, 0.225)


def build_sam2(trunk: dict):
    """A SAM2Base (random weights) with Sa2VA's settings and the Hiera `trunk` sizes
    (config.SAM2_HIERA_L for the released checkpoints)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    # without sam2 the ModuleNotFoundError goes up as it is: the run stops with the install line of
    # the extra that lists it (pip install -e ".[sam2]"), as for every missing package
    from rvt_bench.adapters.twin.backends.sam2_pkg import import_sam2

    sam2 = import_sam2()  # leaves Hydra's global state as it found it
    cfg = OmegaConf.load(Path(sam2.__file__).parent / "configs" / "sam2" / "sam2_hiera_l.yaml")
    dim = int(trunk["embed_dim"])
    overrides = {
        "image_encoder": {"trunk": dict(trunk), "neck": {"backbone_channel_list": [dim * 8, dim * 4, dim * 2, dim]}},
        "memory_attention": {"layer": {"self_attention": {"feat_sizes": [32, 32]}, "cross_attention": {"feat_sizes": [32, 32]}}},
        "sam_mask_decoder_extra_args": {"dynamic_multimask_via_stability": True, "dynamic_multimask_stability_delta": 0.05,
                                        "dynamic_multimask_stability_thresh": 0.98},
    }
    cfg = OmegaConf.merge(cfg, {"model": overrides})
    OmegaConf.resolve(cfg)
    return instantiate(cfg.model, _recursive_=True).eval()


def sam_pixels(frame_1024) -> torch.Tensor:
    """(1024, 1024, 3) uint8 -> (3, 1024, 1024) float32: x / 255, minus mean, over std, with the
    mean and std rounded to bfloat16 first (sam2.py ``SAM2.preprocess_image``'s default
    ``dtype=torch.bfloat16``, which ``predict_forward`` keeps)."""
    image = torch.from_numpy(frame_1024).permute(2, 0, 1).contiguous() / 255.0
    mean = torch.tensor(SAM_MEAN, dtype=torch.bfloat16)[:, None, None]
    std = torch.tensor(SAM_STD, dtype=torch.bfloat16)[:, None, None]
    image -= mean
    image /= std
    return image


class FrameFeatures:
    """One frame's SAM2 backbone output, ready for the mask head: the 64 x 64 feature map with
    ``no_mem_embed`` added (1, 256, 64, 64) and the two high-resolution maps [(1, 32, 256, 256),
    (1, 64, 128, 128)]."""

    def __init__(self, sam, pixels):
        backbone = sam.forward_image(pixels[None])
        _, feats, pos, sizes = sam._prepare_backbone_features(backbone)
        self.high_res = [x.permute(1, 2, 0).view(x.size(1), x.size(2), *s) for x, s in zip(feats[:-1], sizes[:-1])]
        self.pix_feat = sam._prepare_memory_conditioned_features(
            frame_idx=0, is_init_cond_frame=True, current_vision_feats=feats[-1:], current_vision_pos_embeds=pos[-1:],
            feat_sizes=sizes[-1:], output_dict={"cond_frame_outputs": {}, "non_cond_frame_outputs": {}}, num_frames=1)


def language_mask(sam, features: FrameFeatures, language_embd, out_size: tuple[int, int]):
    """One frame, one [SEG]: (256,) embedding -> (H, W) float32 mask logits at `out_size` (H, W)."""
    b = 1
    device = features.pix_feat.device
    coords = torch.zeros(b, 1, 2, device=device)
    labels = -torch.ones(b, 1, dtype=torch.int32, device=device)
    sparse, dense = sam.sam_prompt_encoder(points=(coords, labels), boxes=None, masks=None)
    sparse = torch.cat([sparse, language_embd.reshape(1, 1, -1).to(sparse.dtype)], dim=1)
    low_res, ious, _, _ = sam.sam_mask_decoder(
        image_embeddings=features.pix_feat, image_pe=sam.sam_prompt_encoder.get_dense_pe(), sparse_prompt_embeddings=sparse,
        dense_prompt_embeddings=dense, multimask_output=True, repeat_image=False, high_res_features=features.high_res)
    low_res = low_res.float()
    best = torch.argmax(ious, dim=-1)
    low = low_res[torch.arange(b, device=device), best].unsqueeze(1)      # (1, 1, 256, 256)
    video_res = F.interpolate(low, size=(sam.image_size, sam.image_size), mode="bilinear", align_corners=False)
    return F.interpolate(video_res, size=out_size, mode="bilinear", align_corners=False)[0, 0]
