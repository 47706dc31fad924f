"""VLM families and their coordinate conventions: what `model.family` (conf/model/qwen2_5_vl.yaml,
qwen3_vl.yaml, internvl3.yaml) promises, and the check that no run reads a family's boxes in
another family's convention by accident (VLMEvalKit#219, lmms-eval#892: harnesses that guess the
convention from the numbers' magnitudes score wrong IoUs).

| family       | boxes and points                                   | resize rule (input the model sees)         |
| ------------ | -------------------------------------------------- | ------------------------------------------ |
| `qwen2_5_vl` | absolute pixels of the smart_resize'd input        | factor 28 (14 px patches merged 2x2)       |
| `qwen3_vl`   | integers 0-1000 relative to the image              | factor 32 (16 px patches merged 2x2)       |
| `internvl3`  | integers 0-1000 relative to the image, `<box>[[x1, y1, x2, y2]]</box>` | 448 px tiles (its own server) |

Sources: Qwen2.5-VL report (arXiv 2502.13923, sec. 2.1: "absolute coordinates based on the actual
size of the image") and Qwen/Qwen2.5-VL-7B-Instruct's preprocessor_config.json (patch_size 14,
merge_size 2, min_pixels 3136, max_pixels 12845056); Qwen3-VL's grounding cookbook and
Qwen/Qwen3-VL-8B-Instruct's preprocessor_config.json (relative [0, 1000]; patch_size 16, merge_size
2, size.shortest_edge 65536, size.longest_edge 16777216); InternVL's grounding format
(`<ref>...</ref><box>[[x1, y1, x2, y2]]</box>`, coordinates normalised to [0, 1000], InternVL2/2.5/3
chat and evaluation code). The adapter resizes every frame itself (rvt_bench.adapters.vlm.frames),
so the input size pixel coordinates refer to is known.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from rvt_bench.core.types import AdapterError

CUSTOM = "custom"  # model.family=custom: model.coords is taken as written, no check


@dataclass(frozen=True)
class Family:
    """coords: its rvt_bench.adapters.vlm.coords.COORDINATE_FAMILIES key; factor: the side multiple
    its processor resizes to (None: the model tiles its input itself, coordinates are relative);
    convention: one line for errors and docs; ids: a regular expression over hub ids and served
    names that belong to the family (lower case)."""

    coords: str
    factor: Optional[int]
    convention: str
    ids: str


FAMILIES: dict[str, Family] = {
    "qwen2_5_vl": Family("qwen2_5_vl", 28, "absolute pixels of its smart_resize'd input (factor 28)",
                         r"qwen2[._]5[-_]?vl"),
    "qwen3_vl": Family("qwen3_vl", 32, "integers 0-1000 relative to the image (input resized at factor 32)",
                       r"qwen3[-_]?vl"),
    "internvl3": Family("internvl", None, "integers 0-1000 relative to the image, in <box>[[x1, y1, x2, y2]]</box>",
                        r"internvl(2[._]5|3)"),
}


def family_of(model: Optional[str]) -> Optional[str]:
    """The family a hub id or served model name belongs to by its name, or None."""
    name = (model or "").lower()
    return next((key for key, fam in FAMILIES.items() if re.search(fam.ids, name)), None)


def check(family: Optional[str], coords: str, frames: Mapping[str, Any], model: Optional[str]) -> Optional[str]:
    """`family` once checked against the settings; raises AdapterError (one line, the fix in it) when

    - `family` is none of FAMILIES nor "custom";
    - `coords` is not the family's convention, or `frames.factor` not its resize factor;
    - `family` is None and `model` names a family whose convention is not `coords` (e.g.
      model.model=Qwen/Qwen3-VL-8B-Instruct with the default model.coords=qwen2_5_vl).
    "custom" takes `coords` as written."""
    if family == CUSTOM:
        return family
    if family is None:
        named = family_of(model)
        if named is not None and FAMILIES[named].coords != coords:
            raise AdapterError(
                f"model.model={model} is a {named} model, whose boxes are {FAMILIES[named].convention}, but "
                f"model.coords={coords}: use +model={named} (or model.family={named}); model.family=custom "
                f"keeps model.coords as written")
        return None
    if family not in FAMILIES:
        raise AdapterError(f"model.family={family} is not a known family; expected one of "
                           f"{sorted(FAMILIES)} or {CUSTOM} (model.coords as written)")
    fam = FAMILIES[family]
    if coords != fam.coords:
        raise AdapterError(f"model.coords={coords} contradicts model.family={family}, whose boxes are "
                           f"{fam.convention} (model.coords={fam.coords}); drop the override, or set model.family=custom")
    if fam.factor is not None and int(frames["factor"]) != fam.factor:
        raise AdapterError(f"model.frames.factor={frames['factor']} contradicts model.family={family}, whose "
                           f"processor resizes to multiples of {fam.factor} px; drop the override, or set model.family=custom")
    return family
