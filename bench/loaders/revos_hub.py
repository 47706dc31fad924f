"""ReVOS by hub id (`dataset.hf_dataset=ID`, rvt_bench.loaders.hub): a hub repository holding the
release's raw files, as folders or zip archives (e.g. `revos.zip` in `Dense-World/video-res`), in
VISA's layout (JPEGImages/<video>/) or Sa2VA's (<video>/ beside the JSONs). The JSONs are checked
against the sha256 sums ReVOS-api publishes: equal = VISA's release; otherwise the run warns. No
parquet copy of ReVOS is known. docs/benchmarks/revos.md "Data by hub id".
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders import hub

if TYPE_CHECKING:
    from rvt_bench.loaders.revos import ReVOSDataset

OFFICIAL = "https://github.com/cilinyan/ReVOS-api (OneDrive / Baidu Pan; set dataset.root to the unzipped ReVOS folder)"
# cilinyan/ReVOS-api README: sha256 of the release's files
RELEASE_SHA256 = {
    "mask_dict.json": "e9b4310661495ddd47dedcac1e289621cf8f5dff89c0bb8b65f7699f748d5cff",
    "mask_dict_foreground.json": "05d9be5d7bbed03b216a457274022ad1c9e683b4ffdc32b19c60c5e797fd8f01",
    "meta_expressions_train_.json": "3917dfba8725d080c8658dc43ad4a84cf41ce51438acfaee70bef5aa0310417a",
    "meta_expressions_train_sub_.json": "e171028757d8ec75bea33a661c38c288ecdafdb6c7bc64bb9e14edb97e2e5ade",
    "meta_expressions_valid_.json": "127b975e78effef6033846e68989dcf79c692d644dd07c835b723cea700d4c2d",
}


def load(ds: "ReVOSDataset", hf_dataset: str, revision: str | None) -> tuple[Path, str]:
    """(root, frames folder name: "JPEGImages" or "" for Sa2VA's layout) of the ReVOS files in hub
    copy `hf_dataset`, extracting its zips once when the files are not in plain folders. Sets
    ds.data_source and, when a JSON is missing or differs from the release, a warning. Raises
    DatasetFormatError (one line, pointing to the official download) when the copy holds no ReVOS files."""
    snap, resolved = hub.snapshot(ds.name, hf_dataset, revision)
    work = hub.work_dir(hf_dataset, resolved)
    roots = _roots(snap, ds.split)
    if not roots:
        extracted = hub.extract_archives(ds.name, snap, work / "extracted")
        roots = _roots(extracted, ds.split) if extracted else []
    if not roots:
        raise DatasetFormatError(f"revos: {hf_dataset} (revision {resolved}) holds no ReVOS files "
                                 f"(meta_expressions_{ds.split}_.json with mask_dict.json, in folders or zips); "
                                 f"download the release from {OFFICIAL}")
    root = roots[0]
    frames = "JPEGImages" if (root / "JPEGImages").is_dir() else ""
    checked = _sums(root, work)
    names = [f"meta_expressions_{ds.split}_.json", "mask_dict.json", "mask_dict_foreground.json"]
    differs = [f"{n}: {'missing' if checked.get(n) is None else 'sha256 differs'}" for n in names
               if checked.get(n) != RELEASE_SHA256.get(n)]
    source = hub.DataSource(hf_dataset, resolved, "visa-files" if frames else "sa2va-files", not differs, differs,
                            "" if not differs else "unofficial hub copy")
    ds.data_source = source.to_json()
    if differs:
        ds.warn(f"revos: {hf_dataset} (revision {resolved}) is not VISA's release ({'; '.join(differs)}); J/F/A/R may "
                f"differ from VISA's evaluation on the official files ({OFFICIAL})")
    return root, frames


def _roots(base: Path, split: str) -> list[Path]:
    return hub.find_dirs(base, lambda d: (d / f"meta_expressions_{split}_.json").is_file() and (d / "mask_dict.json").is_file())


def _sums(root: Path, work: Path) -> dict[str, str | None]:
    """sha256 of the release's JSONs in `root` (None when absent), remembered in `work` by size and
    mtime: mask_dict.json is gigabytes."""
    cache_path = work / "sha256.json"
    try:
        cache = files.loads(files.read_text(cache_path, "checksum cache"), str(cache_path), duplicates="last")
    except (OSError, DatasetFormatError):  # missing or unreadable: the sums are computed again
        cache = {}
    cache = cache if isinstance(cache, dict) else {}
    out: dict[str, str | None] = {}
    for name in RELEASE_SHA256:
        path = root / name
        if not path.is_file():
            out[name] = None
            continue
        stat = path.stat()
        key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
        if key not in cache:
            cache[key] = hub.sha256_file(path)
        out[name] = cache[key]
    work.mkdir(parents=True, exist_ok=True)
    cache_path.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    return out
