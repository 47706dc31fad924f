"""Build the bundled demo benchmark under demo/ (deterministic; see demo/README.md).

    python scripts/build_demo.py [--out demo]

Images: photos that ship inside scikit-image, with hand-made polygons (pixel coordinates of the
original photo, x right, y down), written in ReasonSeg's LabelMe format plus an instances sidecar.
Videos: synthetic clips in ReVOS format, composited from sprites cut out of those photos by the same
polygons, so every per-instance mask is exact. RVTBench-format queries (grounding, VQA, summary) on
those clips, in canonical records: GT boxes are the tight boxes of the exact visible masks.
Same inputs -> byte-identical files.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rvt_bench.core import masks  # noqa: E402

JPEG_QUALITY = 85
VIDEO_W, VIDEO_H = 320, 240


def ellipse(cx: float, cy: float, rx: float, ry: float, n: int = 24) -> list[list[float]]:
    """Polygon of n vertices on an axis-aligned ellipse, rounded to 0.1 px."""
    return [[round(cx + rx * math.cos(2 * math.pi * k / n), 1), round(cy + ry * math.sin(2 * math.pi * k / n), 1)] for k in range(n)]


# --- objects of the photos: label -> polygon in the photo's pixels ---------------------------------
OBJECTS: dict[str, dict[str, list]] = {
    "coffee": {
        "cup": [[174, 105], [180, 70], [200, 40], [235, 24], [285, 17], [335, 21], [370, 36], [395, 62], [407, 95],
                [405, 130], [398, 170], [390, 205], [378, 232], [365, 240], [350, 242], [335, 252], [322, 268],
                [300, 276], [262, 278], [258, 300], [240, 306], [215, 303], [200, 290], [198, 260], [205, 235],
                [220, 226], [208, 200], [195, 170], [182, 140]],
        "spoon": [[405, 70], [413, 65], [423, 70], [422, 90], [418, 115], [410, 160], [401, 200], [392, 228],
                  [400, 245], [405, 270], [403, 295], [393, 315], [372, 326], [350, 324], [334, 313], [326, 292],
                  [328, 268], [338, 250], [355, 241], [378, 230], [388, 200], [396, 160], [402, 115], [403, 90]],
        "coffee": ellipse(287, 142, 83, 48),
        "saucer": ellipse(277, 232, 203, 158, 36),
    },
    "astronaut": {
        "helmet": [[278, 511], [280, 470], [290, 430], [310, 395], [340, 365], [375, 348], [410, 344], [445, 352],
                   [475, 372], [493, 400], [502, 440], [506, 480], [506, 511]],
        "flag": [[0, 0], [45, 0], [60, 60], [75, 130], [90, 190], [95, 225], [55, 255], [35, 300], [22, 360],
                 [18, 420], [15, 470], [14, 511], [0, 511]],
        "mission patch": ellipse(171, 390, 37, 42),
        "shuttle model": [[400, 0], [440, 0], [445, 40], [455, 60], [455, 140], [450, 160], [455, 190], [465, 215],
                          [458, 230], [455, 270], [440, 285], [400, 285], [370, 270], [360, 225], [375, 200],
                          [380, 140], [383, 60], [395, 45]],
        "person": [[155, 60], [190, 20], [240, 15], [285, 40], [300, 90], [280, 135], [290, 165], [305, 205],
                   [310, 245], [330, 255], [345, 270], [352, 300], [360, 330], [365, 345], [330, 360], [300, 400], [290, 511], [10, 511],
                   [20, 420], [25, 330], [40, 280], [60, 240], [115, 205], [130, 180], [160, 145], [165, 110]],
    },
    "chelsea": {
        "left eye": ellipse(170, 117, 35, 31),
        "right eye": ellipse(321, 136, 21, 28),
        "nose": [[230, 228], [250, 226], [275, 228], [292, 232], [285, 245], [268, 252], [262, 262], [255, 265],
                 [248, 258], [240, 245]],
        "cat": [[30, 0], [400, 0], [385, 40], [370, 100], [360, 160], [340, 210], [320, 270], [300, 299],
                [0, 299], [0, 0]],
    },
    "camera": {
        "camcorder": [[257, 146], [262, 140], [300, 138], [324, 141], [324, 176], [300, 181], [275, 182],
                      [262, 175], [258, 165]],
        "tripod": [[272, 200], [300, 195], [305, 300], [335, 300], [338, 305], [310, 310], [320, 340], [405, 505],
                   [395, 511], [300, 345], [300, 490], [290, 490], [288, 345], [245, 511], [230, 511], [282, 335],
                   [285, 320], [288, 210]],
        "man": [[0, 250], [60, 165], [150, 110], [165, 75], [200, 65], [245, 75], [270, 120], [258, 140], [260, 190],
                [300, 215], [305, 275], [255, 310], [205, 300], [160, 360], [150, 511], [0, 511]],
        "tower": [[412, 118], [432, 118], [432, 195], [412, 195]],
    },
    "rocket": {
        "rocket": [[323, 127], [315, 135], [311, 150], [310, 180], [310, 405], [337, 405], [337, 180], [335, 150],
                   [331, 135]],
        "left tower": [[50, 0], [88, 0], [78, 426], [0, 426], [0, 360]],
        "right tower": [[560, 0], [598, 0], [639, 300], [639, 426], [580, 426], [565, 200]],
        "left mast": [[197, 125], [203, 125], [205, 190], [205, 426], [168, 426], [185, 190]],
        "right mast": [[445, 125], [451, 125], [455, 190], [475, 426], [440, 426], [440, 190]],
    },
    "coins": {
        "largest coin": ellipse(347, 187, 32, 31),
        "coin top right": ellipse(334, 43, 29, 28),
        "coin bottom left": ellipse(46, 260, 28, 27),
        "coin 1": ellipse(44, 52, 22, 20),
        "coin 2": ellipse(100, 56, 19, 18),
        "coin 3": ellipse(155, 51, 23, 23),
        "coin 4": ellipse(216, 52, 23, 22),
        "coin 5": ellipse(275, 53, 20, 19),
    },
}

# --- image samples (ReasonSeg format) ------------------------------------------------------------
# name -> photo, query, is_sentence, level (1 explicit ... 3 multi-step), category, target/ignore/flag labels
IMAGES: dict[str, dict] = {
    "coffee_cup": dict(photo="coffee", query="the container used for hot drinks", is_sentence=False, level=1,
                       category="semantic", targets=["cup"]),
    "coffee_drink": dict(photo="coffee", query="the part of the scene that someone would actually swallow",
                         is_sentence=False, level=1, category="semantic", targets=["coffee"]),
    "coffee_spoon": dict(photo="coffee", query="What object on the saucer would you use to stir sugar into the drink?",
                         is_sentence=True, level=2, category="semantic", targets=["spoon"]),
    "astronaut_helmet": dict(photo="astronaut", query="Which item protects the head of this person during a spacewalk, although she is not wearing it right now?",
                             is_sentence=True, level=2, category="semantic", targets=["helmet"]),
    "astronaut_flag": dict(photo="astronaut", query="the national symbol hanging behind the person", is_sentence=False,
                           level=1, category="spatial", targets=["flag"]),
    "astronaut_patch": dict(photo="astronaut", query="the emblem on the suit that commemorates her space mission",
                            is_sentence=False, level=2, category="semantic", targets=["mission patch"]),
    "chelsea_eyes": dict(photo="chelsea", query="the parts of the animal it uses to see", is_sentence=False, level=1,
                         category="semantic", targets=["left eye", "right eye"], flags=["cat"]),
    "chelsea_nose": dict(photo="chelsea", query="If this animal were sniffing a treat, which part of its face would do the work?",
                         is_sentence=True, level=2, category="semantic", targets=["nose"]),
    "camera_device": dict(photo="camera", query="What is the man holding up to his eye to record the scene in front of him?",
                          is_sentence=True, level=2, category="semantic", targets=["camcorder"]),
    "rocket_vehicle": dict(photo="rocket", query="the vehicle that will carry its payload into orbit", is_sentence=False,
                           level=2, category="semantic", targets=["rocket"]),
    "coins_largest": dict(photo="coins", query="Which coin has the largest diameter? Coins that are nearly as large are not scored.",
                          is_sentence=True, level=3, category="spatial", targets=["largest coin"],
                          ignore=["coin top right", "coin bottom left"]),
}


def load_photo(name: str) -> np.ndarray:
    """A scikit-image sample photo as uint8, (H, W, 3) RGB or (H, W) grayscale."""
    import skimage.data

    return np.asarray(getattr(skimage.data, name)(), dtype=np.uint8)


def jpeg_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def labelme_shape(label: str, points: list, image_name: str) -> dict:
    """One shape with the keys a real ReasonSeg annotation carries."""
    return {"label": label, "labels": [label], "shape_type": "polygon", "image_name": image_name,
            "points": points, "group_id": None, "group_ids": [None], "flags": {}}


def build_images(out: Path) -> None:
    split_dir = out / "reasonseg" / "val"
    for name, spec in IMAGES.items():
        photo = load_photo(spec["photo"])
        objects = OBJECTS[spec["photo"]]
        image_name = f"{name}.jpg"
        (split_dir / image_name).parent.mkdir(parents=True, exist_ok=True)
        (split_dir / image_name).write_bytes(jpeg_bytes(photo))
        shapes = [labelme_shape("target", objects[t], image_name) for t in spec["targets"]]
        shapes += [labelme_shape("ignore", objects[t], image_name) for t in spec.get("ignore", [])]
        shapes += [labelme_shape("flag", objects[t], image_name) for t in spec.get("flags", [])]
        write_json(split_dir / f"{name}.json", {"text": [spec["query"]], "is_sentence": spec["is_sentence"],
                                                "shapes": shapes, "level": spec["level"], "category": spec["category"]})
        write_json(split_dir / "instances" / f"{name}.json",
                   {"instances": [{"id": str(k), "label": label, "points": pts} for k, (label, pts) in enumerate(objects.items())]})


# --- videos (ReVOS format) ------------------------------------------------------------------------


def sprite(photo: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    """Cut one object out of a photo by its polygon: (RGB crop (h, w, 3) uint8, alpha (h, w) bool)."""
    image = load_photo(photo)
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    mask = masks.rasterize_polygon(OBJECTS[photo][label], *image.shape[:2])
    ys, xs = np.nonzero(mask)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    return image[y0:y1, x0:x1].copy(), mask[y0:y1, x0:x1].copy()


def background(kind: str) -> np.ndarray:
    """A (VIDEO_H, VIDEO_W, 3) uint8 backdrop: a scikit-image texture tinted, or a night-sky gradient."""
    import skimage.data

    if kind == "sky":
        t = np.linspace(0.0, 1.0, VIDEO_H)[:, None, None]
        top, bottom = np.array([10, 20, 60.0]), np.array([60, 80, 140.0])
        return np.broadcast_to(top + (bottom - top) * t, (VIDEO_H, VIDEO_W, 3)).round().astype(np.uint8).copy()
    texture, tint = {"wood": ("gravel", (0.75, 0.5, 0.3)), "grass": ("grass", (0.45, 0.8, 0.35)),
                     "stone": ("brick", (0.7, 0.7, 0.75))}[kind]
    gray = getattr(skimage.data, texture)()[:VIDEO_H, :VIDEO_W].astype(np.float64)
    return np.clip(gray[..., None] * np.array(tint), 0, 255).round().astype(np.uint8)


def resize_nearest(array: np.ndarray, scale: float) -> np.ndarray:
    """Nearest-neighbour resize by index arithmetic (exactly reproducible on any platform)."""
    h, w = array.shape[:2]
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    rows = np.minimum((np.arange(nh) + 0.5) * h / nh, h - 1).astype(int)
    cols = np.minimum((np.arange(nw) + 0.5) * w / nw, w - 1).astype(int)
    return array[rows][:, cols]


def lerp(a: float, b: float, t: float) -> float:
    return a + (b - a) * t


# Each clip: background, frame count, objects drawn back to front (later = in front). An object's
# track gives, per frame index i (t = i / (T - 1)), its centre (x, y) in video pixels, its scale
# relative to the sprite and its depth in metres, or None when it is not in the scene.
# Scale = reference depth / depth, so apparent size follows depth like a pinhole camera.
def _track(x0, y0, x1, y1, d0, d1, ref_depth, base_scale, start=0, stop=None):
    def at(i, n):
        if i < start or (stop is not None and i >= stop):
            return None
        t = (i - start) / max(1, ((stop or n) - 1 - start))
        depth = lerp(d0, d1, t)
        return lerp(x0, x1, t), lerp(y0, y1, t), base_scale * ref_depth / depth, depth
    return at


CLIPS: dict[str, dict] = {
    "kitchen_table": dict(
        background="wood", frames=16,
        objects=[
            dict(label="spoon", sprite=("coffee", "spoon"), track=_track(210, 130, 210, 130, 2.0, 2.0, 2.0, 0.55)),
            dict(label="cup", sprite=("coffee", "cup"), track=_track(60, 140, 270, 140, 1.8, 1.8, 1.8, 0.5)),
        ],
        expressions=[
            dict(exp="the cup", objects=["cup"], type_id=0, level=1, category="semantic"),
            dict(exp="the object that slides in front of the other one and covers it for a while", objects=["cup"],
                 type_id=1, level=2, category="temporal"),
            dict(exp="the utensil that stays in the same place during the whole video", objects=["spoon"], type_id=1,
                 level=2, category="temporal"),
            dict(exp="the teapot", objects=[], type_id=2, level=1, category="semantic"),
        ],
    ),
    "launch_pad": dict(
        background="sky", frames=16,
        objects=[
            dict(label="flag", sprite=("astronaut", "flag"), track=_track(45, 150, 45, 150, 8.0, 8.0, 8.0, 0.4)),
            dict(label="rocket", sprite=("rocket", "rocket"), track=_track(200, 190, 200, -120, 10.0, 10.0, 10.0, 0.7,
                                                                           stop=16)),
        ],
        expressions=[
            dict(exp="the flag", objects=["flag"], type_id=0, level=1, category="semantic"),
            dict(exp="the object that leaves the scene through the top of the frame", objects=["rocket"], type_id=1,
                 level=2, category="temporal"),
        ],
    ),
    "lawn_depth": dict(
        background="grass", frames=20,
        objects=[
            dict(label="mission patch", sprite=("astronaut", "mission patch"),
                 track=_track(230, 150, 250, 100, 2.0, 6.0, 2.0, 0.9)),
            dict(label="helmet", sprite=("astronaut", "helmet"), track=_track(90, 120, 120, 150, 6.0, 2.0, 2.0, 0.45)),
        ],
        expressions=[
            dict(exp="the helmet and the emblem", objects=["helmet", "mission patch"], type_id=0, level=1,
                 category="semantic"),
            dict(exp="the object that is getting closer to the camera", objects=["helmet"], type_id=1, level=2,
                 category="spatial"),
            dict(exp="the thing that ends the clip farther away than it started, and is smaller than the other object "
                     "in the last frame", objects=["mission patch"], type_id=1, level=3, category="spatial"),
        ],
    ),
    "UVO/all/coin_entry": dict(
        background="stone", frames=12,
        objects=[
            dict(label="large coin", sprite=("coins", "largest coin"), track=_track(100, 120, 100, 120, 1.0, 1.0, 1.0, 1.4)),
            dict(label="small coin", sprite=("coins", "coin 2"), track=_track(345, 110, 230, 110, 1.0, 1.0, 1.0, 1.4,
                                                                             start=4)),
        ],
        expressions=[
            dict(exp="the coin that appears later in the video", objects=["small coin"], type_id=1, level=2,
                 category="temporal"),
            dict(exp="the larger of the two coins", objects=["large coin"], type_id=1, level=3, category="spatial"),
            dict(exp="the dog", objects=[], type_id=2, level=1, category="semantic"),
        ],
    ),
}


def render_clip(spec: dict) -> tuple[list[np.ndarray], list[list[np.ndarray | None]], list[list[float | None]]]:
    """Composite a clip. Returns frames (H, W, 3) uint8, per object per frame the visible (modal) mask
    (H, W) bool or None when nothing of it is visible, and per object per frame its depth or None."""
    n = spec["frames"]
    sprites = [sprite(*o["sprite"]) for o in spec["objects"]]
    frames, visible, depths = [], [[] for _ in sprites], [[] for _ in sprites]
    for i in range(n):
        canvas = background(spec["background"]).copy()
        layers = []
        for k, (obj, (rgb, alpha)) in enumerate(zip(spec["objects"], sprites)):
            state = obj["track"](i, n)
            full = np.zeros((VIDEO_H, VIDEO_W), dtype=bool)
            if state is not None:
                cx, cy, scale, depth = state
                srgb, salpha = resize_nearest(rgb, scale), resize_nearest(alpha, scale)
                h, w = salpha.shape
                x0, y0 = int(round(cx - w / 2)), int(round(cy - h / 2))
                # clip the sprite to the canvas: objects may enter or leave across the border
                cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(VIDEO_W, x0 + w), min(VIDEO_H, y0 + h)
                if cx1 > cx0 and cy1 > cy0:
                    sub_a = salpha[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
                    sub_rgb = srgb[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
                    region = canvas[cy0:cy1, cx0:cx1]
                    region[sub_a] = sub_rgb[sub_a]
                    full[cy0:cy1, cx0:cx1] = sub_a
            layers.append(full)
            depths[k].append(None if state is None or not full.any() else round(state[3], 3))
        for k, full in enumerate(layers):
            covered = np.zeros_like(full)
            for above in layers[k + 1:]:
                covered |= above
            mask = full & ~covered
            visible[k].append(mask if mask.any() else None)
        frames.append(canvas)
    return frames, visible, depths


def build_videos(out: Path) -> dict[str, dict[str, list[np.ndarray | None]]]:
    """Write the ReVOS part; returns {video: {object label: per frame visible mask or None}}."""
    root = out / "revos"
    visible_of: dict[str, dict[str, list[np.ndarray | None]]] = {}
    meta, mask_dict, foreground, instances = {"videos": {}}, {}, {}, {}
    next_anno = 0
    for vid_id, (video, spec) in enumerate(CLIPS.items()):
        frames, visible, depths = render_clip(spec)
        visible_of[video] = {obj["label"]: vis for obj, vis in zip(spec["objects"], visible)}
        frame_ids = [f"{i:05d}" for i in range(len(frames))]
        for fid, frame in zip(frame_ids, frames):
            path = root / "JPEGImages" / video / f"{fid}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(jpeg_bytes(frame))
        anno_of, obj_of = {}, {}
        instances[video] = []
        for obj_id, (obj, vis, dep) in enumerate(zip(spec["objects"], visible, depths)):
            anno_of[obj["label"]], obj_of[obj["label"]] = next_anno, obj_id
            mask_dict[str(next_anno)] = [None if m is None else masks.encode(m) for m in vis]
            instances[video].append({"anno_id": next_anno, "label": obj["label"], "depth": dep})
            next_anno += 1
        expressions = {}
        for exp_id, e in enumerate(spec["expressions"]):
            expressions[str(exp_id)] = {"exp": e["exp"], "obj_id": [obj_of[o] for o in e["objects"]],
                                        "anno_id": [anno_of[o] for o in e["objects"]], "type_id": e["type_id"],
                                        "level": e["level"], "category": e["category"]}
        meta["videos"][video] = {"vid_id": vid_id, "height": VIDEO_H, "width": VIDEO_W, "frames": frame_ids,
                                 "expressions": expressions}
        # as VISA tools/generate_foreground_mask.py: union of every object of the video, per frame
        fg = [np.zeros((VIDEO_H, VIDEO_W), dtype=bool) for _ in frames]
        for vis in visible:
            for i, m in enumerate(vis):
                if m is not None:
                    fg[i] |= m
        foreground[video] = {"masks_rle": [masks.encode(m) for m in fg],
                             "foreground_ratio": [round(float(m.mean()), 6) for m in fg]}
    write_json(root / "meta_expressions_valid_.json", meta)
    write_json(root / "mask_dict.json", mask_dict)
    write_json(root / "mask_dict_foreground.json", foreground)
    write_json(root / "instances.json", instances)
    return visible_of


# --- RVTBench-format queries on the same clips (canonical records, bench/loaders/canonical.py) -----
# Grounding targets name clip objects: their GT boxes are the tight boxes of the objects' visible masks
# per frame (rvt_bench.core.masks.to_bbox, continuous xyxy pixels), [] where an object is not visible.
RVT_QUERIES: list[dict] = [
    dict(id="grounding/kitchen_table", video="kitchen_table", task="grounding", level=2, category="temporal",
         query="the object that hides the spoon for part of the video", objects=["cup"]),
    dict(id="grounding/launch_pad", video="launch_pad", task="grounding", level=2, category="temporal",
         query="the object that rises and flies out of view", objects=["rocket"]),
    dict(id="grounding/lawn_depth", video="lawn_depth", task="grounding", level=3, category="spatial",
         query="the object that is nearest to the camera at the end of the clip", objects=["helmet"]),
    dict(id="vqa/launch_pad", video="launch_pad", task="vqa", level=1, category="semantic",
         query="What flies upward in this video?", answers=["a rocket", "the rocket", "a rocket flies up"]),
    dict(id="vqa/coin_entry", video="UVO/all/coin_entry", task="vqa", level=2, category="temporal",
         query="How many coins are visible in the last frame?", answers=["two", "two coins", "2"]),
    dict(id="vqa/lawn_depth", video="lawn_depth", task="vqa", level=3, category="spatial",
         query="Which of the two objects is closer to the camera at the end of the video?",
         answers=["the helmet", "the space helmet is closer", "helmet"]),
    dict(id="summary/kitchen_table", video="kitchen_table", task="summary", level=2, category="temporal",
         query="Summarize what happens in the video.",
         answers=["A cup slides from left to right across a wooden table and passes in front of a spoon that "
                  "stays still, hiding it for a while.",
                  "A coffee cup moves across the table in front of a motionless spoon."]),
    dict(id="summary/coin_entry", video="UVO/all/coin_entry", task="summary", level=4, category="temporal",
         query="Describe the events of the video in one or two sentences.",
         answers=["A large coin lies still on a stone surface while a smaller coin enters from the right and "
                  "slides toward it."]),
]


def build_rvtbench(out: Path, visible_of: dict[str, dict[str, list[np.ndarray | None]]]) -> None:
    """Write rvtbench/test.jsonl: canonical records whose frames are the ReVOS part's JPEGs
    (frames: null = every frame of revos/JPEGImages/<video>/, in name order)."""
    lines = []
    for q in RVT_QUERIES:
        record = {"id": q["id"], "video": q["video"], "frames": None, "query": q["query"], "task": q["task"],
                  "level": q["level"], "category": q["category"]}
        if q["task"] == "grounding":
            per_object = [visible_of[q["video"]][label] for label in q["objects"]]
            record["boxes"] = [[masks.to_bbox(masks.encode(m)) for m in frame if m is not None]
                               for frame in zip(*per_object)]
        else:
            record["answers"] = q["answers"]
        lines.append(json.dumps(record, ensure_ascii=False))
    path = out / "rvtbench" / "test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


QUICK_SPLIT = """\
# The demo's quick split: what `python run_bench.py` runs (dataset.split=demo runs all 31 samples).
# Every task and format of the demo in 10 samples (the main job's < 90 s on 2 cores): the first
# expression of each ReVOS-format clip, three ReasonSeg-format images, and RVTBench's first
# grounding, vqa and summary query.
image/astronaut_flag
image/chelsea_eyes
image/coffee_cup
video/kitchen_table/0
video/launch_pad/0
video/lawn_depth/0
video/UVO/all/coin_entry/0
rvt/grounding/kitchen_table
rvt/vqa/launch_pad
rvt/summary/kitchen_table
"""


def build_splits(out: Path) -> None:
    """splits/<name>.txt: the sample ids of each named split (rvt_bench.loaders.demo; "demo" = all, no file)."""
    (out / "splits").mkdir(parents=True, exist_ok=True)
    (out / "splits" / "quick.txt").write_text(QUICK_SPLIT, encoding="utf-8")


def build(out: Path) -> None:
    """Write the whole demo under ``out`` (reasonseg/, revos/, rvtbench/, splits/), replacing what was there."""
    for part in ("reasonseg", "revos", "rvtbench", "splits"):
        shutil.rmtree(out / part, ignore_errors=True)
    build_images(out)
    build_rvtbench(out, build_videos(out))
    build_splits(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "demo")
    build(parser.parse_args().out)


if __name__ == "__main__":
    main()
