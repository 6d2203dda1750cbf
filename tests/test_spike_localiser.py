"""The NaN/spike localiser: first step, origin layer in execution order, ranks that show it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.spike_localiser import Fault, first_fault, verdict

NAN = math.nan


def calm(ranks: int, layers: int, steps: int, seed: int = 0) -> list[list[list[float]]]:
    rng = random.Random(seed)
    return [
        [[1.0 + 0.1 * rng.random() for _ in range(layers)] for _ in range(ranks)]
        for _ in range(steps)
    ]


@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 20), st.data())
def test_a_planted_nan_is_found_where_backward_meets_it_first(
    ranks: int, layers: int, at: int, data: st.DataObject
) -> None:
    stats = calm(ranks, layers, at + 3)
    origin = data.draw(st.integers(0, layers - 1))
    bad_rank = data.draw(st.integers(0, ranks - 1))
    # backward runs from the last layer down: the NaN reaches every layer below origin
    for layer in range(origin + 1):
        stats[at][bad_rank][layer] = NAN
    for later in stats[at + 1 :]:  # after the all-reduce every rank is NaN
        for row in later:
            row[:] = [NAN] * layers
    fault = first_fault(stats)
    assert fault == Fault(at, "nonfinite", origin, (bad_rank,), "nan")
    # read in forward order the same step points at layer 0 instead
    forward = first_fault(stats, order="forward")
    assert forward is not None and forward.layer == 0 and forward.step == at


def test_spike_needs_a_history_and_a_factor() -> None:
    stats = calm(4, 3, 12)
    stats[10][2][1] = 30.0
    assert first_fault(stats) == Fault(10, "spike", 1, (2,), "30.0")
    assert first_fault(stats, factor=40.0) is None
    assert first_fault(stats, window=11) is None  # too few steps before it


def test_the_earlier_of_a_spike_and_a_nan_wins() -> None:
    stats = calm(2, 2, 12)
    stats[9][0][0] = 50.0
    stats[11][1][1] = math.inf
    fault = first_fault(stats)
    assert fault is not None and (fault.step, fault.kind) == (9, "spike")


def test_verdicts() -> None:
    assert verdict(Fault(1, "nonfinite", 0, (0, 1), "nan"), world_size=2).startswith("every")
    assert verdict(Fault(1, "nonfinite", 0, (3,), "nan"), world_size=8).startswith("one")
    assert verdict(Fault(1, "nonfinite", 0, (0,), "nan"), world_size=1).startswith("every")


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        first_fault([])
    with pytest.raises(ValueError, match="order must be one of"):
        first_fault([[[1.0]]], order="sideways")
    with pytest.raises(ValueError, match="factor must be > 1"):
        first_fault([[[1.0]]], factor=1.0)
    with pytest.raises(TypeError, match=r"stats\[0\]\[0\] must hold numbers"):
        first_fault([[["1.0"]]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="window must be >= 1"):
        first_fault([[[1.0]]], window=0)


def test_within_a_step_execution_order_decides() -> None:
    """Backward runs layer 2 before layer 1: a spike in 2 precedes a NaN in 1."""
    stats = calm(2, 3, 10)
    stats[9][0][2] = 100.0
    stats[9][0][1] = NAN
    fault = first_fault(stats)
    assert fault is not None and (fault.kind, fault.layer) == ("spike", 2)
    # read forward, layer 1 runs before layer 2, and the NaN comes first
    fault = first_fault(stats, order="forward")
    assert fault is not None and (fault.kind, fault.layer) == ("nonfinite", 1)
