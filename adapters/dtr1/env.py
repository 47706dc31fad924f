"""The real harness side of one DT-R1 rollout (RolloutEnv), shared by evaluation
(rvt_bench.adapters.dtr1.adapter) and GRPO training (rvt_bench.adapters.dtr1.training): DAG
validation, the twin builder over a perception backend, and the sample's own sandbox, which is
handed what the code may see of the twin as plain JSON (Twin.to_code_payload)."""
from __future__ import annotations

from typing import Any

from rvt_bench.adapters.dtr1.rollout import RolloutEnv
from rvt_bench.core.types import Sample


def sandbox_env(sample: Sample, perception: Any, pool: Any) -> RolloutEnv:
    """The RolloutEnv of `sample`: plans validated by rvt_bench.adapters.twin.dag, the twin built
    over `perception`, code run in a session of `pool` (rvt_bench.adapters.sandbox.pool.SandboxPool;
    its replacement interpreter starts now, while the policy generates), closed when the rollout ends."""
    from rvt_bench.adapters.twin.builder import build_twin
    from rvt_bench.adapters.twin.dag import parse_dag, validate_dag

    session = pool.session()
    shown: list[tuple[Any, dict]] = []  # (twin, its payload): built once, sent once per interpreter

    def execute(code: str, twin: Any):
        if not shown or shown[0][0] is not twin:
            shown[:] = [(twin, twin.to_code_payload())]
        return session.execute(code, shown[0][1])

    return RolloutEnv(
        plan=lambda text: validate_dag(parse_dag(text)),
        build_twin=lambda order: build_twin(sample, order, perception),
        execute=execute,
        close=session.close,
    )
