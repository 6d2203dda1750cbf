"""What :func:`infralens.planner.step.estimate` checks: a plan before it is priced, a step after.

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

from infralens._validate import (
    check_choice,
    describe,
    divisible,
    flag,
    nonnegative_number,
    positive_int,
)
from infralens.hardware import GPU, matmul_ceiling
from infralens.model import TransformerConfig
from infralens.pipeline_memory import stage_layers
from infralens.plan import ParallelPlan
from infralens.planner.fit import _gpu_memory, shortfall
from infralens.precision import DEFAULT_RECIPE, RECIPES
from infralens.recipe import Recipe
from infralens.stage_balance import even_split
from infralens.topology import Cluster

RECIPE = {
    0: "megatron-bf16",
    1: "megatron-bf16-distopt",
    2: "megatron-bf16-distopt",
    3: "fsdp2",
}
"""The recipe a bare ``zero_stage`` keyword (no *recipe*) stands for."""


def resolve_recipe(recipe: object, zero_stage: object) -> tuple[Recipe, int]:
    """The recipe and ZeRO stage a step runs: *recipe* if named (its stage, which a given
    *zero_stage* must match), else the one :data:`RECIPE` gives *zero_stage*, else the
    default recipe."""
    if zero_stage is not None and (
        type(zero_stage) is not int or zero_stage not in RECIPE
    ):
        raise ValueError(
            f"zero_stage must be one of 0, 1, 2, 3; got {describe(zero_stage)}"
        )
    if recipe is None:
        name = DEFAULT_RECIPE if zero_stage is None else RECIPE[zero_stage]
        r = RECIPES[name]
        return r, r.zero_stage if zero_stage is None else zero_stage
    if isinstance(recipe, Recipe):
        r = recipe
    elif isinstance(recipe, str):
        r = RECIPES[check_choice("recipe", recipe, tuple(RECIPES))]
    else:
        raise TypeError(
            f"recipe must be a str or Recipe, got {type(recipe).__name__}"
        )
    if zero_stage is not None and zero_stage != r.zero_stage:
        raise ValueError(
            f"recipe {r.name!r} shards like ZeRO stage {r.zero_stage}; "
            f"set zero_stage to {r.zero_stage} or leave it out"
        )
    return r, r.zero_stage


def busiest_stage(
    m: TransformerConfig,
    plan: object,
    cluster: object,
    *,
    chunks: int,
    uneven: bool,
    first: int | None = None,
    last: int | None = None,
    embedding: bool = False,
    loss: bool = False,
) -> tuple[TransformerConfig, tuple[int, ...]]:
    """The model memory is counted for, and the transformer layers on each pipeline stage.

    Even: L/p; *first*/*last* or *embedding*/*loss*: Megatron-Core's
    ``--decoder-first/last-pipeline-num-layers`` or ``--account-for-embedding/loss-in-
    pipeline-split`` (:func:`infralens.pipeline_memory.stage_layers`); *uneven* (Llama 3's
    layout without Megatron's arguments): as :func:`infralens.stage_balance.even_split`
    deals them, and memory counts a model whose every chunk holds ceil(L / (p·v)).

    Raises ``TypeError`` for a plan or cluster of the wrong type and ``ValueError`` if the
    plan does not fill the cluster, ``ep`` is not 1, fewer layers than stages, layers that
    do not divide among ``pp * chunks`` chunks (unless *uneven* or the stage arguments say
    how) or heads among ``tp``, or *uneven* is combined with the stage arguments.
    """
    if not isinstance(plan, ParallelPlan):
        raise TypeError(f"plan must be a ParallelPlan, got {type(plan).__name__}")
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    plan.check_world_size(cluster.world_size)
    if plan.ep != 1:
        raise ValueError(
            f"ep must be 1: the step model is for dense models, got {plan.ep}"
        )
    stage_chunks = plan.pp * chunks
    if m.layers < plan.pp:
        raise ValueError(f"layers must be >= pp: {m.layers} < {plan.pp}")
    divisible("heads", m.heads, "tp", plan.tp)
    e, lo = flag("account_for_embedding", embedding), flag("account_for_loss", loss)
    if first is not None or last is not None or e or lo:
        if uneven:
            raise ValueError(
                "uneven_stages excludes first/last_stage_layers and account_for_embedding/loss"
            )
        return m, stage_layers(m.layers, plan.pp, chunks=chunks, first=first, last=last,
                               embedding=e, loss=lo)  # fmt: skip
    if not uneven:
        divisible("layers", m.layers, "pp * chunks", stage_chunks)
        return m, (m.layers // plan.pp,) * plan.pp
    memory = replace(m, layers=-(-m.layers // stage_chunks) * stage_chunks)
    return memory, even_split(m.layers, stages=plan.pp)


def stack_options(
    zero_stage: int, *, elementwise: str, overlap_grad_reduce: bool
) -> int:
    """*zero_stage* if the stack runs the options.

    Eager element-wise kernels are counted for torchtitan's block (``zero_stage=3``), and
    FSDP2 always overlaps its reduce-scatters.
    """
    if elementwise == "eager" and zero_stage != 3:
        raise ValueError(
            "elementwise='eager' needs zero_stage=3: it is counted for torchtitan"
        )
    if zero_stage == 3 and not overlap_grad_reduce:
        raise ValueError(
            "overlap_grad_reduce must be True with zero_stage=3: FSDP2 always overlaps"
        )
    return zero_stage


def tp_overlap_runs(
    overlap: bool,
    *,
    tp: int,
    sequence_parallel: bool,
    zero_stage: int,
    elementwise: str,
) -> None:
    """Refuse ``tp_comm_overlap`` where Megatron-Core would: it asserts sequence
    parallelism, which it turns off at tp 1 (``megatron/training/arguments.py:1436-1442``
    at d98e8a6). Under ``zero_stage=3`` it is PyTorch's asynchronous TP, a
    ``torch.compile`` pass torchtitan refuses to run without compiling
    (``parallelize_llama.py:54-58`` at 9dec370), so eager element-wise kernels
    rule it out."""
    if not overlap:
        return
    if tp == 1 or not sequence_parallel:
        raise ValueError(
            "tp_comm_overlap needs tp > 1 and sequence_parallel, as Megatron-Core asserts"
        )
    if zero_stage == 3 and elementwise == "eager":
        raise ValueError(
            "tp_comm_overlap under zero_stage=3 is PyTorch's asynchronous TP, "
            "which needs torch.compile: not with elementwise='eager'"
        )


def schedule_runs(
    schedule: str, *, chunks: int, pp: int, microbatches: int
) -> None:
    """Refuse a schedule Megatron-Core cannot run: chunks outside interleaved, interleaving
    one stage, or interleaved micro-batches that are not whole rounds of pp (at its
    default ``microbatch_group_size_per_vp_stage`` of pp, which the step model prices)."""
    if schedule == "1f1b" and chunks != 1:
        raise ValueError(f"chunks must be 1 for the 1f1b schedule, got {chunks}")
    if schedule == "interleaved" and pp == 1:
        raise ValueError(
            "schedule 'interleaved' needs pp > 1: one stage has nothing to interleave"
        )
    if schedule == "interleaved" and microbatches % pp:
        raise ValueError(
            f"microbatches must be divisible by pp for 'interleaved': {microbatches} % {pp}"
        )


def fitted_memory(
    model: TransformerConfig,
    plan: ParallelPlan,
    gpu_key: str,
    gpu: GPU,
    *,
    recipe: Recipe,
    recompute: str,
    seq_len: int,
    micro_batch_size: int,
    sequence_parallel: bool,
    check: bool,
    microbatches: int,
    chunks: int,
    first: int | None,
    last: int | None,
    embedding: bool = False,
    loss: bool = False,
) -> int:
    """Bytes on the busiest GPU (:func:`infralens.planner.fit.gpu_memory`, the planner's one count);
    ``ValueError`` saying by how much if it does not fit."""
    mem = _gpu_memory(
        model, plan, recipe, seq_len=seq_len, micro_batch_size=micro_batch_size,
        recompute=recompute, sequence_parallel=sequence_parallel and plan.tp > 1,
        microbatches=microbatches, chunks=chunks, first_stage_layers=first,
        last_stage_layers=last, account_for_embedding=embedding, account_for_loss=loss,
    )  # fmt: skip
    over = shortfall(mem, gpu_key)
    if over > 0 and check:
        raise ValueError(
            f"model does not fit: {mem.total / 1e9:.1f} GB per GPU ({recipe.name} recipe), "
            f"{over / 1e9:.1f} GB over the {gpu.hbm_bytes / 1e9:.0f} GB of HBM"
        )
    return mem.total


def check_terms(terms: list[tuple[str, float]]) -> None:
    """Every term of a step is a finite number of seconds >= 0."""
    for name, value in terms:
        nonnegative_number(name, value)


def check_step(
    seconds: float,
    mfu: float,
    hfu: float,
    rates: dict[str, float],
    counts: dict[str, int],
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


def precision_runs(recipe: Recipe, gpu: GPU, gpu_key: str) -> None:
    """Refuse an FP8 recipe on a GPU that cannot run it: no measured FP8 ceiling, or
    MXFP8 (Blackwell's block scaling) on an earlier part."""
    if recipe.scaling == "mxfp8" and gpu.arch != "blackwell":
        raise ValueError(
            f"recipe {recipe.name!r} needs a Blackwell GPU, got {gpu.name}"
        )
    if recipe.precision == "fp8":
        matmul_ceiling(gpu_key, "fp8")


def rates_fit(rates_gpu: str | None, gpu_key: str) -> None:
    """Rates measured on one GPU price only that GPU; ``ValueError`` for another."""
    if rates_gpu is not None and rates_gpu != gpu_key:
        raise ValueError(
            f"sustained rates were measured on {rates_gpu}; the cluster's GPU is {gpu_key}"
        )
