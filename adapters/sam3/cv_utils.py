"""The CPU versions of SAM 3's video post-processing that transformers' port skips without its hub
kernel: mask NMS over the detections (det_nms_thresh) and the hole filling and sprinkle removal of
masklets (fill_hole_area). transformers' Sam3VideoModel calls `cv_utils_kernel.generic_nms` and
`cv_utils_kernel.cc_2d` from the hub kernel kernels-community/cv-utils; where it cannot be loaded
(offline, no trust, or no CUDA) it keeps every detection and fills nothing, with one log line
(modeling_sam3_video.py nms_masks, _get_connected_components_with_padding). facebookresearch/sam3
runs both on the CPU there: sam3/perflib/nms.py generic_nms_cpu and
sam3/perflib/connected_components.py connected_components_cpu (skimage.measure.label, full
connectivity). install() puts these in the kernel's place when the kernel is unavailable.
"""
from __future__ import annotations

from typing import Any


class CpuCvUtils:
    """The two functions of the cv-utils kernel the port calls, as facebookresearch/sam3's CPU code."""

    @staticmethod
    def generic_nms(ious: Any, scores: Any, iou_threshold: float, use_iou_matrix: bool = True) -> Any:
        """Greedy NMS on a (N, N) IoU matrix and (N,) scores: kept indices (int64), best first
        (sam3/perflib/nms.py generic_nms_cpu)."""
        import numpy as np
        import torch

        ious_np = ious.float().detach().cpu().numpy()
        order = scores.float().detach().cpu().numpy().argsort()[::-1]
        kept = []
        while order.size > 0:
            i = int(order[0])
            kept.append(i)
            order = order[np.where(ious_np[i, order[1:]] <= iou_threshold)[0] + 1]
        return torch.tensor(kept, dtype=torch.int64, device=scores.device)

    @staticmethod
    def cc_2d(mask: Any, get_counts: bool = True) -> tuple[Any, Any]:
        """Connected components of a (B, 1, H, W) mask (non-zero = foreground), 8-connected:
        (labels, counts) of its shape, counts = the size of each foreground pixel's component, 0 on
        the background (sam3/perflib/connected_components.py connected_components_cpu)."""
        import numpy as np
        import torch
        from scipy import ndimage

        values = mask.detach().cpu().numpy().reshape(-1, *mask.shape[-2:])
        labels = np.zeros(values.shape, np.int32)
        counts = np.zeros(values.shape, np.int32)
        for b, plane in enumerate(values):
            labels[b], n = ndimage.label(plane != 0, structure=np.ones((3, 3), int))
            sizes = np.bincount(labels[b].ravel(), minlength=n + 1)
            sizes[0] = 0
            counts[b] = sizes[labels[b]]
        shape = mask.shape
        return (torch.from_numpy(labels).view(shape).to(mask.device), torch.from_numpy(counts).view(shape).to(mask.device))


def install() -> bool:
    """Put CpuCvUtils in place of transformers' cv-utils hub kernel when that kernel cannot be
    loaded (module docstring); returns True when it did. Process-wide, idempotent."""
    from transformers.models.sam3_video import modeling_sam3_video as port

    port._load_cv_utils_kernel_once()
    if port.cv_utils_kernel:
        return isinstance(port.cv_utils_kernel, CpuCvUtils)
    port.cv_utils_kernel = CpuCvUtils()
    return True
