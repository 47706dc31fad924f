"""InternViT (InternVL2.5's vision tower, InternViT-300M-448px-V2_5 in Sa2VA-1B/-4B) as a small
module of ours whose parameter names are the checkpoint's own (``vision_model.embeddings.*``,
``vision_model.encoder.layers.N.{attn.qkv,attn.proj,mlp.fc1,mlp.fc2,norm1,norm2,ls1,ls2}``), so the
released safetensors load without renaming. transformers' InternVLVisionModel computes the same
function but splits ``qkv`` and renames every key; this keeps the released layout.

Source: Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 projects/llava_sam2/hf/models/
modeling_intern_vit.py (``InternVisionEmbeddings``, ``InternAttention._naive_attn``,
``InternVisionEncoderLayer``; inference: dropout and drop-path are identities).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class InternRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)


def _norm(kind: str, dim: int, eps: float) -> nn.Module:
    return nn.LayerNorm(dim, eps=eps) if kind == "layer_norm" else InternRMSNorm(dim, eps=eps)


class InternVisionEmbeddings(nn.Module):
    def __init__(self, v: dict):
        super().__init__()
        self.embed_dim, self.image_size, self.patch_size = int(v["hidden_size"]), int(v["image_size"]), int(v["patch_size"])
        self.class_embedding = nn.Parameter(torch.zeros(1, 1, self.embed_dim))
        self.patch_embedding = nn.Conv2d(3, self.embed_dim, kernel_size=self.patch_size, stride=self.patch_size)
        self.position_embedding = nn.Parameter(torch.zeros(1, (self.image_size // self.patch_size) ** 2 + 1, self.embed_dim))

    def _pos(self, pos, h: int, w: int):
        side = self.image_size // self.patch_size
        pos = pos.float().reshape(1, side, side, -1).permute(0, 3, 1, 2)
        pos = F.interpolate(pos, size=(h, w), mode="bicubic", align_corners=False)
        return pos.reshape(1, -1, h * w).permute(0, 2, 1)

    def forward(self, pixel_values):
        """(N, 3, S, S) -> (N, 1 + (S/14)^2, C): CLS + patches, plus (bicubic-resized) positions."""
        dtype = self.patch_embedding.weight.dtype
        patches = self.patch_embedding(pixel_values)
        n, _, h, w = patches.shape
        patches = patches.flatten(2).transpose(1, 2)
        x = torch.cat([self.class_embedding.expand(n, 1, -1).to(dtype), patches], dim=1)
        pos = torch.cat([self.position_embedding[:, :1], self._pos(self.position_embedding[:, 1:], h, w).to(self.position_embedding.dtype)], dim=1)
        return x + pos.to(dtype)


class InternAttention(nn.Module):
    def __init__(self, v: dict):
        super().__init__()
        self.embed_dim, self.num_heads = int(v["hidden_size"]), int(v["num_attention_heads"])
        self.scale = (self.embed_dim // self.num_heads) ** -0.5
        self.qkv = nn.Linear(self.embed_dim, 3 * self.embed_dim, bias=bool(v["qkv_bias"]))
        self.qk_normalization = bool(v["qk_normalization"])
        if self.qk_normalization:
            self.q_norm = InternRMSNorm(self.embed_dim, eps=float(v["layer_norm_eps"]))
            self.k_norm = InternRMSNorm(self.embed_dim, eps=float(v["layer_norm_eps"]))
        self.proj = nn.Linear(self.embed_dim, self.embed_dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        if self.qk_normalization:
            bh, hh, nh, dh = q.shape
            q = self.q_norm(q.transpose(1, 2).flatten(-2, -1)).view(bh, nh, hh, dh).transpose(1, 2)
            k = self.k_norm(k.transpose(1, 2).flatten(-2, -1)).view(bh, nh, hh, dh).transpose(1, 2)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class InternMLP(nn.Module):
    def __init__(self, v: dict):
        super().__init__()
        from transformers.activations import ACT2FN

        self.act = ACT2FN[v["hidden_act"]]
        self.fc1 = nn.Linear(int(v["hidden_size"]), int(v["intermediate_size"]))
        self.fc2 = nn.Linear(int(v["intermediate_size"]), int(v["hidden_size"]))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class InternVisionEncoderLayer(nn.Module):
    def __init__(self, v: dict):
        super().__init__()
        dim, eps = int(v["hidden_size"]), float(v["layer_norm_eps"])
        self.attn, self.mlp = InternAttention(v), InternMLP(v)
        self.norm1, self.norm2 = _norm(v["norm_type"], dim, eps), _norm(v["norm_type"], dim, eps)
        self.ls1 = nn.Parameter(torch.ones(dim))
        self.ls2 = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x)) * self.ls1
        return x + self.mlp(self.norm2(x)) * self.ls2


class InternVisionEncoder(nn.Module):
    def __init__(self, v: dict):
        super().__init__()
        self.layers = nn.ModuleList([InternVisionEncoderLayer(v) for _ in range(int(v["num_hidden_layers"]))])


class InternVisionModel(nn.Module):
    """embeddings + encoder; ``forward`` returns every hidden state (embeddings first, as the
    authors' ``output_hidden_states=True``), each (N, 1 + patches, C)."""

    def __init__(self, v: dict):
        super().__init__()
        self.embeddings = InternVisionEmbeddings(v)
        self.encoder = InternVisionEncoder(v)

    def forward(self, pixel_values) -> list:
        x = self.embeddings(pixel_values)
        states = [x]
        for layer in self.encoder.layers:
            x = layer(x)
            states.append(x)
        return states
