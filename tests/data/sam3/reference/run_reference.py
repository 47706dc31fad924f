"""Generate tests/data/sam3/reference/expected_sam3.json: facebookresearch/sam3's own image predictor
(sam3.model.sam3_image_processor.Sam3Processor on sam3.model_builder's Sam3Image) and video
predictor (sam3.model_builder's Sam3VideoInferenceWithInstanceInteractivity) run on CPU with the
tiny random weights of tests/sam3_tiny.build, converted to Meta's checkpoint format by inverting
transformers' own key mapping (convert_sam3_video_to_hf.py). tests/test_sam3_parity.py loads the
same weights into the port (rvt_bench.adapters.sam3) and compares.

The Meta model is sam3.model_builder's, every class with the builder's own arguments except the
sizes, which are overridden (tiny_builder) to tests/sam3_tiny's Sam3VideoConfig: a 112 px input, a
2-layer ViT of width 32, a 1-layer CLIP text encoder of width 32, one layer in each DETR/geometry/
tracker stack, 8 queries, 2 memory frames; the widths SAM 3 ties to 256 stay 256. The tokenizer is
Meta's SimpleTokenizer on a BPE file with no merges (every character one token, as tests/sam3_tiny's
CLIPTokenizer), its ids mapped to the port's by token string.

Run (needs facebookresearch/sam3's source, its pip dependencies timm, ftfy, einops and setuptools
(pkg_resources), and the repository's own venv's packages (torch, transformers, scikit-image); nothing
here is committed but this script and its outputs; about 3 minutes on one CPU core):

    python3.11 -m venv /tmp/sam3ref && echo "import site; site.addsitedir('$PWD/.venv/lib/python3.11/site-packages')" \
        > /tmp/sam3ref/lib/python3.11/site-packages/main_venv.pth
    /tmp/sam3ref/bin/pip install --no-deps timm ftfy wcwidth einops setuptools
    /tmp/sam3ref/bin/python tests/data/sam3/reference/run_reference.py --sam3-src SAM3_CHECKOUT \
        --sam3-commit COMMIT --convert PATH/TO/convert_sam3_video_to_hf.py

SAM3_CHECKOUT: facebookresearch/sam3 at COMMIT (99d02f28c8d34610ab35559b72642b01f10fdb1e for the
committed outputs; a git work tree records its own); --convert: a file defining transformers'
ORIGINAL_TO_CONVERTED_KEY_MAPPING, convert_old_keys_to_new_keys and split_qkv as
src/transformers/models/sam3_video/convert_sam3_video_to_hf.py does (commit 0d511f8e for the committed
outputs; the file is in neither the transformers wheel nor its sdist). Meta's sam3.train imports decord
for a type only: a stand-in module is put in its place.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
IMAGES = ("astronaut_flag.jpg", "chelsea_eyes.jpg", "camera_device.jpg")
IMAGE_PROMPTS = ("a red dog", "flag")
CLIP = "lawn_depth"  # 20 frames: longer than SAM 3's hotstart_delay of 15
VIDEO_PROMPT = "a red dog"


# --- Meta's code on a CPU ------------------------------------------------------------------------

def cpu_only() -> None:
    """facebookresearch/sam3 hard-codes device="cuda" in places (position_encoding, decoder, io_utils,
    tracker): every such request becomes the CPU, here only. Its video code also casts features to
    bfloat16 (sam3_image.py, sam3_tracking_predictor.py: no-ops under the CUDA autocast it runs in,
    which the CPU lacks): those casts keep float32 here, so that the reference runs in float32."""
    real = {name: getattr(torch, name) for name in ("zeros", "ones", "empty", "arange", "tensor", "full", "linspace",
                                                     "randn", "rand", "zeros_like", "ones_like", "as_tensor")}

    def wrap(fn):
        def inner(*args, **kwargs):
            if "device" in kwargs and "cuda" in str(kwargs["device"]):
                kwargs["device"] = "cpu"
            return fn(*args, **kwargs)
        return inner

    for name, fn in real.items():
        setattr(torch, name, wrap(fn))
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    to = torch.Tensor.to

    def to_cpu(self, *args, **kwargs):
        args = tuple("cpu" if (isinstance(a, (str, torch.device)) and "cuda" in str(a)) else
                     torch.float32 if a is torch.bfloat16 else a for a in args)
        if "device" in kwargs and "cuda" in str(kwargs["device"]):
            kwargs["device"] = "cpu"
        if kwargs.get("dtype") is torch.bfloat16:
            kwargs["dtype"] = torch.float32
        return to(self, *args, **kwargs)

    torch.Tensor.to = to_cpu
    torch.nn.Module.cuda = lambda self, *a, **k: self
    # sam3.train's video dataset (imported by the tracker for a type) needs decord, unused here
    import types

    sys.modules.setdefault("decord", types.SimpleNamespace(cpu=None, VideoReader=None))


def override(module, name: str, **sizes) -> None:
    """Replace class `name` in `module`'s namespace by one whose constructor takes `sizes` in place
    of the builder's arguments (the builder's other arguments unchanged)."""
    cls = getattr(module, name)

    def make(*args, **kwargs):
        kwargs.update(sizes)
        return cls(*args, **kwargs)

    setattr(module, name, make)


def tiny_builder(cfg):
    """sam3.model_builder with tests/sam3_tiny's sizes (module docstring)."""
    import sam3.model.text_encoder_ve as text_module
    from sam3 import model_builder as mb

    det = cfg.detector_config
    vit = det.vision_config.backbone_config
    text = det.text_config
    size = vit.image_size
    override(mb, "ViT", img_size=size, pretrain_img_size=vit.pretrain_image_size, embed_dim=vit.hidden_size,
             depth=vit.num_hidden_layers, num_heads=vit.num_attention_heads,
             mlp_ratio=vit.intermediate_size / vit.hidden_size, window_size=vit.window_size,
             global_att_blocks=tuple(vit.global_attn_indexes))
    override(text_module, "TextTransformer", mlp_ratio=text.intermediate_size / text.hidden_size)
    override(mb, "VETextEncoder", width=text.hidden_size, heads=text.num_attention_heads,
             layers=text.num_hidden_layers, vocab_size=text.vocab_size, context_length=text.max_position_embeddings)
    ffn = det.detr_encoder_config.intermediate_size
    assert ffn == det.geometry_encoder_config.intermediate_size == det.detr_decoder_config.intermediate_size
    override(mb, "TransformerEncoderLayer", dim_feedforward=ffn)
    override(mb, "TransformerEncoderFusion", num_layers=det.detr_encoder_config.num_layers)
    override(mb, "TransformerDecoderLayer", dim_feedforward=det.detr_decoder_config.intermediate_size)
    override(mb, "TransformerDecoder", num_layers=det.detr_decoder_config.num_layers,
             num_queries=det.detr_decoder_config.num_queries, resolution=size)
    override(mb, "MLP", hidden_dim=det.detr_decoder_config.intermediate_size)  # the dot-product scoring's prompt MLP
    override(mb, "SequenceGeometryEncoder", num_layers=det.geometry_encoder_config.num_layers)
    override(mb, "PositionEmbeddingSine", precompute_resolution=size)
    # the tracker (build_tracker and Sam3TrackerBase._build_sam_heads)
    import sam3.model.sam3_tracker_base as tracker_module

    trk = cfg.tracker_config
    grid = size // vit.patch_size
    assert trk.memory_fuser_intermediate_dim == 4 * trk.memory_fuser_embed_dim  # Meta's CXBlock: 4 x dim
    override(mb, "SimpleMaskDownSampler", interpol_size=[grid * 16, grid * 16])
    override(mb, "SimpleFuser", num_layers=trk.memory_fuser_num_layers)
    override(mb, "RoPEAttention", feat_sizes=list(trk.memory_attention_rope_feat_sizes))
    override(mb, "TransformerDecoderLayerv2", dim_feedforward=trk.memory_attention_feed_forward_hidden_size)
    override(mb, "TransformerEncoderCrossAttention", num_layers=trk.memory_attention_num_layers)
    override(mb, "Sam3TrackerPredictor", image_size=size, num_maskmem=trk.num_maskmem)
    override(mb, "Sam3VideoInferenceWithInstanceInteractivity", image_size=size)
    override(tracker_module, "TwoWayTransformer", depth=trk.mask_decoder_config.num_hidden_layers,
             mlp_dim=trk.mask_decoder_config.mlp_dim)
    override(tracker_module, "MaskDecoder", iou_head_hidden_dim=trk.mask_decoder_config.iou_head_hidden_dim)
    # Meta's CPU connected-components fallback stacks an empty list when a frame has no new
    # detection (the GPU paths accept an empty batch): an empty batch gives empty labels here
    import sam3.perflib.connected_components as cc

    cpu_cc = cc.connected_components_cpu

    def connected_components_cpu(input_tensor):
        if input_tensor.shape[0] == 0:
            empty = torch.zeros(input_tensor.shape, dtype=torch.int64)
            return empty, empty.clone()
        return cpu_cc(input_tensor)

    cc.connected_components_cpu = connected_components_cpu
    return mb


# --- weights: the port's tiny checkpoint in Meta's format ----------------------------------------

def load_convert(path: Path):
    spec = importlib.util.spec_from_file_location("convert_sam3_video_to_hf", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def token_permutation(meta_tokenizer, hf_tokenizer) -> torch.Tensor:
    """Row i: the port's token id of Meta's token i (same string; the special tokens by role)."""
    specials = {"<start_of_text>": "<|startoftext|>", "<end_of_text>": "<|endoftext|>"}
    vocab = hf_tokenizer.get_vocab()
    return torch.tensor([vocab[specials.get(meta_tokenizer.decoder[i], meta_tokenizer.decoder[i])]
                         for i in range(len(meta_tokenizer.decoder))])


def meta_state_dict(meta_model, prefix: str, hf_state: dict, convert, perm: torch.Tensor) -> dict:
    """Meta's state dict for `meta_model` (its keys under `prefix` in the converter's naming, e.g.
    "sam3_model." for the detector), each tensor the port's one that transformers' conversion
    would produce from it: the key mapping (convert_old_keys_to_new_keys), the q/k/v split
    (split_qkv) undone by concatenation, the position embedding's class-token row (stripped by the
    converter) kept from Meta's init, the CLIP text projection transposed back, the token
    embedding's rows permuted to Meta's token ids."""
    own = meta_model.state_dict()
    mapping = convert.convert_old_keys_to_new_keys([prefix + k for k in own])
    out, missing = {}, []
    for key, value in own.items():
        new = mapping[prefix + key]
        if new.endswith(".qkv.weight") or new.endswith(".qkv.bias"):
            parts = [hf_state.get(new.replace(".qkv.", f".{p}_proj.")) for p in "qkv"]
            tensor = None if any(p is None for p in parts) else torch.cat(parts, 0)
        elif ".in_proj_" in new:
            base, kind = new.rsplit("in_proj_", 1)
            parts = [hf_state.get(f"{base}{p}_proj.{kind}") for p in "qkv"]
            tensor = None if any(p is None for p in parts) else torch.cat(parts, 0)
        elif new.endswith("embeddings.position_embeddings") and new.startswith("detector_model."):
            tensor = torch.cat([value[:, :1], hf_state[new]], 1)
        elif new.endswith("text_encoder.text_projection.weight"):
            tensor = hf_state[new].T if new in hf_state else None
        elif ".prompt_encoder.point_embed." in new:  # the converter concatenates point_embed.{0..3}
            index = int(new.rsplit(".", 2)[-2])
            tensor = hf_state[new.rsplit(".", 2)[0] + ".weight"][index:index + 1]
        elif new.endswith("token_embedding.weight"):
            tensor = hf_state[new][perm]
        else:
            tensor = hf_state.get(new)
        if tensor is None or tensor.shape != value.shape:
            missing.append((key, new, None if tensor is None else tuple(tensor.shape), tuple(value.shape)))
            continue
        out[key] = tensor
    return out, missing


# --- outputs ------------------------------------------------------------------------------------

def rle(mask: np.ndarray) -> dict:
    from rvt_bench.core import masks as mask_io

    return mask_io.encode(np.asarray(mask, bool))


def run_image(model, frames: dict, size: int) -> list[dict]:
    """Meta's Sam3Processor (confidence_threshold 0.5, its default) on each image and prompt: the kept
    detections (score, xyxy box in pixels), best first, their masks united, and every query's score
    and normalized cxcywh box before the threshold (from Sam3Image.forward_grounding)."""
    from PIL import Image
    from sam3.model.sam3_image_processor import Sam3Processor

    processor = Sam3Processor(model, resolution=size, device="cpu", confidence_threshold=0.5)
    seen = []
    grounding = model.forward_grounding

    def record(*args, **kwargs):
        out = grounding(*args, **kwargs)
        seen.append(out)
        return out

    model.forward_grounding = record
    cases = []
    for name, frame in frames.items():
        for prompt in IMAGE_PROMPTS:
            state = processor.set_image(Image.fromarray(frame))
            state = processor.set_text_prompt(prompt, state)
            raw = seen.pop()
            probs = (raw["pred_logits"].sigmoid() * raw["presence_logit_dec"].sigmoid().unsqueeze(1)).squeeze(-1)[0]
            order = torch.argsort(state["scores"], descending=True)
            union = state["masks"].any(0)[0].numpy() if len(order) else np.zeros(frame.shape[:2], bool)
            cases.append({"image": name, "prompt": prompt,
                          "all_scores": [round(float(s), 6) for s in probs],
                          "all_boxes_cxcywh": [[round(float(v), 5) for v in b] for b in raw["pred_boxes"][0]],
                          "scores": [round(float(s), 6) for s in state["scores"][order]],
                          "boxes": [[round(float(v), 3) for v in b] for b in state["boxes"][order]],
                          "union": rle(union)})
    model.forward_grounding = grounding
    return cases


def run_video(model, frame_dir: Path, prompt: str) -> dict:
    """Meta's video model (init_state on the JPEG folder, a text prompt on frame 0, forward
    propagation over every frame, as Sam3VideoPredictor's propagate_in_video does forward): per
    frame, the kept objects' ids, scores and masks united; also add_prompt's own output on frame 0
    (propagation then runs frame 0 again)."""
    from rvt_bench.core.frames import read_frame

    height, width = read_frame(sorted(frame_dir.glob("*.jpg"))[0]).shape[:2]

    def frame(index, out) -> dict:
        masks = np.asarray(out["out_binary_masks"], bool)
        union = masks.any(0) if len(masks) else np.zeros((height, width), bool)
        return {"frame": int(index), "object_ids": [int(i) for i in out["out_obj_ids"]],
                "scores": [round(float(p), 6) for p in out["out_probs"]], "union": rle(union)}

    state = model.init_state(resource_path=str(frame_dir), video_loader_type="cv2")
    prompt_frame = frame(*model.add_prompt(state, frame_idx=0, text_str=prompt))
    frames = [frame(index, out) for index, out in
              model.propagate_in_video(state, start_frame_idx=0, max_frame_num_to_track=state["num_frames"], reverse=False)]
    return {"clip": frame_dir.name, "prompt": prompt, "add_prompt_output": prompt_frame, "frames": frames}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sam3-src", required=True, type=Path, help="a facebookresearch/sam3 checkout")
    parser.add_argument("--convert", required=True, type=Path, help="transformers' convert_sam3_video_to_hf.py")
    parser.add_argument("--sam3-commit", default="", help="the checkout's commit, when it is not a git work tree")
    parser.add_argument("--out", type=Path, default=HERE / "expected_sam3.json")
    parser.add_argument("--skip-video", action="store_true")
    args = parser.parse_args()
    sys.path[:0] = [str(args.sam3_src), str(REPO)]
    torch.set_num_threads(1)
    cpu_only()

    from rvt_bench.core.frames import read_frame
    from tests import sam3_tiny
    from transformers import Sam3VideoModel, Sam3VideoProcessor

    convert = load_convert(args.convert)
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = sam3_tiny.build(Path(tmp) / "tiny", sam3_tiny.calibration_frames())
        hf_model = Sam3VideoModel.from_pretrained(str(hf_dir)).eval()
        hf_tok = Sam3VideoProcessor.from_pretrained(str(hf_dir)).tokenizer
        cfg = hf_model.config
        hf_state = hf_model.state_dict()
        bpe = Path(tmp) / "bpe_no_merges.txt.gz"
        bpe.write_bytes(gzip.compress(b"#version: tiny, no merges"))
        mb = tiny_builder(cfg)
        image_model = mb.build_sam3_image_model(bpe_path=str(bpe), device="cpu", load_from_HF=False, eval_mode=True)
        perm = token_permutation(image_model.backbone.language_backbone.tokenizer, hf_tok)
        state, missing = meta_state_dict(image_model, "sam3_model.", hf_state, convert, perm)
        result = image_model.load_state_dict(state, strict=False)
        report = {"unconverted": [list(map(str, m)) for m in missing], "meta_keys_not_loaded": sorted(result.missing_keys)}
        print(json.dumps(report, indent=1), file=sys.stderr)
        size = cfg.detector_config.vision_config.backbone_config.image_size
        frames = {n: read_frame(REPO / "demo" / "reasonseg" / "val" / n) for n in IMAGES}
        with torch.no_grad():
            images = run_image(image_model.eval(), frames, size)
        video = None
        if not args.skip_video:
            video_model = mb.build_sam3_video_model(bpe_path=str(bpe), device="cpu", load_from_HF=False,
                                                    strict_state_dict_loading=False)
            renamed = {"detector.": "sam3_model.", "tracker.": "sam2_predictor.model."}
            state, missing = {}, []
            for meta_prefix, prefix in renamed.items():
                part = getattr(video_model, meta_prefix.rstrip("."))
                got, lost = meta_state_dict(part, prefix, hf_state, convert, perm)
                state.update({meta_prefix + k: v for k, v in got.items()})
                missing += [(meta_prefix + m[0], *m[1:]) for m in lost]
            result = video_model.load_state_dict(state, strict=False)
            report["video_unconverted"] = [list(map(str, m)) for m in missing]
            print(json.dumps(report["video_unconverted"], indent=1), file=sys.stderr)
            with torch.no_grad():
                video = run_video(video_model.eval(), REPO / "demo" / "revos" / "JPEGImages" / CLIP, VIDEO_PROMPT)
    commit = subprocess.run(["git", "-C", str(args.sam3_src), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip() if (args.sam3_src / ".git").exists() else ""
    out = {"reference": {"repository": "facebookresearch/sam3", "commit": commit or args.sam3_commit or "unknown",
                         "torch": torch.__version__},
           "weights": "tests/sam3_tiny.build(dir, tests.sam3_tiny.calibration_frames()), seed 0",
           "conversion": report, "images": images, "video": video}
    args.out.write_text(json.dumps(out, separators=(",", ":")).replace('},{"image"', '},\n{"image"') + "\n")
    print(args.out)


if __name__ == "__main__":
    main()
