"""infralens.zero against the ZeRO paper and its own invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import zero


def test_reproduces_the_papers_figure_1_example() -> None:
    # Rajbhandari et al. 2020, Figure 1: Ψ = 7.5B, K = 12, N_d = 64, GB = 1e9 bytes.
    psi = 7_500_000_000
    exact = [zero.model_state_bytes(psi, dp_size=64, stage=s) / 10**9 for s in zero.STAGES]
    assert exact == [120, 31.40625, 16.640625, 1.875]
    assert [round(gb, 1) for gb in exact] == [120.0, 31.4, 16.6, 1.9]  # as printed


def test_memory_formulas_match_the_paper_for_divisible_shards() -> None:
    psi, nd, k = 6400, 64, 12
    expected = [(4 + k) * psi, 4 * psi + k * psi // nd, 2 * psi + (2 + k) * psi // nd]
    expected.append((4 + k) * psi // nd)
    assert [zero.model_state_bytes(psi, dp_size=nd, stage=s) for s in zero.STAGES] == expected


@given(st.integers(0, 10**7), st.integers(1, 1024), st.integers(1, 20))
def test_each_stage_stores_no_more_than_the_last(psi: int, nd: int, k: int) -> None:
    sizes = [
        zero.model_state_bytes(psi, dp_size=nd, stage=s, optimizer_multiplier=k)
        for s in zero.STAGES
    ]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] == (4 + k) * psi


def test_communication_volume_per_stage() -> None:
    assert [zero.communication_elements(10, stage=s) for s in zero.STAGES] == [20, 20, 20, 30]
    # A ring sends (N_d - 1)/N_d of the paper's volume from each rank.
    assert zero.communication_bytes_per_rank(10**6, dp_size=4, stage=3) == 3 * 10**6 * 2 * 3 / 4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: zero.model_state_bytes(10, dp_size=8, stage=4), "stage must be one of 0, 1, 2, 3"),
        (lambda: zero.model_state_bytes(10, dp_size=8, stage=True), "stage must be one of"),
        (lambda: zero.model_state_bytes(10, dp_size=0, stage=1), "dp_size must be >= 1, got 0"),
        (lambda: zero.model_state_bytes(-1, dp_size=8, stage=1), "num_params must be >= 0"),
        (
            lambda: zero.model_state_bytes(1, dp_size=8, stage=1, optimizer_multiplier=0),
            "optimizer_multiplier must be >= 1",
        ),
        (lambda: zero.communication_elements(-5, stage=1), "num_params must be >= 0"),
        (lambda: zero.step_collectives(-1), "stage must be one of"),
        (
            lambda: zero.communication_bytes_per_rank(1, dp_size=2, stage=1, bytes_per_element=0),
            "bytes_per_element must be >= 1",
        ),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_accumulation_multiplies_stage_two_and_three_traffic() -> None:
    from infralens.zero import accumulation_bytes_per_rank, communication_bytes_per_rank

    for m in (1, 4, 32):
        base = communication_bytes_per_rank(10**6, dp_size=4, stage=1)
        assert accumulation_bytes_per_rank(10**6, dp_size=4, stage=1, microbatches=m) == base
        stage3 = communication_bytes_per_rank(10**6, dp_size=4, stage=3)
        assert accumulation_bytes_per_rank(10**6, dp_size=4, stage=3, microbatches=m) == m * stage3
    # one micro-batch: stage 2 costs what stage 1 does
    assert accumulation_bytes_per_rank(10**6, dp_size=4, stage=2, microbatches=1) == (
        communication_bytes_per_rank(10**6, dp_size=4, stage=2)
    )
