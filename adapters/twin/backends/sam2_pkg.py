"""SAM2 through Meta's ``sam2`` package (facebookresearch/sam2): ``SAM2ImagePredictor`` finds objects
on a key frame, ``SAM2VideoPredictor`` propagates them (forward, then backward from the key frame).

Frame names pitfall: ``SAM2VideoPredictor.init_state`` reads a folder of frames whose names must be
``<integer>.jpg``: it keeps only .jpg/.jpeg names and sorts them by ``int(stem)``
(``sam2/utils/misc.py::load_video_frames_from_jpg_images``), so a dataset's own names
("frame_00010.png", ReVOS' "00010.jpg" mixed with others) are dropped, rejected (ValueError from
``int``) or misordered. ``stage_frames`` writes the sample's frames as 00000.jpg, 00001.jpg, ... in
temporal order and returns the map back to the dataset's frame ids. The files hold lossless PNG
data: the loader selects files by extension but decodes with PIL by content, so no JPEG
re-compression touches the pixels (and EXIF orientation, already applied by rvt_bench.core.frames, cannot
be applied twice).

Model building pitfall: ``sam2.build_sam`` composes its config through Hydra's global state, which a
Hydra app (run_bench.py) already owns, so composing would search our conf/ and fail. We load the
package's YAML with OmegaConf, apply the same overrides as ``build_sam2_video_predictor``
(post-processing on, ``fill_hole_area=8``) and instantiate it directly.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rvt_bench.adapters.twin.backends.common import ModelBackend, seeded
from rvt_bench.adapters.twin.backends.sam2_common import Track, point_grid, select_masks
from rvt_bench.core.types import AdapterError

DEFAULT_MODEL = "facebook/sam2.1-hiera-tiny"
VIDEO_OVERRIDES = {
    "_target_": "sam2.sam2_video_predictor.SAM2VideoPredictor",
    "sam_mask_decoder_extra_args": {"dynamic_multimask_via_stability": True,
                                    "dynamic_multimask_stability_delta": 0.05,
                                    "dynamic_multimask_stability_thresh": 0.98},
    "binarize_mask_from_pts_for_mem_enc": True,
    "fill_hole_area": 8,
}
"""``sam2.build_sam.build_sam2_video_predictor``'s hydra overrides with apply_postprocessing=True."""


def stage_frames(frames: list[np.ndarray], frame_ids: list[str], directory: str | Path) -> dict[str, str]:
    """Write (H, W, 3) uint8 RGB ``frames`` into ``directory`` as 00000.jpg, 00001.jpg, ... (PNG
    data, see module docstring) and return {staged file name: dataset frame id}. Raises AdapterError
    when frames and frame_ids differ in length."""
    from PIL import Image

    if len(frames) != len(frame_ids):
        raise AdapterError(f"stage_frames: {len(frames)} frames but {len(frame_ids)} frame ids")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for t, (frame, frame_id) in enumerate(zip(frames, frame_ids)):
        name = f"{t:05d}.jpg"
        Image.fromarray(np.ascontiguousarray(frame)).save(directory / name, format="PNG")
        names[name] = frame_id
    return names


class Sam2PkgBackend(ModelBackend):
    """The ``sam2`` package backend; parameters as rvt_bench.adapters.twin.backends.sam2_hf.Sam2HFBackend.

    model_id: a hub id known to ``sam2.build_sam.HF_MODEL_ID_TO_FILENAMES`` (config and checkpoint
    names are looked up there), or with ``config`` (package-relative YAML, e.g.
    "configs/sam2.1/sam2.1_hiera_t.yaml") and ``checkpoint`` (a local .pt path) given explicitly.
    """

    name = "sam2_pkg"

    def __init__(self, model_id: str = DEFAULT_MODEL, revision: str = "main", device: str = "auto",
                 dtype: str = "float32", config: str | None = None, checkpoint: str | None = None,
                 points_per_side: int = 8, pred_iou_thresh: float = 0.7, min_area_frac: float = 0.001,
                 nms_iou: float = 0.7, max_instances: int = 10):
        super().__init__(model_id, revision, device, dtype, points_per_side=int(points_per_side),
                         pred_iou_thresh=float(pred_iou_thresh), min_area_frac=float(min_area_frac),
                         nms_iou=float(nms_iou), max_instances=int(max_instances))
        self.config, self.checkpoint = config, checkpoint

    def fingerprint(self) -> dict:
        return dict(super().fingerprint(), config=self.config, checkpoint=self.checkpoint)

    def load(self) -> tuple[Any, Any]:
        import torch

        import_sam2()
        from sam2.build_sam import HF_MODEL_ID_TO_FILENAMES

        config, checkpoint = self.config, self.checkpoint
        if config is None or checkpoint is None:
            if self.model_id not in HF_MODEL_ID_TO_FILENAMES:
                raise AdapterError(f"sam2_pkg: {self.model_id!r} is not a known SAM2 hub id "
                                   f"({sorted(HF_MODEL_ID_TO_FILENAMES)}); give config and checkpoint")
            known_config, ckpt_name = HF_MODEL_ID_TO_FILENAMES[self.model_id]
            config = config or known_config
            if checkpoint is None:
                from huggingface_hub import hf_hub_download

                checkpoint = hf_hub_download(repo_id=self.model_id, filename=ckpt_name, revision=self.revision)
        model = build_video_predictor(config)
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
        model.load_state_dict(state, strict=True)
        return model, None

    def segment(self, frames: list[np.ndarray], key_frame: int,
                boxes: list[list[float]] | None = None, labels: list[str] | None = None,
                scores: list[float] | None = None) -> list[Track]:
        """As Sam2HFBackend.segment (same prompts, same (T, H, W) bool tracks)."""
        if boxes is not None and not boxes:
            return []
        if boxes is None:
            key_masks, key_scores = self.automatic(frames[key_frame])
            prompts = [{"mask": m} for m in key_masks]
            labels = [None] * len(key_masks)
        else:
            prompts = [{"box": np.asarray(b, dtype=np.float32)} for b in boxes]
            key_scores = list(scores) if scores is not None else [1.0] * len(boxes)
            labels = list(labels) if labels is not None else [None] * len(boxes)
        if not prompts:
            return []
        masks = self.propagate(frames, key_frame, prompts)
        return [Track(masks=masks[i], score=float(key_scores[i]), label=labels[i]) for i in range(len(prompts))]

    def segment_image(self, frame: np.ndarray, boxes: list[list[float]],
                      points: list[list[float]] | None = None) -> np.ndarray:
        """As Sam2HFBackend.segment_image, through ``SAM2ImagePredictor`` (single-mask output)."""
        import torch

        height, width = frame.shape[:2]
        predictor = self._image_predictor()
        kwargs: dict[str, Any] = {"box": np.asarray(boxes, dtype=np.float32)}
        if points is not None:
            kwargs["point_coords"] = np.asarray(points, dtype=np.float32)[:, None, :]
            kwargs["point_labels"] = np.ones((len(points), 1), dtype=np.int64)
        with torch.inference_mode():
            predictor.set_image(frame)
            masks, _, _ = predictor.predict(multimask_output=False, **kwargs)
        return (np.asarray(masks).reshape(len(boxes), -1, height, width)[:, 0] > 0.5)

    def segment_image_best(self, frame: np.ndarray, boxes: list[list[float]],
                           points: list[list[list[float]]]) -> np.ndarray:
        """As Sam2HFBackend.segment_image_best, through ``SAM2ImagePredictor.predict`` one object
        at a time (multimask output, the highest score kept), as the Seg-Zero / VisionReasoner
        evaluation scripts call it."""
        import torch

        predictor = self._image_predictor()
        out = []
        with torch.inference_mode():
            predictor.set_image(frame)
            for box, pts in zip(boxes, points):
                masks, scores, _ = predictor.predict(point_coords=np.asarray(pts, dtype=np.float32),
                                                     point_labels=np.ones(len(pts), dtype=np.int64),
                                                     box=np.asarray(box, dtype=np.float32), multimask_output=True)
                out.append(np.asarray(masks)[int(np.argsort(scores)[::-1][0])] > 0.5)
        return np.stack(out) if out else np.zeros((0, *frame.shape[:2]), bool)

    def _image_predictor(self) -> Any:
        import_sam2()
        from sam2.sam2_image_predictor import SAM2ImagePredictor

        model, _ = self.components()
        predictor = SAM2ImagePredictor(model)
        # the predictor hard-codes the backbone feature sizes of a 1024 px model
        side = int(model.image_size)
        predictor._bb_feat_sizes = [(side // 4, side // 4), (side // 8, side // 8), (side // 16, side // 16)]
        return predictor

    def automatic(self, frame: np.ndarray) -> tuple[list[np.ndarray], list[float]]:
        """Automatic-mode masks ((H, W) bool) and predicted IoUs on one frame, best first."""
        import torch

        predictor = self._image_predictor()
        height, width = frame.shape[:2]
        points = np.asarray(point_grid(height, width, self.params["points_per_side"]), dtype=np.float32)
        with torch.inference_mode():
            predictor.set_image(frame)
            candidates, ious, _ = predictor.predict(point_coords=points[:, None, :],
                                                    point_labels=np.ones((len(points), 1), dtype=np.int64),
                                                    multimask_output=True)
        candidates = candidates.reshape(len(points), -1, height, width)
        ious = ious.reshape(len(points), -1)
        best = ious.argmax(axis=-1)
        masks = candidates[np.arange(len(points)), best] > 0.5
        scores = ious[np.arange(len(points)), best]
        min_area = int(np.ceil(self.params["min_area_frac"] * height * width))
        keep = select_masks(masks, scores, self.params["pred_iou_thresh"], min_area, self.params["nms_iou"],
                            self.params["max_instances"])
        return [masks[i] for i in keep], [float(scores[i]) for i in keep]

    def propagate(self, frames: list[np.ndarray], key_frame: int, prompts: list[dict]) -> np.ndarray:
        """(len(prompts), T, H, W) bool masks; prompt i is {"box": (4,) xyxy px} or {"mask": (H, W)}
        for object id i + 1 on ``key_frame``."""
        import torch

        model, _ = self.components()
        height, width = frames[0].shape[:2]
        out = np.zeros((len(prompts), len(frames), height, width), dtype=bool)
        with tempfile.TemporaryDirectory(prefix="rvt-sam2-") as tmp, torch.inference_mode():
            stage_frames(frames, [str(t) for t in range(len(frames))], tmp)
            state = model.init_state(video_path=tmp)
            for i, prompt in enumerate(prompts):
                if "box" in prompt:
                    model.add_new_points_or_box(state, frame_idx=key_frame, obj_id=i + 1, box=prompt["box"])
                else:
                    model.add_new_mask(state, frame_idx=key_frame, obj_id=i + 1, mask=prompt["mask"])
            for reverse in (False, True):
                if reverse and key_frame == 0:
                    break
                for t, obj_ids, logits in model.propagate_in_video(state, start_frame_idx=key_frame,
                                                                   reverse=reverse):
                    masks = (logits > 0.0).cpu().numpy()
                    for row, obj_id in enumerate(obj_ids):
                        out[int(obj_id) - 1, t] = masks[row, 0]
        return out

    @classmethod
    def tiny(cls, seed: int = 0, **kwargs: Any) -> "Sam2PkgBackend":
        """A random-weight SAM2VideoPredictor from the package's sam2.1 tiny config shrunk to 128 px
        input (Hiera 8..64 wide, 5 blocks; 128-wide neck and memory attention; 2 memory frames)."""
        tiny = {
            "image_size": 128, "num_maskmem": 2,
            "image_encoder": {
                "trunk": {"embed_dim": 8, "num_heads": 1, "stages": [1, 1, 2, 1], "global_att_blocks": [3],
                          "window_pos_embed_bkg_spatial_size": [4, 4], "window_spec": [4, 4, 4, 4]},
                "neck": {"d_model": 128, "backbone_channel_list": [64, 32, 16, 8],
                         "position_encoding": {"num_pos_feats": 128}}},
            "memory_attention": {"d_model": 128, "num_layers": 1, "layer": {
                "d_model": 128, "dim_feedforward": 32,
                "self_attention": {"embedding_dim": 128, "feat_sizes": [8, 8]},
                "cross_attention": {"embedding_dim": 128, "feat_sizes": [8, 8]}}},
            "memory_encoder": {"in_dim": 128, "mask_downsampler": {"embed_dim": 128},
                               "fuser": {"num_layers": 1, "layer": {"dim": 128}}},
        }
        with seeded(seed):
            model = build_video_predictor("configs/sam2.1/sam2.1_hiera_t.yaml", tiny)
        kwargs = {"pred_iou_thresh": -1e9, "min_area_frac": 0.0, **kwargs}
        return cls.from_components(model, None, model_id="tiny-random/sam2.1-pkg", revision=f"seed{seed}",
                                   **kwargs)


def import_sam2() -> Any:
    """Import the ``sam2`` package without leaving Hydra's global state initialised: its
    ``__init__`` initialises it when nobody has, which would make a later ``hydra.initialize``
    (tests, a Hydra app started afterwards) fail with "GlobalHydra is already initialized"."""
    from hydra.core.global_hydra import GlobalHydra

    owned = GlobalHydra.instance().is_initialized()
    import sam2

    if not owned and GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    return sam2


def build_video_predictor(config: str, overrides: dict | None = None) -> Any:
    """A ``SAM2VideoPredictor`` (random weights) from a package-relative config YAML with
    ``VIDEO_OVERRIDES`` and then ``overrides`` merged into its ``model`` node, without Hydra's
    global state (see module docstring)."""
    sam2 = import_sam2()
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    path = Path(sam2.__file__).parent / config
    if not path.is_file():
        raise AdapterError(f"sam2_pkg: no config {config!r} in the sam2 package ({path})")
    cfg = OmegaConf.merge(OmegaConf.load(path), {"model": VIDEO_OVERRIDES}, {"model": overrides or {}})
    OmegaConf.resolve(cfg)
    return instantiate(cfg.model, _recursive_=True).eval()
