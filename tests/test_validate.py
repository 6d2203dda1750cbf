"""Error paths of the shared argument checks."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from infralens import _validate as v


def test_accepts_valid_values() -> None:
    assert v.positive_int("x", 3) == 3
    assert v.nonnegative_int("x", 0) == 0
    assert v.nonnegative_number("x", 0.5) == 0.5
    assert v.rank_in("r", 0, 1) == 0
    assert v.check_choice("op", "a", ["a"]) == "a"
    assert v.same_lengths("p", [[1], [2]]) == 1


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: v.positive_int("n", True), TypeError, "n must be an int, got bool"),
        (lambda: v.nonnegative_number("t", math.nan), ValueError, "t must be >= 0, got nan"),
        (lambda: v.nonnegative_number("t", Fraction(-1, 2)), ValueError, "t must be >= 0"),
        (lambda: v.nonnegative_number("t", None), TypeError, "t must be a number, got NoneType"),
        (lambda: v.check_choice("op", 3, ["a"]), ValueError, "op must be one of 'a'; got 3"),
        (lambda: v.same_lengths("p", []), ValueError, "p must hold at least one rank"),
        (lambda: v.same_lengths("p", [[1], "ab"]), TypeError, "p must be a sequence"),
    ],
)
def test_bad_input(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
