"""Models kept outside this repository (rvt_bench.harness.plugins, docs/adding-a-model.md): a real
package built and installed by pip registers its conf folder through the entry point
`rvt_bench.models`, shows in --list with where it comes from and runs on the demo; a --config-dir
model whose module is importable runs; one whose module is not is named as that, with PYTHONPATH
as the fix, never as a name to install from PyPI."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rvt_bench.harness import plugins
from rvt_bench.harness.stops import not_importable

REPO = Path(__file__).resolve().parents[1]

ADAPTER = textwrap.dedent('''\
    import numpy as np

    from rvt_bench.adapters.base import Adapter
    from rvt_bench.core import masks
    from rvt_bench.core.frames import frame_size
    from rvt_bench.core.types import AdapterError, Prediction


    class Centre(Adapter):
        def __init__(self, name="centre"):
            self.name = name

        def fingerprint(self):
            return {"adapter": "outside_centre"}

        def predict(self, sample):
            if sample.task != "segmentation":
                raise AdapterError(f"sample {sample.id}: segmentation only")
            h, w = frame_size(sample.frames[0])
            mask = np.zeros((h, w), bool)
            mask[h // 4: 3 * h // 4, w // 4: 3 * w // 4] = True
            return Prediction(sample.id, task=sample.task, masks=[masks.encode(mask)] * sample.num_frames)
    ''')


def build_package(root: Path) -> Path:
    """A package `tiny-models` (module tiny_models: an adapter and conf/model/tiny_centre.yaml,
    registered under the entry point rvt_bench.models; data_conf/dataset/tiny_demo.yaml under
    rvt_bench.datasets) installed by pip into root/site; returns that folder."""
    src = root / "src"
    (src / "tiny_models" / "conf" / "model").mkdir(parents=True)
    (src / "tiny_models" / "data_conf" / "dataset").mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent('''\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "tiny-models"
        version = "0.1"
        [project.entry-points."rvt_bench.models"]
        tiny = "tiny_models.conf"
        [project.entry-points."rvt_bench.datasets"]
        tiny_data = "tiny_models.data_conf"
        [tool.setuptools.package-data]
        "*" = ["*.yaml"]
        '''))
    (src / "tiny_models" / "__init__.py").write_text("")
    (src / "tiny_models" / "conf" / "__init__.py").write_text("")
    (src / "tiny_models" / "data_conf" / "__init__.py").write_text("")
    (src / "tiny_models" / "data_conf" / "dataset" / "tiny_demo.yaml").write_text(
        "# The demo under another name, from an installed package.\ndefaults:\n  - demo\n  - _self_\n\nname: tiny_demo\n")
    (src / "tiny_models" / "centre.py").write_text(ADAPTER)
    (src / "tiny_models" / "conf" / "model" / "tiny_centre.yaml").write_text(
        "# The centre quarter of the frame, from an installed package.\n"
        "_target_: tiny_models.centre.Centre\nname: tiny_centre\n")
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--no-index", "--target", str(site), str(root)],
                   check=True, capture_output=True, timeout=120)
    return site


def rvt_bench(args: list[str], tmp_path: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    runs = [] if "--list" in args else [f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"]
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args, *runs], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=180)


def test_an_installed_packages_model_and_benchmark_are_listed_with_their_origin_and_run(tmp_path):
    site = build_package(tmp_path / "pkg")
    listed = rvt_bench(["--list"], tmp_path, site)
    assert listed.returncode == 0, listed.stderr[-2000:]
    flat = " ".join(listed.stdout.split())
    assert "+model=tiny_centre The centre quarter of the frame, from an installed package." in flat
    assert "[from: package tiny-models 0.1 (entry point rvt_bench.models: tiny = tiny_models.conf)]" in flat
    assert ("+dataset=tiny_demo The demo under another name, from an installed package. [from: package "
            "tiny-models 0.1 (entry point rvt_bench.datasets: tiny_data = tiny_models.data_conf)]") in flat
    proc = rvt_bench(["+dataset=tiny_demo", "+model=tiny_centre", "run.limit=2"], tmp_path, site)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (tmp_path / "runs" / "tiny_demo" / "tiny_centre").is_dir()


def test_without_the_package_on_the_path_the_model_is_not_listed(tmp_path):
    listed = rvt_bench(["--list"], tmp_path)
    assert listed.returncode == 0 and "tiny_centre" not in listed.stdout


def config_dir_model(root: Path, module: str) -> Path:
    conf = root / "conf" / "model"
    conf.mkdir(parents=True)
    (conf / "mine.yaml").write_text(f"# My own model, beside its module.\n_target_: {module}.Centre\nname: mine\n")
    return root / "conf"


def test_a_config_dir_model_whose_module_is_on_the_path_is_listed_and_runs(tmp_path):
    conf = config_dir_model(tmp_path / "work", "my_models.centre")
    (tmp_path / "work" / "my_models").mkdir()
    (tmp_path / "work" / "my_models" / "__init__.py").write_text("")
    (tmp_path / "work" / "my_models" / "centre.py").write_text(ADAPTER)
    listed = rvt_bench(["--list", "--config-dir", str(conf)], tmp_path)
    assert f"[from: --config-dir {conf}]" in " ".join(listed.stdout.split())
    proc = rvt_bench(["--config-dir", str(conf), "+model=mine", "run.limit=2"], tmp_path, tmp_path / "work")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_config_dir_model_whose_module_is_not_on_the_path_names_pythonpath_not_pypi(tmp_path):
    conf = config_dir_model(tmp_path / "work", "my_models.centre")
    proc = rvt_bench(["--config-dir", str(conf), "+model=mine", "run.limit=2"], tmp_path)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 7, proc.stderr[-2000:]  # missing_package (rvt_bench.harness.cli.EXIT_CODES)
    assert "my_models.centre.Centre" in last and "'my_models'" in last and "PYTHONPATH" in last and "pip install -e YOUR_PACKAGE" in last
    assert "pip install my_models" not in proc.stderr and "Traceback" not in proc.stderr


def test_only_rvt_benchs_own_requirements_are_named_to_pip_install():
    # sam2 is rvt-bench's own extra: the line names the extra (rvt_bench.harness.stops.install_hint)
    assert not_importable("sam2.build_sam", "model 'vlm'").endswith('pip install -e ".[sam2]"')
    line = not_importable("requests_oauthlib_fork", "model 'x'")
    assert "pip install requests_oauthlib_fork" not in line and "PYTHONPATH" in line


def test_a_hydra_searchpath_folder_is_listed_with_its_origin(tmp_path):
    conf = config_dir_model(tmp_path / "work", "my_models.centre")
    listed = rvt_bench(["--list", f"hydra.searchpath=[file://{conf}]"], tmp_path)
    assert f"[from: hydra.searchpath file://{conf}]" in " ".join(listed.stdout.split())


def test_installed_conf_packages_are_appended_to_the_command_lines_searchpath(monkeypatch):
    source = plugins.ConfSource("package p", Path("."), "pkg://p.conf")
    monkeypatch.setattr(plugins, "entry_point_sources", lambda: [source])
    assert plugins.searchpath_override(["+model=m"]) == ["+model=m", "hydra.searchpath=['pkg://p.conf']"]
    merged = plugins.searchpath_override(["hydra.searchpath=[file:///a]", "+model=m"])
    assert merged == ["hydra.searchpath=['file:///a','pkg://p.conf']", "+model=m"]


def test_a_registered_conf_package_that_cannot_be_found_is_reported_not_searched(monkeypatch):
    import importlib.metadata as md

    ep = md.EntryPoint("gone", "no_such_pkg_i36.conf", "rvt_bench.models")
    monkeypatch.setattr(md, "entry_points", lambda group: [ep] if group == "rvt_bench.models" else [])
    [source] = plugins.entry_point_sources()
    assert source.path is None and source.searchpath is None and "no_such_pkg_i36" in source.problem


def test_a_missing_module_of_an_importable_package_names_the_package_and_the_target():
    line = not_importable("json.no_such_module_i36", "model 'x' (_target_ json.no_such_module_i36.M)")
    assert "the package 'json'" in line and "has no such module" in line and "check the _target_" in line
