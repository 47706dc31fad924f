"""The dataset config node (conf/dataset/<name>.yaml) and its schema.

    dataset:
      name: revos                 # the benchmark: run directories, leaderboard file, metrics.json
      root: ???                   # where the data lies (not part of the run's fingerprint)
      split: valid                # which split (metrics.json and the leaderboard row say it)
      loader:                     # how samples are read: a loaders.* Dataset and its arguments
        _target_: rvt_bench.loaders.revos.ReVOSDataset
        root: ${..root}
        split: ${..split}
        on_length_mismatch: warn
      protocol:                   # how they are scored: a rvt_bench.metrics.protocols Protocol
        _target_: rvt_bench.metrics.protocols.revos.ReVOSProtocol
      predictions: {...}          # where a precomputed folder holds a sample's masks  } read as data:
      paper: {...}                # its published table layout and rows               } rvt_bench.core.benchmark
      submission: {...}           # the zip its server scores (bench/harness/submission.py)
      limits:                     # what one file or sample may cost to read (rvt_bench.core.files.ReadLimits)
        max_image_pixels: 67108864
        ...

`root` and `split` sit beside `name` because they say *which* data is evaluated (overrides read
`dataset.root=DIR dataset.split=valid`); the loader receives them by interpolation. So do
`hf_dataset` / `hf_revision` (data by Hugging Face Hub id, rvt_bench.loaders.hub), passed to the
loader only when set, so that a node without them hashes as before. Every other loader argument
is `dataset.loader.<arg>=...`. `limits` (LimitsConfig, defaults from rvt_bench.core.files.ReadLimits,
composed by conf/config.yaml for every dataset) bounds what the run reads per file and sample; like
`root`, it is not part of the run's fingerprint (a sample within the limits scores the same under
any limits). A flat node of older run directories (loader
arguments beside name and protocol, `_target_` at the top) is still read.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from rvt_bench.core.files import ReadLimits
from rvt_bench.core.ranges import COUNT, JSON_DEPTH, MEGABYTES, PIXELS, SAMPLE_PIXELS
from rvt_bench.core.types import DatasetFormatError

_NOT_LOADER = ("name", "protocol", "limits", "predictions", "paper", "submission", "files", "variants")
HUB_KEYS = ("hf_dataset", "hf_revision")  # the dataset node's hub source, handed to the loader when set

# ReadLimits is frozen (a run's limits must not change under it); a config node must take overrides.
# metadata {"gt": 0, "le": ...}: the range rvt_bench.core.ranges checks before a run
_LIMITS_CAPS = {"max_file_mb": MEGABYTES, "max_line_mb": MEGABYTES, "max_json_depth": JSON_DEPTH,
                "max_image_pixels": PIXELS, "max_polygon_points": COUNT, "max_sample_pixels": SAMPLE_PIXELS}
LimitsConfig = make_dataclass("LimitsConfig", [(f.name, type(f.default),
                                                field(default=f.default, metadata={"gt": 0, "le": _LIMITS_CAPS[f.name]}))
                                               for f in fields(ReadLimits)])
LimitsConfig.__doc__ = """`dataset.limits`: rvt_bench.core.files.ReadLimits' fields, defaults and documentation."""


@dataclass
class DatasetConfig:
    """Schema of the dataset node (module docstring). root / split: Any, as `???`, a path, an
    interpolation (`${repo:demo}`) or null (a loader without a root) are all valid."""

    name: str = MISSING
    root: Any = None
    split: Any = None
    hf_dataset: Any = None
    hf_revision: Any = None
    loader: Any = field(default_factory=dict)
    protocol: Any = field(default_factory=dict)
    predictions: Any = None   # where a precomputed folder holds a sample's masks (rvt_bench.core.benchmark)
    paper: Any = None         # its published table and rows (rvt_bench.core.benchmark, leaderboards/tables.py)
    submission: Any = None    # the zip its server scores, GT not public (bench/harness/submission.py)
    files: Any = None         # the files its loader reads and their roles (rvt_bench.core.benchmark.declared_files)
    variants: Any = None      # named protocol variants a paper scored under (rvt_bench.core.benchmark.variants)
    limits: Any = field(default_factory=LimitsConfig)
    # options a benchmark declares at the top of its node for the command line (its loader reads
    # them as ${..key}); null and absent elsewhere, so no other node changes
    subset: Any = None        # the part of a benchmark a run scores, parts scored apart (SA-Co/Gold's seven)
    annotators: Any = None    # whose annotations, of a benchmark annotated several times (SA-Co/Gold's a, b, c)


def register() -> None:
    """Store the schema in Hydra's ConfigStore as `schema/dataset`, and the limits as
    `dataset_limits_schema` (conf/config.yaml composes it at dataset.limits) (idempotent)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="schema", name="dataset", node=DatasetConfig)
    ConfigStore.instance().store(name="dataset_limits_schema", node=LimitsConfig)


register()  # at import, as Hydra's ConfigStore convention: the runner imports this module


def _plain(node: Any) -> dict:
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)
    return dict(node)


def is_split(node: Any) -> bool:
    """Whether a dataset node has the name / loader / protocol form (else: the flat older form)."""
    return "loader" in node and "_target_" not in node


def validate(node: Any) -> None:
    """DatasetFormatError naming the problem when a split-form node does not fit DatasetConfig
    (unknown key, no name, a loader without _target_)."""
    if not is_split(node):
        return
    unknown = sorted(set(node) - {f for f in DatasetConfig.__dataclass_fields__})
    if unknown:
        raise DatasetFormatError(f"dataset config: unknown keys {unknown} (loader arguments go under dataset.loader; "
                                 f"allowed: {sorted(DatasetConfig.__dataclass_fields__)})")
    loader = node["loader"]
    if not isinstance(loader, (dict, DictConfig)) or "_target_" not in loader:
        raise DatasetFormatError("dataset config: dataset.loader needs a _target_ (a loaders.* Dataset class)")


def read_limits(node: Any) -> ReadLimits:
    """The ReadLimits of a dataset node: its `limits` over ReadLimits' defaults (a node without
    them, e.g. an older run's config, gets the defaults). Raises ValueError for a value that is not
    a positive number."""
    given = node.get("limits") if isinstance(node, (dict, DictConfig)) else None
    return ReadLimits(**(_plain(given) if given else {}))


def loader_kwargs(node: Any, root: str | None = None) -> dict:
    """The loader's config, resolved ({"_target_": ..., **arguments}) for `hydra.utils.instantiate`.

    node: the dataset node (DictConfig or dict), split or flat form. root: a replacement data root
    (the data moved since the run). Raises DatasetFormatError as `validate`."""
    validate(node)
    if is_split(node):
        kwargs = _plain(node["loader"])
        plain = _plain(node)
        kwargs.update({k: plain[k] for k in HUB_KEYS if plain.get(k) is not None})
    else:
        kwargs = {k: v for k, v in _plain(node).items() if k not in _NOT_LOADER}
    if root:
        kwargs["root"] = root
    return kwargs


def flat(node: Any) -> dict:
    """The dataset node in the flat form older runs used ({name, _target_, root, split, ...loader
    arguments, protocol}, resolved): what the run's fingerprint hashes, so a run directory made
    before the split still resumes."""
    if not is_split(node):
        return _plain(node)
    plain = _plain(node)
    out = {"name": plain.get("name"), **plain["loader"]}
    for key in ("root", "split"):  # the loader's own (interpolated) values, else the node's
        if key not in out and plain.get(key) is not None:
            out[key] = plain[key]
    out.update({k: plain[k] for k in HUB_KEYS if plain.get(k) is not None})  # only when set: older runs keep their hash
    if "protocol" in plain:
        out["protocol"] = plain["protocol"]
    return out


def from_yaml(path: str, root: Any = None, split: Any = None, **loader_args: Any) -> Any:
    """The loader of the dataset config file `path` (conf/dataset/<name>.yaml), built with `root`,
    `split` (None: the file's) and `loader_args` merged over its loader arguments (a mapping
    extends the file's, as `+dataset.loader.<arg>.<key>=...` does); for tests and scripts that read
    a benchmark without a Hydra run. Raises what the loader raises (not wrapped by Hydra)."""
    from hydra.utils import get_class

    node = OmegaConf.load(path)
    if root is not None:
        node.root = str(root)
    if split is not None:
        node.split = split
    node.loader = OmegaConf.merge(node.loader, loader_args)
    kwargs = loader_kwargs(node)
    return get_class(kwargs.pop("_target_"))(**kwargs)
