"""adapters/jit/scene_graph.py: nodes, window velocities and edges from a hand-built twin."""
from __future__ import annotations

import numpy as np
import pytest

from rvt_bench.adapters.jit.scene_graph import build_graph, to_text
from rvt_bench.adapters.twin.schema import Depth, FrameInfo, Instance, InstanceFrame, Twin, VideoInfo


def _twin(tracks: dict[int, dict[int, tuple[float, float]]], T: int, depth=None) -> Twin:
    """Instances with 10 x 10 boxes centred on the given (cx, cy) per frame."""
    instances = []
    for iid, track in tracks.items():
        frames = {t: InstanceFrame([cx - 5, cy - 5, cx + 5, cy + 5], [cx, cy], 100, f"m{iid}_{t}") for t, (cx, cy) in track.items()}
        d = None if depth is None else Depth(mean=depth[iid][0], std=0.0, frames=len(track), unit=depth[iid][1], convention=depth[iid][2])
        instances.append(Instance(id=iid, frames=frames, label=f"obj{iid}"))
        instances[-1].depth = d
    return Twin(video=VideoInfo(size=[100, 200], num_frames=T), frames=[FrameInfo(t, str(t)) for t in range(T)],
                instances=instances)


def _edges(graph, t):
    return {tuple(e) for e in graph["frames"][t]["edges"]}


def test_left_of_and_above_one_direction_per_pair():
    graph = build_graph(_twin({1: {0: (20, 10)}, 2: {0: (80, 50)}}, 1))
    assert _edges(graph, 0) == {(1, "left-of", 2), (1, "above", 2)}


def test_behind_follows_the_depth_convention():
    metres = {1: (5.0, "m", "larger = farther"), 2: (2.0, "m", "larger = farther")}
    relative = {1: (5.0, "relative", "larger = nearer"), 2: (2.0, "relative", "larger = nearer")}
    tracks = {1: {0: (20, 50)}, 2: {0: (80, 50)}}
    assert (1, "behind", 2) in _edges(build_graph(_twin(tracks, 1, metres)), 0)
    assert (2, "behind", 1) in _edges(build_graph(_twin(tracks, 1, relative)), 0)


def test_velocity_is_over_the_window_and_moving_towards_needs_approach():
    # object 1 walks right 10 px per frame towards the still object 2
    tracks = {1: {t: (10 + 10 * t, 50) for t in range(8)}, 2: {t: (150, 50) for t in range(8)}}
    graph = build_graph(_twin(tracks, 8), window=6)
    node = next(n for n in graph["frames"][7]["nodes"] if n["id"] == 1)
    assert node["velocity"] == [10, 0] and node["in_window"] == 6
    assert (1, "moving-towards", 2) in _edges(graph, 7)
    assert (2, "moving-towards", 1) not in _edges(graph, 7)
    assert not any(rel == "moving-towards" for _, rel, _ in _edges(graph, 0))


def test_moving_away_is_not_moving_towards():
    tracks = {1: {t: (100 - 10 * t, 50) for t in range(4)}, 2: {t: (150, 50) for t in range(4)}}
    assert not any(rel == "moving-towards" for _, rel, _ in _edges(build_graph(_twin(tracks, 4)), 3))


def test_objects_list_visibility_depth_and_dinov2_similarity():
    twin = _twin({1: {0: (20, 10), 2: (30, 10)}, 2: {1: (80, 50)}, 3: {0: (5, 5)}}, 3)
    twin.artifacts["dinov2"] = {1: np.array([1.0, 0.0]), 2: np.array([0.9, 0.436]), 3: np.array([0.0, 1.0])}
    objects = {o["id"]: o for o in build_graph(twin)["objects"]}
    assert objects[1]["frames"] == [0, 2, 2] and objects[1]["depth"] is None
    assert objects[1]["similar_to"] == [2] and objects[3]["similar_to"] == []


def test_text_shows_window_ends_and_shrinks_to_the_budget():
    tracks = {i: {t: (10 * i, 5 * t) for t in range(30)} for i in range(1, 4)}
    graph = build_graph(_twin(tracks, 30), window=6)
    text = to_text(graph, max_chars=100000)
    assert [l.split(":")[0] for l in text.splitlines() if l.startswith("frame ")] == \
        ["frame 5", "frame 11", "frame 17", "frame 23", "frame 29"]
    short = to_text(graph, max_chars=1200)
    assert len(short) <= 1200 and "frame 29" in short


def test_a_window_below_one_is_refused():
    with pytest.raises(ValueError):
        build_graph(_twin({}, 1), window=0)
