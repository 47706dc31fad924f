"""Sa2VA's grounding encoder: SAM2 (Hiera-L) from the ``sam2`` package, prompted by the [SEG]
embedding on the first frames and tracking the rest from SAM2's memory.

The network is ``sam2.modeling.sam2_base.SAM2Base`` built from the package's sam2_hiera_l.yaml with
the values Sa2VA's sam2.py ``SAM2.__init__`` passes (the same as that YAML but memory attention's
RoPE feat_sizes [32, 32]), so the checkpoint's ``grounding_encoder.sam2_model.*`` names are the
module's own. The forward pass follows Sa2VA's (sam2.py ``SAM2.language_embd_inference`` ->
``SAM2VideoPredictor.add_language_embd`` on frames 0 .. n_cond - 1, then ``propagate_in_video``),
with the sam2 package's ``SAM2Base._prepare_memory_conditioned_features`` and ``_encode_new_memory``
(the same code as Sa2VA's copy under these settings) and Sa2VA's ``_forward_sam_heads`` (below):

- ``predict_forward`` prompts the first ``n_cond`` frames (the frames the LLM saw: an image's one,
  a video's first five) with the [SEG] embedding. Each is an *initial conditioning frame*
  (``frame_idx not in frames_already_tracked``): backbone features + ``no_mem_embed``
  (directly_add_no_mem_embed), no memory read.
- prompt encoder with no points (a zero point with label -1, and the encoder's own padding point:
  both embed as ``not_a_point_embed``) and no mask (``no_mask_embed``); the language embedding
  (1, 1, 256) is appended to the sparse embeddings -> (1, 3, 256). Later frames get no language
  embedding (sparse (1, 2, 256)).
- mask decoder with the high-resolution features, ``multimask_output=True`` (no points:
  multimask_min_pt_num 0 <= 0 <= 1, on conditioning frames and when tracking), the mask with the
  highest predicted IoU; the object pointer from that mask's output token, replaced by
  ``no_obj_ptr`` when the object score is <= 0. Sa2VA comments out SAM2's ``NO_OBJ_SCORE``
  replacement of the *masks* with a negative object score, so none is applied here.
- ``propagate_in_video_preflight``: each conditioning frame's memory is encoded from its mask
  (low-resolution logits -> bilinear 1024 -> sigmoid x 20 - 10; ``is_mask_from_pts=True``, not
  binarized: binarize_mask_from_pts_for_mem_enc is off) and stored in bfloat16
  (``_run_memory_encoder``'s ``maskmem_features.to(torch.bfloat16)``, in float32 runs too), its
  object pointer in float32.
- ``propagate_in_video`` from frame 0 to the last: a conditioning frame returns its stored mask;
  every later frame is tracked (``is_init_cond_frame=False``): memory attention over all
  conditioning frames' memories (t_pos 0) and the up to 6 previous tracked frames', plus the object
  pointers of the conditioning frames at or before it and of up to 15 previous tracked frames (at
  most ``min(num_frames, 16)``), then the mask head without a language embedding; its memory is
  encoded from its own mask (``is_mask_from_pts=False``) and stored in bfloat16 too.
- 256 x 256 low-resolution logits -> bilinear (align_corners=False) to 1024 x 1024
  (``_get_orig_video_res_output`` with video size = image_size) -> bilinear to the frame's size
  (``predict_forward``).

Source: Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 projects/llava_sam2/hf/models/sam2.py
(``SAM2Base._forward_sam_heads``, ``SAM2VideoPredictor.add_language_embd``,
``_run_single_frame_inference``, ``_consolidate_temp_output_across_obj``, ``_run_memory_encoder``,
``propagate_in_video``) and modeling_sa2va_chat.py ``predict_forward``.
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
    sam = instantiate(cfg.model, _recursive_=True).eval()
    sam.sam_mask_decoder.transformer.register_forward_pre_hook(_tokens_in_pe_dtype)
    return sam


def _tokens_in_pe_dtype(transformer, args):
    """Sa2VA's ``MaskDecoder.predict_masks`` casts the image embedding and the tokens to the positional
    encoding's dtype before its transformer (``src.to(pos_src.dtype)``, ``tokens.to(...)``; not in the
    sam2 package): a no-op in float32; in bfloat16 the point embedding and the memory-conditioned
    features come in float32 and the residual stream is kept in bfloat16 as theirs."""
    src, pos_src, tokens = args
    return src.to(pos_src.dtype), pos_src, tokens.to(pos_src.dtype)


def sam_pixels(frame_1024, dtype=torch.float32, image: bool = False) -> torch.Tensor:
    """(1024, 1024, 3) uint8 -> (3, 1024, 1024) in `dtype` (the model's; ``predict_forward``'s
    ``torch_dtype``): x / 255, minus mean, over std, the mean and std rounded to bfloat16 first
    (sam2.py ``SAM2.preprocess_image``'s default ``dtype=torch.bfloat16``, which ``predict_forward``
    keeps). A video frame is normalised in float32 and then cast to `dtype`; an image (image=True)
    is cast to `dtype` first and normalised in it (``predict_forward``'s image branch: ``.to(torch_dtype)``
    before ``preprocess_image``; in bfloat16 every step rounds to bfloat16)."""
    pixels = torch.from_numpy(frame_1024).permute(2, 0, 1).contiguous()
    if image:
        pixels = pixels.to(dtype)
    pixels = pixels / 255.0
    mean = torch.tensor(SAM_MEAN, dtype=torch.bfloat16)[:, None, None]
    std = torch.tensor(SAM_STD, dtype=torch.bfloat16)[:, None, None]
    pixels -= mean
    pixels /= std
    return pixels.to(dtype)


def frame_features(sam, pixels):
    """One frame's SAM2 backbone output (``_get_image_feature``): (vision_feats, vision_pos_embeds,
    feat_sizes) as ``_prepare_backbone_features`` returns them, (HW, 1, C) per level, finest first."""
    _, feats, pos, sizes = sam._prepare_backbone_features(sam.forward_image(pixels[None]))
    return feats, pos, sizes


def sam_heads(sam, pix_feat, high_res, language_embd=None):
    """Sa2VA's ``SAM2Base._forward_sam_heads`` with no points and no mask input, multimask output:
    pix_feat (1, 256, 64, 64), high_res [(1, 32, 256, 256), (1, 64, 128, 128)], language_embd
    (1, 1, 256) or None -> (low-res logits (1, 1, 256, 256) float32, high-res logits
    (1, 1, 1024, 1024) float32, object pointer (1, 256))."""
    b = pix_feat.size(0)
    device = pix_feat.device
    coords = torch.zeros(b, 1, 2, device=device)
    labels = -torch.ones(b, 1, dtype=torch.int32, device=device)
    sparse, dense = sam.sam_prompt_encoder(points=(coords, labels), boxes=None, masks=None)
    if language_embd is not None:
        sparse = torch.cat([sparse, language_embd], dim=1)
    low_res_multi, ious, tokens, object_score_logits = sam.sam_mask_decoder(
        image_embeddings=pix_feat, image_pe=sam.sam_prompt_encoder.get_dense_pe(), sparse_prompt_embeddings=sparse,
        dense_prompt_embeddings=dense, multimask_output=True, repeat_image=False, high_res_features=high_res)
    is_obj_appearing = object_score_logits > 0
    low_res_multi = low_res_multi.float()
    high_res_multi = F.interpolate(low_res_multi, size=(sam.image_size, sam.image_size), mode="bilinear", align_corners=False)
    best = torch.argmax(ious, dim=-1)
    rows = torch.arange(b, device=device)
    low_res, high_res_mask = low_res_multi[rows, best].unsqueeze(1), high_res_multi[rows, best].unsqueeze(1)
    token = tokens[rows, best] if tokens.size(1) > 1 else tokens[:, 0]
    obj_ptr = sam.obj_ptr_proj(token)
    appearing = is_obj_appearing.float()  # soft_no_obj_ptr is off
    if sam.fixed_no_obj_ptr:
        obj_ptr = appearing * obj_ptr
    obj_ptr = obj_ptr + (1 - appearing) * sam.no_obj_ptr
    return low_res, high_res_mask, obj_ptr


def _memory(sam, feats, sizes, high_res_mask, from_prompt: bool, pos_cache: list):
    """``_encode_new_memory`` -> (maskmem_features in bfloat16, maskmem_pos_enc: the first frame's,
    as ``_get_maskmem_pos_enc`` caches it)."""
    features, pos = sam._encode_new_memory(current_vision_feats=feats, feat_sizes=sizes, pred_masks_high_res=high_res_mask,
                                           object_score_logits=None, is_mask_from_pts=from_prompt)
    if not pos_cache:
        pos_cache.extend(x[0:1].clone() for x in pos)
    return features.to(torch.bfloat16), list(pos_cache)


def track(sam, frames: list, language_embd, n_cond: int, out_size: tuple[int, int], device, dtype):
    """One [SEG] over a clip (``language_embd_inference``): frames F tensors (3, 1024, 1024) float32
    (sam_pixels), language_embd (256,), the first n_cond (1 <= n_cond <= F) frames prompted with it,
    the rest tracked from memory -> (F, H, W) float32 mask logits at out_size (H, W)."""
    n_frames = len(frames)
    embd = language_embd.reshape(1, 1, -1)
    output = {"cond_frame_outputs": {}, "non_cond_frame_outputs": {}}
    pos_cache: list = []
    logits = []
    for idx in range(n_frames):
        feats, pos, sizes = frame_features(sam, frames[idx].to(device, dtype))
        high_res = [x.permute(1, 2, 0).view(x.size(1), x.size(2), *s) for x, s in zip(feats[:-1], sizes[:-1])]
        cond = idx < n_cond
        pix_feat = sam._prepare_memory_conditioned_features(
            frame_idx=idx, is_init_cond_frame=cond, current_vision_feats=feats[-1:], current_vision_pos_embeds=pos[-1:],
            feat_sizes=sizes[-1:], output_dict=output, num_frames=n_frames)
        low_res, high_res_mask, obj_ptr = sam_heads(sam, pix_feat, high_res, embd if cond else None)
        if cond:  # consolidated (float32 masks and pointer), memory from the upsampled stored mask
            low_res, obj_ptr = low_res.float(), obj_ptr.float()
            high_res_mask = F.interpolate(low_res, size=(sam.image_size, sam.image_size), mode="bilinear", align_corners=False)
        memory, memory_pos = _memory(sam, feats, sizes, high_res_mask, cond, pos_cache)
        key = "cond_frame_outputs" if cond else "non_cond_frame_outputs"
        output[key][idx] = {"maskmem_features": memory, "maskmem_pos_enc": memory_pos, "pred_masks": low_res, "obj_ptr": obj_ptr}
        video_res = F.interpolate(low_res, size=(sam.image_size, sam.image_size), mode="bilinear", align_corners=False)
        logits.append(F.interpolate(video_res, size=out_size, mode="bilinear", align_corners=False)[0, 0])
    return torch.stack(logits)
