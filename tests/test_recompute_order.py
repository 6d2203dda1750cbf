"""Recomputation only ever frees memory: full <= selective <= none, for every recipe.

The three modes are counted on one activation stack, so a plan never needs more
memory with full recomputation than with selective, or with selective than none.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from infralens.model import PRESETS
from infralens.plan import ParallelPlan
from infralens.planner.fit import gpu_memory
from infralens.planner.job import Job
from infralens.precision import RECIPES
from infralens.topology import Cluster


def _cluster(gpus: int) -> Cluster:
    shape = f"{gpus // 8}_nodes_x_8_gpus" if gpus >= 8 else f"1_node_x_{gpus}_gpus"
    return Cluster.from_node_shape(shape)


def _job(
    model: str,
    plan: ParallelPlan,
    recipe: str,
    *,
    seq_len: int,
    micro_batch_size: int,
    microbatches: int,
    **options: object,
) -> Job:
    """The job with *microbatches* micro-batches per replica on a cluster *plan* fills."""
    batch = microbatches * micro_batch_size * plan.dp
    return Job(model, plan, _cluster(plan.world_size), seq_len=seq_len,
               global_batch_size=batch, micro_batch_size=micro_batch_size, recipe=recipe,
               **options)  # type: ignore[arg-type]  # fmt: skip


def _totals(job: Job) -> list[int]:
    return [
        gpu_memory(replace(job, recompute=mode)).total for mode in ("full", "selective", "none")
    ]


def test_full_recomputation_needs_no_more_than_selective_for_fsdp2_with_tp() -> None:
    # Llama 3 8B, tp 2, pp 32: one layer per stage in flight, FSDP2's PyTorch stack
    plan = ParallelPlan(tp=2, pp=32, dp=4)
    job = _job(
        "llama3-8b",
        plan,
        "fsdp2",
        seq_len=8192,
        micro_batch_size=1,
        microbatches=8,
        sequence_parallel=True,
    )
    assert job.microbatches == 8
    full, selective, none = _totals(job)
    assert full <= selective <= none


@settings(max_examples=150, deadline=None)
@given(
    model=st.sampled_from(sorted(PRESETS)),
    recipe=st.sampled_from(sorted(RECIPES)),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8, 16, 32]),
    cp=st.sampled_from([1, 2, 4]),
    seq=st.sampled_from([2048, 4096, 8192, 32768]),
    micro=st.integers(1, 4),
    microbatches=st.one_of(st.none(), st.integers(1, 8), st.integers(9, 64)),
    sp=st.booleans(),
    chunks=st.sampled_from([1, 2]),
)
def test_full_selective_none_never_reverse(
    model: str, recipe: str, tp: int, pp: int, cp: int, seq: int, micro: int,
    microbatches: int | None, sp: bool, chunks: int,
) -> None:  # fmt: skip
    plan = ParallelPlan(tp=tp, pp=pp, cp=cp)
    # no cap on the micro-batches: more than any schedule keeps in flight
    n = 8 * pp * chunks if microbatches is None else microbatches
    try:
        job = _job(
            model,
            plan,
            recipe,
            seq_len=seq,
            micro_batch_size=micro,
            microbatches=n,
            sequence_parallel=sp and tp > 1,
            chunks=chunks,
        )
        full, selective, none = _totals(job)
    except ValueError:  # degrees that do not divide the model
        return
    assert full <= selective <= none
