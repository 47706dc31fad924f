"""SAM 3's detector prompt as facebookresearch/sam3 builds it, on transformers' Sam3Model: the text
tokens followed by the geometry encoder's output for an empty geometric prompt (its CLS token), as
Sam3Image._encode_prompt always concatenates them (sam3/model/sam3_image.py:
`prompt = torch.cat([txt_feats, geo_feats, visual_prompt_embed], dim=0)`, the geometry encoder
built with add_cls=True in sam3/model_builder.py _create_geometry_encoder). transformers'
Sam3Model.forward runs the geometry encoder only when boxes are given, so there a text-only prompt
lacks that token, which every consumer of the prompt sees (DETR encoder and decoder, dot-product
scoring, mask decoder). with_geometry_cls(detector) makes a Sam3Model instance behave as Meta's on
text-only calls, including the calls Sam3VideoModel.run_detection makes on every frame.
"""
from __future__ import annotations

import copy
from typing import Any


def with_geometry_cls(detector: Any) -> Any:
    """Give the Sam3Model `detector` (in place; returned) facebookresearch/sam3's prompt on calls
    without boxes: its forward, given pixel_values or vision_embeds and input_ids or text_embeds
    with their (B, L) attention_mask, appends the empty geometric prompt's CLS token (B, 1, 256)
    to the text features and a 1 to the mask. Calls with input_boxes are left as they are (the
    geometry encoder runs there, with its CLS token, in both implementations). Idempotent."""
    if getattr(detector, "_rvt_geometry_cls", False):
        return detector
    forward = detector.forward

    def meta_prompt(pixel_values=None, vision_embeds=None, input_ids=None, attention_mask=None, text_embeds=None,
                    input_boxes=None, input_boxes_labels=None, **kwargs):
        import torch

        if input_boxes is not None and input_boxes.numel() > 0:
            return forward(pixel_values=pixel_values, vision_embeds=vision_embeds, input_ids=input_ids,
                           attention_mask=attention_mask, text_embeds=text_embeds, input_boxes=input_boxes,
                           input_boxes_labels=input_boxes_labels, **kwargs)
        if vision_embeds is None:
            vision_embeds = detector.vision_encoder(pixel_values)
        if text_embeds is None:
            text_embeds = detector.get_text_features(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        features = text_embeds.pooler_output
        batch, device = features.shape[0], features.device
        if attention_mask is None:
            attention_mask = torch.ones(features.shape[:2], dtype=torch.bool, device=device)
        geometry = detector.geometry_encoder(
            box_embeddings=torch.zeros(batch, 0, 4, dtype=features.dtype, device=device),
            box_mask=torch.zeros(batch, 0, dtype=torch.bool, device=device),
            box_labels=torch.zeros(batch, 0, dtype=torch.long, device=device),
            img_feats=vision_embeds.fpn_hidden_states[:-1], img_pos_embeds=vision_embeds.fpn_position_encoding[:-1])
        prompt = copy.copy(text_embeds)  # the session caches text_embeds: not changed in place
        prompt.pooler_output = torch.cat([features, geometry.last_hidden_state.to(features.dtype)], dim=1)
        mask = torch.cat([attention_mask.bool(), geometry.attention_mask.bool()], dim=1)
        return forward(vision_embeds=vision_embeds, text_embeds=prompt, attention_mask=mask, **kwargs)

    detector.forward = meta_prompt
    detector._rvt_geometry_cls = True
    return detector
