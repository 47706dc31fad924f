#!/usr/bin/env python
"""Train DT-R1 with GRPO (TRL GRPOTrainer + LoRA): rollouts run the inference rollout loop
(adapters/dtr1/training.py), rewards are adapters/dtr1/rewards.py. Config: conf/train/dtr1_grpo.yaml.

One GPU node (8 GPUs, DeepSpeed ZeRO-2; ZeRO-3: conf/accelerate/zero3.yaml):
    accelerate launch --config_file conf/accelerate/zero2.yaml train_dtr1.py \\
        data.sources.reasonseg.dataset.root=/data/ReasonSeg data.sources.revos.dataset.root=/data/ReVOS
One GPU: python train_dtr1.py grpo.per_device_train_batch_size=4 grpo.gradient_accumulation_steps=8 ...
Multi-node (N nodes x 8 GPUs; run on every node, NODE_RANK = 0..N-1, MASTER = node 0's address):
    accelerate launch --config_file conf/accelerate/zero3.yaml --num_machines N --num_processes $((8*N)) \\
        --machine_rank $NODE_RANK --main_process_ip $MASTER --main_process_port 29500 train_dtr1.py \\
        grpo.per_device_train_batch_size=$((32 / (8*N))) grpo.gradient_accumulation_steps=1 ...
  (per_device_train_batch_size x 8N processes x gradient_accumulation_steps = 32 completions per
  step, the paper's batch, for N = 1, 2 or 4; with N > 4 set per_device_train_batch_size=1 and the
  batch is 8N.)
  (under Slurm: `srun --nodes N --ntasks-per-node 1` with NODE_RANK=$SLURM_NODEID and MASTER the
  first host of `scontrol show hostnames $SLURM_JOB_NODELIST`.)
Rollouts through vLLM (TRL syncs the LoRA-merged weights into it before every rollout call; the
rollout function returns vLLM's sampled-token logprobs for TRL's importance-sampling correction):
  colocate (each training process holds an engine):
    accelerate launch --config_file conf/accelerate/zero2.yaml train_dtr1.py grpo.use_vllm=true \\
        grpo.vllm_mode=colocate +grpo.vllm_gpu_memory_utilization=0.3 ...
  server (8-GPU node: vLLM on GPU 7, training on GPUs 0-3, 4 x 8 = 32 completions per step):
    CUDA_VISIBLE_DEVICES=7 VLLM_SERVER_DEV_MODE=1 vllm serve deepseek-ai/DeepSeek-R1-Distill-Qwen-7B --port 8000 \\
        --weight-transfer-config '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1 &
    CUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch --config_file conf/accelerate/zero2.yaml --num_processes 4 \\
        train_dtr1.py grpo.use_vllm=true grpo.vllm_mode=server grpo.per_device_train_batch_size=8 ...
  (what the deprecated `trl vllm-serve --model MODEL` runs; a server on another host:
  +grpo.vllm_server_base_url=http://HOST:8000)
Reward ablations (the paper's table; each point logs rewards/success/mean, its training success rate,
per step): python train_dtr1.py -m sweep=reward_ablation
Evaluate the result: python run_bench.py +model=dtr1 policy=hf policy.model=BASE policy.adapter=<output_dir>/final
"""
from __future__ import annotations

import logging
import random
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

import rvt_bench.harness.config  # noqa: F401  registers the config schemas (conf/train/dtr1_grpo.yaml uses one)
from rvt_bench.adapters.dtr1.config import limits_from
from rvt_bench.core import secrets
from rvt_bench.harness.cli import exit_on_known_errors
from rvt_bench.harness.config import check_ranges
from rvt_bench.harness.logs import quiet_log_files
from rvt_bench.harness.secrets import hide_secret_overrides
from rvt_bench.core.types import AdapterError, DatasetFormatError, Sample, first_line


REPO_ROOT = Path(__file__).resolve().parent

log = logging.getLogger("train_dtr1")


def mix_samples(sources: dict[str, tuple[float, list[Sample]]], seed: int) -> list[Sample]:
    """Mix datasets: each source's samples drawn round(weight * N) times (whole repeats, then a
    seeded random subset for the fraction), then all shuffled with `seed`.
    Raises DatasetFormatError for a negative weight or an empty result."""
    rng = random.Random(seed)
    mixed: list[Sample] = []
    for name, (weight, samples) in sources.items():
        if weight < 0:
            raise DatasetFormatError(f"training source {name!r}: weight must be >= 0, got {weight}")
        count = round(weight * len(samples))
        whole, rest = divmod(count, len(samples)) if samples else (0, 0)
        mixed += samples * whole + rng.sample(samples, rest)
    if not mixed:
        raise DatasetFormatError(f"training data is empty (sources {list(sources)})")
    rng.shuffle(mixed)
    return mixed


def load_samples(cfg: DictConfig) -> list[Sample]:
    """The mixed training samples of cfg.data (sources named in data.use)."""
    sources: dict[str, tuple[float, list[Sample]]] = {}
    for name in cfg.data.use:
        if name not in cfg.data.sources:
            raise DatasetFormatError(f"data.use names {name!r}; configured sources: {list(cfg.data.sources)}")
        src = cfg.data.sources[name]
        if OmegaConf.is_missing(src.dataset, "root"):
            raise DatasetFormatError(f"data.sources.{name}.dataset.root is required: the directory of the {name} "
                                     f"download (or train on the bundled demo: data.use=[demo])")
        dataset = instantiate(OmegaConf.to_container(src.dataset, resolve=True), _convert_="all")
        sources[name] = (float(src.weight), list(dataset))
    samples = mix_samples(sources, int(cfg.data.seed))
    return samples if cfg.data.limit is None else samples[: int(cfg.data.limit)]


def check_vllm_settings(grpo: dict) -> None:
    """Refuse vLLM settings the multi-turn rollout cannot honour (AdapterError, naming the fix).

    The rollout calls the engine once per stage with each process's own unfinished rollouts, so
    ranks do not stay in step: colocate tensor parallelism (a collective over the TP group per
    generate call) would deadlock, and sleep mode would need TRL's wake/sleep around every call."""
    if not grpo.get("use_vllm"):
        return
    mode = grpo.get("vllm_mode", "colocate")
    if mode not in ("colocate", "server"):
        raise AdapterError(f"grpo.vllm_mode must be colocate or server, got {mode!r}")
    if mode == "colocate" and int(grpo.get("vllm_tensor_parallel_size", 1)) > 1:
        raise AdapterError("grpo.vllm_tensor_parallel_size > 1 is not supported in colocate mode for multi-turn DT-R1 "
                           "rollouts; use grpo.vllm_mode=server with a tensor-parallel vLLM server instead")
    if grpo.get("vllm_structured_outputs_regex"):
        raise AdapterError("grpo.vllm_structured_outputs_regex is not supported: a DT-R1 turn is generated in pieces "
                           "around the harness's insertions, which no single regex describes")
    if grpo.get("vllm_enable_sleep_mode"):
        raise AdapterError("grpo.vllm_enable_sleep_mode=true is not supported by the DT-R1 rollout function "
                           "(it calls the engine outside TRL's wake/sleep); lower grpo.vllm_gpu_memory_utilization instead")
    import importlib.util

    if importlib.util.find_spec("vllm") is None:  # say so before loading data and a 7B model
        raise AdapterError("grpo.use_vllm=true needs vLLM in this environment (pip install vllm, on the GPU machine); "
                           "or set grpo.use_vllm=false to roll out with the trained model itself")


def build_trainer(cfg: DictConfig, policy: Any = None):
    """The GRPOTrainer of `cfg` (conf/train/dtr1_grpo.yaml). `policy`: None = roll out with the
    model being trained; else a Policy to roll out with (tests use a scripted one)."""
    check_ranges(cfg)  # rollout.sandbox.timeout_s=inf, 1e308, a pool of 100000: one line, before anything loads
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rvt_bench.adapters.dtr1 import tags as T
    from rvt_bench.adapters.dtr1.rewards import TERMS, term_weights, trl_reward_funcs
    from rvt_bench.adapters.dtr1.training import DTR1RolloutFunc, check_training_setup, sample_key

    grpo = OmegaConf.to_container(cfg.grpo, resolve=True)
    if cfg.decoding not in ("free", "grammar") or (cfg.decoding == "grammar" and grpo.get("use_vllm")):
        raise AdapterError(f"decoding={cfg.decoding!r}: expected free, or grammar (rollouts by the trained model itself, "
                           "grpo.use_vllm=false)")
    check_vllm_settings(grpo)
    if cfg.reward.ablation not in cfg.reward.ablations:
        raise AdapterError(f"reward.ablation {cfg.reward.ablation!r} unknown; expected one of {list(cfg.reward.ablations)}")
    samples = load_samples(cfg)
    by_key = {sample_key(s): s for s in samples}
    r = cfg.rollout
    limits, perception = limits_from(r), instantiate(cfg.perception)
    # twin_style, a judge for text samples, annotations for oracle perception: one line each, before a model loads
    check_training_setup(samples, perception, limits, has_judge=cfg.reward.judge is not None)
    rollout_func = DTR1RolloutFunc(
        by_key, perception, limits,
        sandbox=OmegaConf.to_container(r.sandbox, resolve=True), policy=policy, batch_size=int(r.batch_size),
        decoding=str(cfg.decoding),
    )
    rollout_func.preflight()  # bubblewrap or stop, before a model is loaded (one line naming rollout.sandbox)

    try:
        tokenizer = AutoTokenizer.from_pretrained(cfg.base_model)
    except (OSError, ValueError) as exc:
        raise AdapterError(f"cannot load base_model={cfg.base_model!r} (a hub id needs the network once, or a local "
                           f"directory; a CPU smoke run: see README, 'Training DT-R1'): {first_line(exc)}") from exc
    if cfg.add_tag_tokens:
        tags = [t(tag) for tag in (T.THINK, T.PLAN, T.REP, T.EXECUTE, T.RESULTS, T.TASK, T.ANSWER) for t in (T.open_tag, T.close_tag)]
        tokenizer.add_tokens(tags)  # ordinary tokens: decode(skip_special_tokens=True) keeps them
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(cfg.base_model, dtype=getattr(torch, cfg.dtype))
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise AdapterError(f"tokenizer of {cfg.base_model} has {len(tokenizer)} tokens but the model {rows} embedding rows; "
                           "set add_tag_tokens=false (LoRA would not train new rows)")

    weights = term_weights(float(cfg.reward.a), float(cfg.reward.b), dict(cfg.reward.ablations[cfg.reward.ablation]))
    judge = None
    if cfg.reward.judge is not None:
        from rvt_bench.metrics.judge import make_judge

        judge = make_judge(OmegaConf.to_container(cfg.reward.judge, resolve=True))
    # the terms, then the success rate of the paper's ablation table at weight 0: logged, never summed
    args = GRPOConfig(output_dir=str(cfg.output_dir), reward_weights=[*(weights[t] for t in TERMS), 0.0], **grpo)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=trl_reward_funcs(judge),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [sample_key(s) for s in samples]}),
        processing_class=tokenizer,
        peft_config=LoraConfig(**OmegaConf.to_container(cfg.lora, resolve=True)),
        rollout_func=rollout_func,
    )
    return trainer


@hydra.main(config_path="conf", config_name="train/dtr1_grpo", version_base="1.3")
def main(cfg: DictConfig) -> None:
    secrets.remember_config(OmegaConf.to_container(cfg, resolve=False))
    quiet_log_files()  # Hydra's job log on a full disk: no logging traceback per record
    trainer = exit_on_known_errors(lambda: build_trainer(cfg))
    trainer.train()
    final = Path(cfg.output_dir) / "final"
    trainer.save_model(str(final))  # LoRA adapter + tokenizer: policy=hf policy.adapter=<final>
    log.info("saved the LoRA adapter to %s", final)
    print(f"adapter: {final}")


if __name__ == "__main__":
    # Secrets never reach Hydra's files nor any line we print (rvt_bench.harness.secrets).
    secrets.scrub_logs()
    secrets.remember_environment()
    sys.argv = [sys.argv[0], *hide_secret_overrides(sys.argv[1:])]
    main()
