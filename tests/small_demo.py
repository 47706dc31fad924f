"""A small copy of the bundled demo for end-to-end runs: image coffee_cup, clips coin_entry and
launch_pad (their first expression each) and the RVTBench queries grounding/launch_pad,
vqa/coin_entry and summary/coin_entry: 6 samples, all four tasks, both modalities."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASKS = {"segmentation": 3, "grounding": 1, "vqa": 1, "summarization": 1}


def make_small_demo(root: Path) -> Path:
    """Write the copy into ``root`` (an empty directory) and return it."""
    shutil.copytree(REPO / "demo", root, dirs_exist_ok=True)
    for p in (root / "reasonseg/val").rglob("*"):
        if p.is_file() and p.stem != "coffee_cup":
            p.unlink()
    meta_path = root / "revos/meta_expressions_valid_.json"
    meta = json.loads(meta_path.read_text())
    meta["videos"] = {v: dict(meta["videos"][v], expressions={"0": meta["videos"][v]["expressions"]["0"]})
                      for v in ("UVO/all/coin_entry", "launch_pad")}
    meta_path.write_text(json.dumps(meta))
    keep = {"grounding/launch_pad", "vqa/coin_entry", "summary/coin_entry"}
    lines = (root / "rvtbench/test.jsonl").read_text().splitlines()
    (root / "rvtbench/test.jsonl").write_text("\n".join(l for l in lines if json.loads(l)["id"] in keep) + "\n")
    # the default split ("quick") of the copy is the whole copy
    (root / "splits/quick.txt").write_text("\n".join(
        ["image/coffee_cup", "video/launch_pad/0", "video/UVO/all/coin_entry/0", *(f"rvt/{k}" for k in sorted(keep))]) + "\n")
    return root
