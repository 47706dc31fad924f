"""Training rolls out on the twin evaluation builds (issue 43 item 3): foundation perception by default,
its model calls cached on disk so a second epoch runs none; every setting training lacks stops it at start."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rvt_bench.core.types import AdapterError
from tests.test_datasets_reasonseg import rect, shape, write_sample
from tests.test_train_grpo import TwoBranchPolicy
from train_dtr1 import REPO_ROOT, build_trainer


def _reasonseg(root, n=1):
    for i in range(n):
        write_sample(root / "train", f"img{i}", [shape("target", rect(4, 4, 20, 16))], size=(32, 40))
    return root


def _cfg(tmp_path, base, *extra):
    overrides = [
        f"base_model={base}", "dtype=float32", f"output_dir={tmp_path / 'out'}",
        "data.use=[reasonseg]", f"data.sources.reasonseg.dataset.root={tmp_path / 'reasonseg'}",
        "rollout.max_new_tokens=8", "rollout.max_total_tokens=16", "rollout.batch_size=4",
        "rollout.sandbox.timeout_s=20", "lora.target_modules=[q_proj,v_proj]",
        "grpo.num_generations=4", "grpo.per_device_train_batch_size=4", "grpo.num_train_epochs=2",
        "grpo.bf16=false", "grpo.activation_checkpointing=false", "grpo.use_cpu=true",
        "grpo.max_completion_length=2048", "grpo.save_strategy=no", "+grpo.dataloader_num_workers=0",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        return compose(config_name="train/dtr1_grpo", overrides=overrides)


def test_default_training_perception_is_the_foundation_twin_and_resolves_without_overrides(tmp_path):
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        default = compose(config_name="train/dtr1_grpo")
        named = compose(config_name="train/dtr1_grpo", overrides=["perception=foundation"])
    for cfg in (default, named):  # ${run.root} resolved: no InterpolationKeyError
        node = OmegaConf.to_container(cfg.perception, resolve=True)
        assert node["_target_"] == "rvt_bench.adapters.twin.foundation.FoundationPerception"
        assert node["cache"]["root"] == "runs/.cache/perception"  # the cache evaluation's default run.root reads
        assert node["sam2"]["model_id"] == "facebook/sam2.1-hiera-tiny"


def test_reasonseg_training_builds_the_foundation_twin_once_and_the_second_epoch_reads_the_cache(tmp_path, tiny_r1):
    # conf/perception/tiny.yaml: the foundation code path (conf/perception/foundation.yaml's) with
    # tiny random-weight models, so no download.
    _reasonseg(tmp_path / "reasonseg")
    cache = tmp_path / "cache"
    trainer = build_trainer(_cfg(tmp_path, tiny_r1[0], "perception=tiny", f"perception.cache.root={cache}"),
                            policy=TwoBranchPolicy())
    rollout = trainer.rollout_func
    stats, episodes = [], []
    inner = type(rollout).__call__

    def counted(prompts, tr):
        out = inner(rollout, prompts, tr)
        s = rollout.perception.cache.stats
        stats.append((s.hits, s.misses))
        episodes.append(out["episode"])
        return out

    trainer.rollout_func = counted
    trainer.train()
    assert len(stats) == 2  # one image x 4 rollouts = one step per epoch, two epochs
    (hits1, misses1), (hits2, misses2) = stats
    assert misses1 >= 1 and any(p.suffix == ".npz" for p in cache.rglob("*"))  # epoch 1 ran SAM2 and stored it
    assert misses2 == misses1 and hits2 > hits1  # epoch 2: every model call read from disk
    for ep in episodes[0] + episodes[1]:
        assert ep.error is None and ep.twin is not None and ep.twin.instances  # no twin failed, none masked out
        assert ep.twin.artifacts["cache"]  # the foundation builder's record of its model calls
    calls = {k for ep in episodes[0] + episodes[1] for k in ep.twin.artifacts["cache"]}
    assert misses1 == len(calls)  # one image, one plan: its model calls computed once, by the group's first rollout
    assert {v for ep in episodes[1] for v in ep.twin.artifacts["cache"].values()} == {"hit"}


def test_oracle_perception_on_a_dataset_without_instance_annotations_stops_at_start_in_one_line(tmp_path):
    _reasonseg(tmp_path / "reasonseg", n=2)
    cfg = _cfg(tmp_path, tmp_path / "no-model-here", "perception=oracle")
    with pytest.raises(AdapterError) as err:
        build_trainer(cfg, policy=TwoBranchPolicy())  # before any model loads: base_model names nothing
    line = str(err.value)
    assert "\n" not in line and line.startswith("perception=oracle needs instance annotations, and 2 of 2 training samples")
    assert "perception=foundation" in line


def test_a_text_sample_without_a_judge_stops_training_at_start_in_one_line(tmp_path):
    # The demo holds vqa and summarization samples; reward.judge is null by default.
    cfg = _cfg(tmp_path, tmp_path / "no-model-here", "perception=oracle", "data.use=[demo]")
    with pytest.raises(AdapterError) as err:
        build_trainer(cfg, policy=TwoBranchPolicy())
    line = str(err.value)
    assert "\n" not in line and "summarization/vqa" in line and "set reward.judge" in line


def test_training_prompts_show_the_twin_style_evaluation_uses(tmp_path, tiny_r1):
    from rvt_bench.adapters.dtr1 import prompt as prompts
    from rvt_bench.adapters.twin.registry import describe_tools

    _reasonseg(tmp_path / "reasonseg")
    policy = TwoBranchPolicy()
    trainer = build_trainer(_cfg(tmp_path, tiny_r1[0], "perception=tiny", f"perception.cache.root={tmp_path / 'c'}",
                                 "rollout.twin_style=compact", "grpo.max_steps=1"), policy=policy)
    trainer.train()
    compact = prompts.system_prompt(describe_tools(), trainer.rollout_func.limits.max_rounds, "compact")
    full = prompts.system_prompt(describe_tools(), trainer.rollout_func.limits.max_rounds, "full")
    assert compact != full
    assert all(compact in p and full not in p for p in policy.prompts)


def test_an_unknown_twin_style_stops_training_at_start(tmp_path):
    _reasonseg(tmp_path / "reasonseg")
    cfg = _cfg(tmp_path, tmp_path / "no-model-here", "perception=tiny", "rollout.twin_style=tiny")
    with pytest.raises(AdapterError, match=r"^rollout\.twin_style='tiny': expected one of"):
        build_trainer(cfg, policy=TwoBranchPolicy())


def test_training_prompts_name_metric_depth_as_evaluation_does(tmp_path, tiny_r1):
    """perception/depth=tiny_metric: the training prompt is the one evaluation shows (metres named)."""
    from rvt_bench.adapters.dtr1 import prompt as prompts
    from rvt_bench.adapters.twin.registry import describe_tools

    _reasonseg(tmp_path / "reasonseg")
    policy = TwoBranchPolicy()
    trainer = build_trainer(_cfg(tmp_path, tiny_r1[0], "perception=tiny", "perception/depth=tiny_metric",
                                 f"perception.cache.root={tmp_path / 'c'}", "grpo.max_steps=1"), policy=policy)
    trainer.train()
    metric = prompts.system_prompt(describe_tools(), trainer.rollout_func.limits.max_rounds, "full",
                                   ("m", "larger = farther"))
    assert "depth mean/std (metres, larger = farther)" in metric
    assert policy.prompts and all(metric in p for p in policy.prompts)
