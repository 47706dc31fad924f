"""The line-by-line port of OpenCV 4.8.0's FillEdgeCollection (imgproc/src/drawing.cpp: the
active-edge linked list, its insertion order and bubble sort), as rvt_bench.core.masks had it
before its row-block form: the oracle tests/test_bench_masks.py holds `masks._fill_edges` to on
random polygons (OpenCV's own output is in tests/data/parity/fillpoly_cv48.jsonl). Quadratic in the
crossing edges; test use only."""
from __future__ import annotations

import numpy as np

from rvt_bench.core import masks

_XY_SHIFT = 16


def fill_poly_reference(img: np.ndarray, points, color: int) -> None:
    """masks.fill_poly_cv48 with the linked-list FillEdgeCollection (the same edges and outline)."""
    import cv2

    pts = np.asarray(points, dtype=np.int64).reshape(-1, 2)
    height, width = img.shape[:2]
    cv2.polylines(img, [pts.astype(np.int32)], True, color, 1)
    fill_edge_collection(img, [_Edge(*e) for e in masks._poly_edges(pts, width, height)], color)


class _Edge:
    __slots__ = ("y0", "y1", "x", "dx", "next")

    def __init__(self, y0: int, y1: int, x: int, dx: int) -> None:
        self.y0, self.y1, self.x, self.dx, self.next = y0, y1, x, dx, None


def fill_edge_collection(img: np.ndarray, edges: list[_Edge], color: int) -> None:
    """OpenCV 4.8.0 FillEdgeCollection (LINE_8: no subpixel delta): scanlines from the first edge's
    top, spans between consecutive active edges drawn inclusive of both ends."""
    height, width = img.shape[:2]
    if len(edges) < 2:
        return
    y_min, y_max = min(e.y0 for e in edges), max(e.y1 for e in edges)
    ends = [e.x + (e.y1 - e.y0) * e.dx for e in edges]
    x_min = min(min(e.x for e in edges), min(ends))
    x_max = max(-1, max(e.x for e in edges), max(ends))  # C++ starts x_max at (int64)0xFFFF... = -1
    if y_max < 0 or y_min >= height or x_max < 0 or x_min >= (width << _XY_SHIFT):
        return
    edges = sorted(edges, key=lambda e: (e.y0, e.x, e.dx))
    total = len(edges)
    edges.append(_Edge(2**31 - 1, 0, 0, 0))
    head = _Edge(0, 0, 0, 0)
    i, e = 0, edges[0]
    for y in range(e.y0, min(y_max, height)):
        draw = 0
        prelast, last = head, head.next
        while last is not None or e.y0 == y:
            if last is not None and last.y1 == y:  # the edge ends: leave the active list
                prelast.next = last.next
                last = last.next
                continue
            keep_prelast = prelast
            if last is not None and (e.y0 > y or last.x < e.x):
                prelast, last = last, last.next
            elif i < total:  # the next edge starts: insert it here
                prelast.next = e
                e.next = last
                prelast = e
                i += 1
                e = edges[i]
            else:
                break
            if draw:
                if y >= 0:
                    if keep_prelast.x > prelast.x:
                        x1, x2 = prelast.x >> _XY_SHIFT, keep_prelast.x >> _XY_SHIFT
                    else:
                        x1, x2 = keep_prelast.x >> _XY_SHIFT, prelast.x >> _XY_SHIFT
                    if x1 < width and x2 >= 0:
                        img[y, max(x1, 0):min(x2, width - 1) + 1] = color
                keep_prelast.x += keep_prelast.dx
                prelast.x += prelast.dx
            draw ^= 1
        keep_prelast = None  # bubble sort of the active list by x
        while True:
            prelast, last = head, head.next
            last_exchange = None
            while last is not keep_prelast and last.next is not None:
                te = last.next
                if last.x > te.x:
                    prelast.next = te
                    last.next = te.next
                    te.next = last
                    prelast = te
                    last_exchange = prelast
                else:
                    prelast, last = last, te
            if last_exchange is None:
                break
            keep_prelast = last_exchange
            if keep_prelast is head.next or keep_prelast is head:
                break


