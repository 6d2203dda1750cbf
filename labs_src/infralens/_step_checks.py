"""What :func:`infralens.step.estimate` checks: a plan before it is priced, a step after.

Before pricing, the plan must fill the cluster, give every pipeline stage chunk whole
layers (the same number unless stages are uneven) and every TP rank whole heads, and
its busiest GPU must fit its HBM. After pricing, the step must mean what its numbers
say: every term finite and non-negative, 0 < MFU <= HFU <= 1 against the dense peak.
A priced step that breaks that is a bug, reported as ``RuntimeError`` so no caller
mistakes it for bad input.
"""

from __future__ import annotations

import math
from dataclasses import replace

from infralens._validate import describe, divisible, nonnegative_number, positive_int
from infralens.fit import gpu_memory, shortfall
from infralens.hardware import GPU
from infralens.model import TransformerConfig
from infralens.plan import ParallelPlan
from infralens.topology import Cluster

RECIPE = {0: "megatron-bf16", 1: "megatron-bf16-distopt", 2: "megatron-bf16-distopt", 3: "fsdp2"}
"""The precision recipe whose memory each ZeRO stage of the step model keeps."""


def busiest_stage(
    m: TransformerConfig, plan: object, cluster: object, *, chunks: int, uneven: bool
) -> TransformerConfig:
    """The model as its busiest pipeline stage holds it: ceil(L / (p·v)) layers per chunk.

    Raises ``TypeError`` for a plan or cluster of the wrong type and ``ValueError`` if the
    plan does not fill the cluster, ``ep`` is not 1, fewer layers than stages, layers that
    do not divide among ``pp * chunks`` chunks (unless *uneven*) or heads among ``tp``.
    """
    if not isinstance(plan, ParallelPlan):
        raise TypeError(f"plan must be a ParallelPlan, got {type(plan).__name__}")
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    plan.check_world_size(cluster.world_size)
    if plan.ep != 1:
        raise ValueError(f"ep must be 1: the step model is for dense models, got {plan.ep}")
    stage_chunks = plan.pp * chunks
    if m.layers < plan.pp:
        raise ValueError(f"layers must be >= pp: {m.layers} < {plan.pp}")
    if not uneven:
        divisible("layers", m.layers, "pp * chunks", stage_chunks)
    divisible("heads", m.heads, "tp", plan.tp)
    return replace(m, layers=-(-m.layers // stage_chunks) * stage_chunks)


def stack_options(zero_stage: object, *, elementwise: str, overlap_grad_reduce: bool) -> int:
    """*zero_stage* if it is 0-3 (an int: 3.0 is not a stage) and the stack runs the options.

    Eager element-wise kernels are counted for torchtitan's block (``zero_stage=3``), and
    FSDP2 always overlaps its reduce-scatters.
    """
    if type(zero_stage) is not int or zero_stage not in RECIPE:
        raise ValueError(f"zero_stage must be one of 0, 1, 2, 3; got {describe(zero_stage)}")
    if elementwise == "eager" and zero_stage != 3:
        raise ValueError("elementwise='eager' needs zero_stage=3: it is counted for torchtitan")
    if zero_stage == 3 and not overlap_grad_reduce:
        raise ValueError(
            "overlap_grad_reduce must be True with zero_stage=3: FSDP2 always overlaps"
        )
    return zero_stage


def schedule_runs(schedule: str, *, chunks: int, pp: int, microbatches: int) -> None:
    """Refuse a schedule Megatron-Core cannot run: chunks outside interleaved, interleaving
    one stage, or interleaved micro-batches that are not whole rounds of pp."""
    if schedule == "1f1b" and chunks != 1:
        raise ValueError(f"chunks must be 1 for the 1f1b schedule, got {chunks}")
    if schedule == "interleaved" and pp == 1:
        raise ValueError("schedule 'interleaved' needs pp > 1: one stage has nothing to interleave")
    if schedule == "interleaved" and microbatches % pp:
        raise ValueError(
            f"microbatches must be divisible by pp for 'interleaved': {microbatches} % {pp}"
        )


def fitted_memory(
    busiest: TransformerConfig,
    plan: ParallelPlan,
    gpu_key: str,
    gpu: GPU,
    *,
    zero_stage: int,
    recompute: str,
    seq_len: int,
    micro_batch_size: int,
    sequence_parallel: bool,
    check: bool,
) -> int:
    """Bytes on the busiest GPU; ``ValueError`` saying by how much if it does not fit."""
    # FSDP2 keeps what torchtitan's policy saves; that count exists for tp = 1 only.
    titan = zero_stage == 3 and (recompute != "selective" or plan.tp == 1)
    mem = gpu_memory(
        busiest, plan, RECIPE[zero_stage], seq_len=seq_len, micro_batch_size=micro_batch_size,
        recompute=recompute, sequence_parallel=sequence_parallel and plan.tp > 1,
        stack="pytorch" if titan else "megatron",
    )  # fmt: skip
    over = shortfall(mem, gpu_key)
    if over > 0 and check:
        raise ValueError(
            f"model does not fit: {mem.total / 1e9:.1f} GB per GPU, "
            f"{over / 1e9:.1f} GB over the {gpu.hbm_bytes / 1e9:.0f} GB of HBM"
        )
    return mem.total


def check_terms(terms: list[tuple[str, float]]) -> None:
    """Every term of a step is a finite number of seconds >= 0."""
    for name, value in terms:
        nonnegative_number(name, value)


def check_step(
    seconds: float, mfu: float, hfu: float, rates: dict[str, float], counts: dict[str, int]
) -> None:
    """A step is finite and positive, 0 < MFU <= HFU <= 1, rates >= 0 and counts >= 1."""
    if not 0 < seconds < math.inf:
        raise ValueError(f"seconds must be finite and > 0, got {describe(seconds)}")
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {describe(mfu)}")
    if not mfu <= hfu <= 1:
        raise ValueError(f"hfu must be in [mfu, 1], got {describe(hfu)}")
    for name, rate in rates.items():
        nonnegative_number(name, rate)
    for name, count in counts.items():
        positive_int(name, count)


def invariant_broken(err: Exception) -> RuntimeError:
    """The error a priced step that breaks its meaning raises: a bug, not bad input."""
    return RuntimeError(f"estimate broke an invariant: {err}")
