"""Layer assignment, bubble formulas and their error paths in infralens.pipeline."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.pipeline import assign_layers, bubble_fraction, idle_fraction, zb_h1_bubble_fraction

sizes = st.integers(1, 6)


def test_narayanan_bubble_numbers() -> None:
    """§2.2.1: bubble (p - 1)/m; §2.2.2: interleaving divides it by v."""
    assert bubble_fraction(stages=8, microbatches=32) == Fraction(7, 32)
    assert bubble_fraction(stages=8, microbatches=32, chunks=2) == Fraction(7, 64)
    # GPipe's idle share of the step, (p - 1)/(m + p - 1) (Huang et al. 2019, §2.3)
    assert idle_fraction(stages=4, microbatches=4) == Fraction(3, 7)


@given(st.integers(1, 40), sizes, st.integers(1, 4))
def test_layers_cover_each_layer_once_and_balance(n: int, p: int, v: int) -> None:
    if n < p * v:
        with pytest.raises(ValueError, match="no empty chunk"):
            assign_layers(n, stages=p, chunks=v)
        return
    got = assign_layers(n, stages=p, chunks=v)
    chunks = [got[k % p][k // p] for k in range(p * v)]  # virtual stage order
    assert [i for r in chunks for i in r] == list(range(n))
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bubble_fraction(stages=2, microbatches=2, chunks=0), "chunks must be >= 1"),
        (lambda: assign_layers(0, stages=1), "layers must be >= 1"),
        (lambda: zb_h1_bubble_fraction(stages=2, microbatches=2, weight=0), "weight must be > 0"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
