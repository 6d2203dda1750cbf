"""Recomputation only ever frees memory: full <= selective <= none, for every recipe.

The three modes are counted on one activation stack, so a plan never needs more
memory with full recomputation than with selective, or with selective than none.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infralens.fit import gpu_memory
from infralens.model import PRESETS
from infralens.plan import ParallelPlan
from infralens.precision import RECIPES


def _totals(model: str, plan: ParallelPlan, recipe: str, **job: object) -> list[int]:
    return [
        gpu_memory(model, plan, recipe, recompute=mode, **job).total  # type: ignore[arg-type]
        for mode in ("full", "selective", "none")
    ]


def test_full_recomputation_needs_no_more_than_selective_for_fsdp2_with_tp() -> None:
    # Llama 3 8B, tp 2, pp 32: one layer per stage in flight, FSDP2's PyTorch stack
    plan = ParallelPlan(tp=2, pp=32, dp=4)
    full, selective, none = _totals("llama3-8b", plan, "fsdp2", seq_len=8192,
                                    micro_batch_size=1, sequence_parallel=True,
                                    microbatches=8)  # fmt: skip
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
    try:
        full, selective, none = _totals(
            model, plan, recipe, seq_len=seq, micro_batch_size=micro,
            sequence_parallel=sp and tp > 1, microbatches=microbatches, chunks=chunks,
        )  # fmt: skip
    except ValueError:  # degrees that do not divide the model
        return
    assert full <= selective <= none
