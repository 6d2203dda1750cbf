"""MoE balancing: the auxiliary loss's gradient against a finite difference, and the bias."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.moe_balance import aux_loss_gradient, balance_steps, bias_update, route_with_bias
from infralens.moe_systems import forwarding_budget


def _softmax(z: list[float]) -> list[float]:
    top = max(z)
    e = [math.exp(x - top) for x in z]
    return [x / sum(e) for x in e]


def _loss(logits: list[list[float]], f: list[float], alpha: float) -> float:
    n, t = len(f), len(logits)
    mean_p = [sum(_softmax(z)[i] for z in logits) / t for i in range(n)]
    return alpha * n * sum(fi * pi for fi, pi in zip(f, mean_p, strict=True))


@given(
    st.lists(st.lists(st.floats(-3, 3), min_size=4, max_size=4), min_size=1, max_size=3),
    st.lists(st.integers(0, 5), min_size=4, max_size=4).filter(lambda x: sum(x) > 0),
)
def test_the_gradient_matches_a_finite_difference(
    logits: list[list[float]], load: list[int]
) -> None:
    f = [x / sum(load) for x in load]
    probs = [[Fraction(p) for p in _softmax(z)] for z in logits]
    probs = [[p / sum(row) for p in row] for row in probs]  # exact sums of 1
    grad = aux_loss_gradient(probs, load, alpha=Fraction(1, 10))
    eps = 1e-6
    for t in range(len(logits)):
        for j in range(4):
            up = [row[:] for row in logits]
            down = [row[:] for row in logits]
            up[t][j] += eps
            down[t][j] -= eps
            numeric = (_loss(up, f, 0.1) - _loss(down, f, 0.1)) / (2 * eps)
            assert float(grad[t][j]) == pytest.approx(numeric, abs=1e-6)


def test_each_token_gradient_sums_to_zero_and_balance_has_none() -> None:
    q = [Fraction(1, 8), Fraction(3, 8), Fraction(1, 2)]
    assert sum(aux_loss_gradient([q], [5, 2, 1], alpha=1)[0]) == 0
    assert aux_loss_gradient([q], [1, 1, 1], alpha=1) == [[0, 0, 0]]


def test_the_bias_only_moves_selection_and_balances() -> None:
    scores = [
        [Fraction((t * 5 + i * 3) % 8, 4) + (Fraction(3, 2) if i == 0 else 0) for i in range(8)]
        for t in range(64)
    ]
    peaks = balance_steps(scores, top_k=2, gamma=Fraction(1, 10), steps=12)
    assert peaks[0] == 64 and peaks[-1] == 64 * 2 // 8
    assert route_with_bias([[Fraction(1), Fraction(0)]], [Fraction(0), Fraction(2)], top_k=1) == [
        (1,)
    ]
    assert bias_update((Fraction(0), Fraction(0)), [4, 0], gamma=Fraction(1)) == (-1, 1)


def test_forwarding_budget_and_errors() -> None:
    assert forwarding_budget(node_limit=1, nvlink_bytes_per_s=3, network_bytes_per_s=1) == (3, 3)
    with pytest.raises(ValueError, match="each row of probs must sum to 1"):
        aux_loss_gradient([[Fraction(1, 2)]], [1], alpha=1)
    with pytest.raises(ValueError, match="scores\\[0\\] must have 2 entries"):
        route_with_bias([[Fraction(1)]], [Fraction(0), Fraction(0)], top_k=1)
    with pytest.raises(ValueError, match="gamma must be"):
        bias_update((Fraction(0),), [1], gamma=Fraction(-1))
