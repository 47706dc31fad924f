"""The canonical per-query record, for benchmarks whose release format is not publicly documented
(JiTBench, RVTBench: one YAML file each, conf/dataset/), and the field mapping that adapts a
release's own names to it. Every field, validation, bad data and mapping: docs/benchmarks/canonical.md.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rvt_bench.core import files, masks
from rvt_bench.loaders.base import UTF8_BOM, Dataset, existing_splits, layout_hint, read_json, require_dir
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import RLE, TASKS, DatasetFormatError, Sample, Target

log = logging.getLogger(__name__)

CANONICAL_FIELDS = ("id", "video", "frames", "query", "task", "category", "level", "masks", "boxes", "answers", "twin")
REQUIRED_FIELDS = ("id", "video", "query")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
BOX_FORMATS = ("xyxy", "xywh")
BOX_UNITS = ("pixels", "normalized")
BOX_SLACK_PX = 1.0  # coordinates this far outside the frame are taken as rounding, not as an error
NEEDED_TARGET = {"segmentation": "masks", "grounding": "boxes", "vqa": "answers", "summarization": "answers"}


class CanonicalDataset(Dataset):
    """Samples from canonical records (module docstring) read from a local file or a ``datasets`` split.

    root:        directory that frame, mask-PNG and twin paths are relative to.
    split:       split name: the file <root>/<split>.jsonl or <root>/<split>.json, or the hub split.
    annotation:  explicit JSONL / JSON file (relative to root or absolute); overrides the split file.
    hf_dataset:  a ``datasets.load_dataset`` path (hub id such as "yiqingshen/rvtbench", or a local
                 directory / script); when set, records are the rows of its ``split``.
    hf_config:   the ``datasets`` configuration name (``name=``), or None.
    hf_cache_dir: ``cache_dir`` for ``datasets.load_dataset`` (None: its default, ~/.cache/huggingface).
    hf_revision: the hub revision (commit sha the harness pinned; None: main).
    frames_dir:  frames are under <root>/<frames_dir>/<video>/ ("" = directly under root).
    fields:      {canonical name: release name} (dotted for nested keys).
    task_aliases: {release task value: canonical task}.
    default_task: task of records without one (None: the task field is required).
    levels:      allowed level values (None: any int); categories: allowed categories (None: any str).
    box_format, box_units: how the release writes boxes (converted to xyxy pixels).
    extra_fields: release keys copied to Sample.meta; strict: unknown keys are an error.
    name:        the benchmark's name (Sample.dataset, messages; conf/dataset/<name>.yaml), e.g.
                 "rvtbench"; published: where the release is published (named when data is missing).
                 A canonical-format benchmark is this class plus one YAML file, no module.

    Sample: id from the record, modality "video", frames as above, frame_ids = frame file stems,
    task, target (masks as RLE, boxes as xyxy pixels, answers), meta = {"video", "level",
    "category", "twin_path", ...extra_fields} (keys with a null value left out).
    A record that fails validation is left out and recorded in ``errors`` (module docstring); raises
    DatasetFormatError when the root or annotation file is missing or unreadable as a whole, when
    it holds no record, or when every record failed.
    """

    name = "canonical"
    published = "(not published)"
    layout = ("  <split>.jsonl or <split>.json   canonical per-query records (bench/loaders/canonical.py)\n"
              "  <frames_dir>/<video>/<frame>.jpg")

    def __init__(
        self,
        root: str | Path,
        split: str = "test",
        annotation: str | None = None,
        hf_dataset: str | None = None,
        hf_config: str | None = None,
        hf_cache_dir: str | None = None,
        hf_revision: str | None = None,
        frames_dir: str = "frames",
        fields: Mapping[str, str] | None = None,
        task_aliases: Mapping[str, str] | None = None,
        default_task: str | None = None,
        levels: Sequence[int] | None = None,
        categories: Sequence[str] | None = None,
        box_format: str = "xyxy",
        box_units: str = "pixels",
        extra_fields: Sequence[str] = (),
        strict: bool = True,
        name: str | None = None,
        published: str | None = None,
    ) -> None:
        super().__init__()
        if name is not None:
            self.name = str(name)
        if published is not None:
            self.published = str(published)
        self.root = Path(root)
        self.split = split
        self.frames_root = self.root / frames_dir if frames_dir else self.root
        self.fields = {k: str(v) for k, v in dict(fields or {}).items()}
        unknown = sorted(set(self.fields) - set(CANONICAL_FIELDS))
        if unknown:
            raise ValueError(f"{self.name}: fields maps unknown canonical names {unknown}; canonical: {list(CANONICAL_FIELDS)}")
        self.task_aliases = {str(k): str(v) for k, v in dict(task_aliases or {}).items()}
        if default_task is not None and default_task not in TASKS:
            raise ValueError(f"{self.name}: default_task must be one of {TASKS}, got {default_task!r}")
        if box_format not in BOX_FORMATS or box_units not in BOX_UNITS:
            raise ValueError(f"{self.name}: box_format must be in {BOX_FORMATS} and box_units in {BOX_UNITS}, "
                             f"got {box_format!r}, {box_units!r}")
        self.default_task = default_task
        self.levels = None if levels is None else [int(v) for v in levels]
        self.categories = None if categories is None else [str(c) for c in categories]
        self.box_format, self.box_units = box_format, box_units
        self.extra_fields = list(extra_fields)
        self.strict = bool(strict)
        self._video_cache: dict[str, tuple[list[str], tuple[int, int]]] = {}

        self.hf_cache_dir = hf_cache_dir
        self.hf_revision = hf_revision
        source, records = self._records(annotation, hf_dataset, hf_config)
        seen: set[str] = set()
        for k, record in enumerate(records):
            if isinstance(record, _BadLine):
                self.record_error(record.where, record.message)
                continue
            with self.sample_errors(self._record_id(record, f"{source} record {k}")):
                sample = self._sample(record, f"{source} record {k}")
                if sample.id in seen:
                    raise DatasetFormatError(f"{source} record {k}: duplicate id {sample.id!r}")
                seen.add(sample.id)
                self._samples.append(sample)
        if not self._samples and not self.errors:
            raise DatasetFormatError(f"{self.name}: {source} holds no record")
        self.require_some_samples(source)

    def _record_id(self, record: Any, fallback: str) -> str:
        """The id a record's sample would have (for ``errors``), or ``fallback`` when it has none."""
        value = self._get(record, "id") if isinstance(record, Mapping) else None
        return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "" else fallback

    # --- reading ------------------------------------------------------------------------------

    def _records(self, annotation: str | None, hf_dataset: str | None, hf_config: str | None) -> tuple[str, Iterable[Any]]:
        if hf_dataset is not None:
            return f"datasets.load_dataset({hf_dataset!r}, split={self.split!r})", _hf_rows(hf_dataset, hf_config, self.split, self.name, self.hf_cache_dir, self.hf_revision)
        require_dir(self.root, dataset=self.name, layout=f"{self.root}/\n{self.layout}", published=self.published)
        if annotation is not None:
            candidates = [Path(annotation) if Path(annotation).is_absolute() else self.root / annotation]
        else:
            candidates = [self.root / f"{self.split}.jsonl", self.root / f"{self.split}.json"]
        path = next((p for p in candidates if p.exists() and not p.is_dir()), None)
        if path is None:
            present = [p.stem for p in self.root.iterdir() if p.is_file() and p.suffix in (".jsonl", ".json")]
            layout = f"{self.root}/\n{self.layout}"
            raise DatasetFormatError(
                f"{self.name}: no annotation file for split {self.split!r}: looked for {[str(p) for p in candidates]}; "
                f"splits present: {existing_splits(present)}; {layout_hint(layout, self.published)}; "
                f"a release with other file or field names: set dataset.loader.annotation and dataset.loader.fields "
                f"(conf/dataset/{self.name}.yaml)"
            )
        return str(path), _file_records(path)

    def _get(self, record: Mapping, canonical: str) -> Any:
        key = self.fields.get(canonical, canonical)
        value: Any = record
        for part in key.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
        return value

    def _sample(self, record: Any, where: str) -> Sample:
        if not isinstance(record, Mapping):
            raise DatasetFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
        if self.strict:
            used = {self.fields.get(c, c).split(".")[0] for c in CANONICAL_FIELDS} | set(self.extra_fields)
            unknown = sorted(str(k) for k in record if k not in used)
            if unknown:
                raise DatasetFormatError(
                    f"{where}: unknown keys {unknown}; map them with dataset.loader.fields, keep them with "
                    f"dataset.loader.extra_fields, or set dataset.loader.strict=false"
                )
        values = {c: self._get(record, c) for c in CANONICAL_FIELDS}
        for c in REQUIRED_FIELDS:
            if not isinstance(values[c], (str, int)) or isinstance(values[c], bool) or values[c] == "":
                raise DatasetFormatError(f"{where}: field {c!r} (release key {self.fields.get(c, c)!r}) must be a non-empty string, got {values[c]!r}")
        sid, video, query = str(values["id"]), str(values["video"]), str(values["query"])
        where = f"{where} (id {sid!r})"
        task = self._task(values["task"], where)
        frames, (height, width) = self._frames(video, values["frames"], where)
        target = Target(
            masks=self._masks(values["masks"], len(frames), (height, width), where),
            boxes=self._boxes(values["boxes"], len(frames), (height, width), where),
            answers=_answers(values["answers"], where),
        )
        needed = NEEDED_TARGET[task]
        if getattr(target, needed) is None:
            raise DatasetFormatError(f"{where}: task {task!r} needs {needed!r} (release key {self.fields.get(needed, needed)!r})")
        meta: dict[str, Any] = {"video": video}
        level, category = values["level"], values["category"]
        if level is not None:
            if isinstance(level, bool) or not isinstance(level, (int, str)) or not str(level).lstrip("-").isdigit():
                raise DatasetFormatError(f"{where}: level must be an integer, got {level!r}")
            level = int(level)
            if self.levels is not None and level not in self.levels:
                raise DatasetFormatError(f"{where}: level {level} not in {self.levels}")
            meta["level"] = level
        if category is not None:
            if not isinstance(category, str) or (self.categories is not None and category not in self.categories):
                raise DatasetFormatError(f"{where}: category must be one of {self.categories or 'str'}, got {category!r}")
            meta["category"] = category
        if values["twin"] is not None:
            if not isinstance(values["twin"], str):
                raise DatasetFormatError(f"{where}: twin must be a path string, got {values['twin']!r}")
            twin = self._path(values["twin"], f"{where}: twin path")
            if not twin.is_file():
                raise DatasetFormatError(f"{where}: twin file {twin} does not exist")
            meta["twin_path"] = str(twin)
        for key in self.extra_fields:
            if key in record:
                meta[key] = record[key]
        return Sample(
            id=sid, dataset=self.name, split=self.split, modality="video",
            frames=[str(f) for f in frames], frame_ids=[Path(f).stem for f in frames],
            query=query, task=task, target=target, meta=meta,
        )

    def _task(self, value: Any, where: str) -> str:
        if value is None:
            if self.default_task is None:
                raise DatasetFormatError(f"{where}: no 'task' (release key {self.fields.get('task', 'task')!r}) and no dataset.default_task")
            return self.default_task
        task = self.task_aliases.get(str(value), str(value))
        if task not in TASKS:
            raise DatasetFormatError(f"{where}: task {value!r} is not one of {TASKS}; map it with dataset.loader.task_aliases")
        return task

    def _path(self, name: str, what: str) -> Path:
        """An absolute path as it is, a relative one under root (refused when it climbs out of it)."""
        return Path(name) if Path(name).is_absolute() else files.inside(self.root, name, what)

    def _frames(self, video: str, names: Any, where: str) -> tuple[list[Path], tuple[int, int]]:
        video_dir = files.inside(self.frames_root, video, f"{where}: video")
        if names is None:
            if video not in self._video_cache:
                if not video_dir.is_dir():
                    raise DatasetFormatError(f"{where}: frame directory {video_dir} does not exist")
                listed = sorted(p.name for p in video_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
                if not listed:
                    raise DatasetFormatError(f"{where}: {video_dir} holds no {IMAGE_SUFFIXES} frame")
                self._video_cache[video] = (listed, frame_size(video_dir / listed[0]))
            listed, size = self._video_cache[video]
            return [video_dir / n for n in listed], size
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DatasetFormatError(f"{where}: frames must be a non-empty list of file names, got {str(names)[:120]}")
        paths = [files.inside(video_dir, n, f"{where}: frame name") for n in names]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise DatasetFormatError(f"{where}: {len(missing)} frame file(s) missing, first {missing[0]}")
        # one header read per video: the release's frames of a video share one size
        key = f"{video}\0{names[0]}"
        if key not in self._video_cache:
            self._video_cache[key] = ([], frame_size(paths[0]))
        return paths, self._video_cache[key][1]

    def _masks(self, value: Any, n: int, size: tuple[int, int], where: str) -> list[RLE | None] | None:
        if value is None:
            return None
        if not isinstance(value, list) or len(value) != n:
            raise DatasetFormatError(f"{where}: masks must be a list of {n} per-frame entries (RLE, PNG path or null), "
                                     f"got {type(value).__name__}" + (f" of length {len(value)}" if isinstance(value, list) else ""))
        out: list[RLE | None] = []
        for t, entry in enumerate(value):
            if entry is None:
                out.append(None)
                continue
            if isinstance(entry, str):
                mask = masks.read_png_mask(self._path(entry, f"{where} frame {t}: mask path"))
                rle = masks.encode(mask) if mask.any() else None
                got = list(mask.shape)
            elif isinstance(entry, Mapping) and "size" in entry and "counts" in entry:
                masks.check_rle(dict(entry), size, f"{where} field 'masks' frame {t}")
                try:
                    decoded = masks.decode(dict(entry))
                except DatasetFormatError as exc:
                    raise DatasetFormatError(f"{where} frame {t}: {exc}") from exc
                rle = masks.encode(decoded) if decoded.any() else None  # normalise: ASCII counts, empty -> None
                got = list(decoded.shape)
            else:
                raise DatasetFormatError(f"{where} frame {t}: a mask must be an RLE {{'size', 'counts'}}, a PNG path or null, got {str(entry)[:80]}")
            if got != list(size):
                raise DatasetFormatError(f"{where} frame {t}: mask is {got} (H, W), the frame is {list(size)}")
            out.append(rle)
        return out

    def _boxes(self, value: Any, n: int, size: tuple[int, int], where: str) -> list[list[list[float]]] | None:
        if value is None:
            return None
        if not isinstance(value, list) or len(value) != n:
            raise DatasetFormatError(f"{where}: boxes must be a list of {n} per-frame box lists, got "
                                     f"{type(value).__name__}" + (f" of length {len(value)}" if isinstance(value, list) else ""))
        height, width = size
        scale = np.array([width, height, width, height], dtype=np.float64) if self.box_units == "normalized" else 1.0
        out = []
        for t, frame in enumerate(value):
            try:
                arr = np.zeros((0, 4)) if frame is None or len(frame) == 0 else np.asarray(frame, dtype=np.float64)
                if arr.ndim == 1:
                    arr = arr[None, :]
                if arr.ndim != 2 or arr.shape[1] != 4:
                    raise ValueError(f"shape {arr.shape}")
            except (TypeError, ValueError) as exc:
                raise DatasetFormatError(f"{where} frame {t}: boxes must be [[x1, y1, x2, y2], ...] ({self.box_format}), got {str(frame)[:80]}: {exc}") from exc
            if self.box_format == "xywh":
                arr = np.concatenate([arr[:, :2], arr[:, :2] + arr[:, 2:]], axis=1)
            arr = arr * scale
            if not np.all(np.isfinite(arr)) or np.any(arr[:, 2] < arr[:, 0]) or np.any(arr[:, 3] < arr[:, 1]):
                raise DatasetFormatError(f"{where} field 'boxes' frame {t}: invalid box {str(frame)[:80]} (need finite x1 <= x2, y1 <= y2 after conversion)")
            # a box must overlap its frame's [0, W] x [0, H] by its coordinates (BOX_SLACK_PX of rounding allowed)
            if np.any(arr[:, :2] < -BOX_SLACK_PX) or np.any(arr[:, 2] > width + BOX_SLACK_PX) or np.any(arr[:, 3] > height + BOX_SLACK_PX):
                raise DatasetFormatError(f"{where} field 'boxes' frame {t}: box {str(frame)[:80]} lies outside the "
                                         f"frame [0, {width}] x [0, {height}] (xyxy pixels after conversion)")
            out.append(arr.tolist())
        return out


def _answers(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a.strip() for a in value):
        raise DatasetFormatError(f"{where}: answers must be a non-empty string or list of non-empty strings, got {str(value)[:120]}")
    return list(value)


class _BadLine:
    """A JSONL line that is not a usable JSON record: it fails its own sample, not the file.
    where: "<file> line <n>" (the sample's name in errors)."""

    def __init__(self, where: str, message: str) -> None:
        self.where, self.message = where, message


def _file_records(path: Path) -> list[Any]:
    """The records of a .jsonl file (one per non-blank line; a line that is not UTF-8 JSON, or breaks
    a dataset.limits bound, becomes a _BadLine; a UTF-8 BOM at the start is skipped) or of a .json
    file (a list, or an object holding exactly one list; the whole file fails when it is not JSON)."""
    if path.suffix == ".jsonl":
        records: list[Any] = []
        try:
            for n, line in files.lines(path, "annotation file"):
                if n == 1 and line is not None and line.startswith(UTF8_BOM):
                    line = line[len(UTF8_BOM):]
                where = f"{path} line {n}"
                if line is None:
                    records.append(_BadLine(where, f"{where} is not a JSON record: longer than "
                                                   f"{files.limits().max_line_mb:g} MB (dataset.limits.max_line_mb)"))
                elif line.strip():
                    try:
                        records.append(files.loads(line.rstrip(b"\n").decode("utf-8"), where))
                    except UnicodeDecodeError as exc:
                        records.append(_BadLine(where, f"{where} is not a JSON record: {exc}"))
                    except files.FileLimitError as exc:
                        records.append(_BadLine(where, str(exc)))
                    except DatasetFormatError as exc:  # "<where> is not valid JSON: ..."
                        records.append(_BadLine(where, str(exc).replace("is not valid JSON", "is not a JSON record", 1)))
        except FileNotFoundError as exc:
            raise DatasetFormatError(f"annotation file {path} does not exist") from exc
        except OSError as exc:
            raise DatasetFormatError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return records
    data = read_json(path)
    if isinstance(data, Mapping):  # {"queries": [...]} or similar single-key wrapper
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DatasetFormatError(f"{path}: expected a JSON list of records (or an object holding exactly one list)")
        data = lists[0]
    if not isinstance(data, list):
        raise DatasetFormatError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def _hf_rows(path: str, config: str | None, split: str, dataset: str, cache_dir: str | None,
             revision: str | None = None) -> Iterable[dict]:
    try:
        import datasets
    except ImportError as exc:
        raise DatasetFormatError(f"{dataset}: dataset.loader.hf_dataset needs the `datasets` package (pip install datasets)") from exc
    try:
        # a local directory has no revision (the harness pins it as "local:<digest>")
        local = revision is None or str(revision).startswith("local:")
        ds = datasets.load_dataset(path, config, split=split, cache_dir=cache_dir, **({} if local else {"revision": revision}))
    except Exception as exc:  # datasets raises many types (FileNotFoundError, DatasetNotFoundError, ValueError...)
        raise DatasetFormatError(f"{dataset}: datasets.load_dataset({path!r}, {config!r}, split={split!r}) failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
    return (dict(row) for row in ds)
