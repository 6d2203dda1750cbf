"""Stage balance: Megatron-Core's split arguments, per-stage costs and the uneven 1F1B step."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.model import PRESETS
from infralens.pipeline_schedules import simulate
from infralens.stage_balance import (
    busiest_stage,
    even_split,
    head_cost,
    imbalance_cost,
    layer_flops_per_token,
    megatron_split,
    stage_costs,
    step_time,
)

LLAMA = PRESETS["llama3.1-405b"]


def test_head_cost_is_the_output_projection_and_final_norm() -> None:
    """6·(V·h + h) over one layer's 6·P + 12·h·s, for an RMSNorm model."""
    layer = 6 * LLAMA.layer_params() + 12 * LLAMA.hidden * 8192
    head = 6 * (LLAMA.vocab_size * LLAMA.hidden + LLAMA.hidden)
    assert layer_flops_per_token(LLAMA, seq_len=8192) == layer
    assert head_cost(LLAMA, seq_len=8192) == Fraction(head, layer)
    # a longer sequence makes each layer dearer and the head relatively cheaper
    assert head_cost(LLAMA, seq_len=131072) < head_cost(LLAMA, seq_len=8192)


def test_llama3_405b_split_is_megatrons_accounted_split() -> None:
    """126 layers on 16 stages: 7 on the first and last, 8 in between (Llama 3, §3.3.2)."""
    split = megatron_split(126, stages=16, embedding=True, loss=True)
    assert split == (7,) + (8,) * 14 + (7,)
    assert split == megatron_split(126, stages=16, first=7, last=7)
    # counting the embedding and the loss as one layer each balances every stage
    costs = stage_costs(split, embedding=1, head=1)
    assert busiest_stage(costs)[1] == 1
    assert imbalance_cost(costs, microbatches=32) == 0
    default = stage_costs(even_split(126, stages=16), embedding=1, head=1)
    assert busiest_stage(default) == (0, Fraction(9 * 16, 128))
    assert imbalance_cost(default, microbatches=32) > 0


def test_flop_view_moves_the_busiest_stage_to_the_last_one() -> None:
    """Equal counts of 8 with the output layer priced by FLOPs: the last stage is busiest."""
    head = head_cost(LLAMA, seq_len=8192)
    costs = stage_costs((8,) * 16, embedding=0, head=head)
    assert busiest_stage(costs)[0] == 15
    trimmed = stage_costs(megatron_split(126, stages=16, first=7, last=7), embedding=0, head=head)
    assert max(trimmed) == 8 < max(costs)


@given(st.integers(1, 6), st.integers(1, 12), st.integers(1, 4))
def test_equal_costs_match_the_simulator(p: int, m: int, c: int) -> None:
    got = step_time((Fraction(c),) * p, microbatches=m)
    assert got == simulate("1f1b", stages=p, microbatches=m, forward=c, backward=2 * c).makespan


@given(st.lists(st.integers(1, 9), min_size=1, max_size=6), st.integers(1, 10))
def test_step_is_bounded_by_the_busiest_stage_and_one_microbatch_path(
    layers: list[int], m: int
) -> None:
    costs = tuple(Fraction(n) for n in layers)
    t = step_time(costs, microbatches=m)
    assert t >= 3 * m * max(costs)  # the busiest stage does all of its work
    assert t >= 3 * sum(costs)  # one microbatch's forward and backward cross every stage
    if m >= 3 * len(costs):  # with enough microbatches the busiest stage dominates
        assert imbalance_cost(costs, microbatches=m) >= 0


@given(st.integers(1, 200), st.integers(1, 16), st.booleans(), st.booleans())
def test_megatron_split_covers_every_layer(n: int, p: int, e: bool, loss: bool) -> None:
    if (n + e + loss) % p or (n + e + loss) // p < 1 + (p == 1) * (e + loss):
        with pytest.raises(ValueError):
            split = megatron_split(n, stages=p, embedding=e, loss=loss)
            assert min(split) >= 0
        return
    split = megatron_split(n, stages=p, embedding=e, loss=loss)
    assert sum(split) == n and len(split) == p


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="divisible by stages: 126 % 16 = 14"):
        megatron_split(126, stages=16)
    with pytest.raises(ValueError, match="cannot be combined"):
        megatron_split(126, stages=16, embedding=True, first=7)
    with pytest.raises(ValueError, match="remaining layers must be divisible"):
        megatron_split(126, stages=16, first=6, last=7)
    with pytest.raises(ValueError, match="stages must be > 2"):
        megatron_split(10, stages=2, first=5, last=5)
    with pytest.raises(ValueError, match="split\\[0\\] must be >= 0"):
        stage_costs((-1, 2), embedding=0, head=0)
    with pytest.raises(TypeError, match="split must be int values"):
        stage_costs((1, 2.0), embedding=0, head=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="head must be >= 0"):
        stage_costs((1, 2), embedding=0, head=-1)
    with pytest.raises(ValueError, match="costs must all be > 0"):
        step_time((Fraction(1), Fraction(0)), microbatches=2)
    with pytest.raises(ValueError, match="microbatches must be >= 1"):
        step_time((Fraction(1),), microbatches=0)
