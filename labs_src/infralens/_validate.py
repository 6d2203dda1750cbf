"""Argument checks shared by every module, so each rule is written once.

Each check returns the value it accepted, so callers can validate inline::

    >>> from infralens._validate import positive_int
    >>> positive_int("world_size", 4)
    4
    >>> positive_int("world_size", 0)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be >= 1, got 0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = [
    "MAX_INT",
    "MAX_ITEMS",
    "MAX_RANKS",
    "check_choice",
    "describe",
    "divisible",
    "flag",
    "in_int_range",
    "nonnegative_int",
    "nonnegative_number",
    "positive_int",
    "positive_number",
    "rank_in",
    "ranks_cap",
    "same_lengths",
]


MAX_RANKS = 2**17
"""Largest world size a function that lists one entry per rank accepts (131,072 GPUs): a
list of that many entries is made in well under a second and a few MB."""

MAX_INT = 2**63 - 1
"""Largest integer (in magnitude) any argument takes, a signed 64-bit int: checked before
any arithmetic, so no argument overflows a float or needs more than 19 digits to print."""

MAX_ITEMS = 2**20
"""Most items (1,048,576, nested ones counted) a sequence or mapping argument may hold:
checked while its elements' types are, so no check walks more."""


def describe(value: object, limit: int = 40) -> str:
    """A short description of *value* for an error message: never longer than about *limit*.

    Strings and numbers are shown (truncated); anything else by its type and size,
    so a message never expands an unbounded structure.

    >>> describe("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (100 chars)"
    >>> describe([[1, 2]] * 10**6)
    'a list of 1000000 items'
    >>> describe(10**5000)
    'an int of about 5001 digits'
    """
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 128:
            return f"an int of about {int(value.bit_length() * 0.30103) + 1} digits"
        return str(value)
    if (
        isinstance(value, Fraction)
        and max(value.numerator.bit_length(), value.denominator.bit_length()) > 128
    ):
        return "a Fraction with parts of more than 38 digits"
    if isinstance(value, float | Fraction):
        text = str(value)
        return (
            text
            if len(text) <= limit
            else f"a {type(value).__name__} of {len(text)} chars"
        )
    if isinstance(value, str):
        if len(value) <= limit and len(repr(value)) <= 2 * limit:
            return repr(value)
        return f"{repr(value[:limit])[: 2 * limit]}... ({len(value)} chars)"
    try:
        size = len(value)  # type: ignore[arg-type]
    except Exception:
        return f"a {type(value).__name__}"
    return f"a {type(value).__name__} of {size} items"


def in_int_range(value: int) -> bool:
    """Whether the int *value* lies within ``-MAX_INT..MAX_INT`` (no digits are made).

    >>> in_int_range(2**63 - 1), in_int_range(10**5000)
    (True, False)
    """
    return value.bit_length() <= 63


def _out_of_range(name: str, value: int | Fraction) -> ValueError:
    return ValueError(f"{name} must be within +-(2**63 - 1), got {describe(value)}")


def flag(name: str, value: object) -> bool:
    """Return *value* if it is a bool; ``pad="no"`` is not taken as true.

    >>> flag("pad", "no")
    Traceback (most recent call last):
    ...
    TypeError: pad must be a bool, got str
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def ranks_cap(name: str, value: object) -> int:
    """Return *value* if it is an int in ``1..MAX_RANKS``; for functions that list every rank.

    >>> ranks_cap("world_size", 2**30)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be <= 2**17 (131072) to list every rank, got 1073741824
    """
    v = positive_int(name, value)
    if v > MAX_RANKS:
        raise ValueError(
            f"{name} must be <= 2**17 ({MAX_RANKS}) to list every rank, got {describe(v)}"
        )
    return v


def _number(name: str, value: object) -> int | float | Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if isinstance(value, float) and math.isinf(
        value
    ):  # NaN fails every range check
        raise ValueError(f"{name} must be finite, got {value}")
    if isinstance(value, int) and not in_int_range(value):
        raise _out_of_range(name, value)
    if isinstance(value, Fraction) and not in_int_range(int(value)):
        raise _out_of_range(name, value)
    return value


def _int(name: str, value: object) -> int:
    # bool is a subclass of int; "world_size=True" is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not in_int_range(value):
        raise _out_of_range(name, value)
    return value


def positive_int(name: str, value: object) -> int:
    """Return *value* if it is an int >= 1, else raise naming *name*."""
    v = _int(name, value)
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {describe(v)}")
    return v


def nonnegative_int(name: str, value: object) -> int:
    """Return *value* if it is an int >= 0, else raise naming *name*.

    >>> nonnegative_int("numel", -3)
    Traceback (most recent call last):
    ...
    ValueError: numel must be >= 0, got -3
    """
    v = _int(name, value)
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {describe(v)}")
    return v


def nonnegative_number(name: str, value: object) -> int | float | Fraction:
    """Return *value* if it is a real number >= 0 (int, float or Fraction).

    >>> nonnegative_number("seconds", Fraction(1, 2))
    Fraction(1, 2)
    >>> nonnegative_number("seconds", "2")
    Traceback (most recent call last):
    ...
    TypeError: seconds must be a number, got str
    """
    v = _number(name, value)
    if not v >= 0:
        raise ValueError(f"{name} must be >= 0, got {describe(v)}")
    return v


def positive_number(name: str, value: object) -> Fraction:
    """Return *value* as an exact ``Fraction`` if it is a real number > 0.

    >>> positive_number("capacity_factor", 1.25)
    Fraction(5, 4)
    >>> positive_number("flops_per_second", 0)
    Traceback (most recent call last):
    ...
    ValueError: flops_per_second must be > 0, got 0
    """
    v = _number(name, value)
    if not v > 0:
        raise ValueError(f"{name} must be > 0, got {describe(v)}")
    return Fraction(v)


def rank_in(name: str, value: object, world_size: int) -> int:
    """Return *value* if it is a valid rank in ``range(world_size)``.

    >>> rank_in("root", 4, 4)
    Traceback (most recent call last):
    ...
    ValueError: root must be in range(0, 4), got 4
    """
    v = _int(name, value)
    if not 0 <= v < world_size:
        raise ValueError(
            f"{name} must be in range(0, {world_size}), got {describe(v)}"
        )
    return v


def divisible(name: str, value: int, by_name: str, by: int) -> int:
    """Return *value* if *by* divides it, else raise naming both arguments.

    >>> divisible("heads", 12, "tp", 8)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by tp: 12 % 8 = 4
    """
    if value % by:
        raise ValueError(
            f"{name} must be divisible by {by_name}: {value} % {by} = {value % by}"
        )
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return *value* if it is one of *choices*.

    >>> check_choice("op", "all_sum", ["all_reduce", "broadcast"])
    Traceback (most recent call last):
    ...
    ValueError: op must be one of 'all_reduce', 'broadcast'; got 'all_sum'
    """
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        if len(allowed) > 120:  # a long list: the first few, and how many there are
            allowed = (
                allowed[: allowed.rfind(", ", 0, 100)]
                + f", ... ({len(choices)} in all)"
            )
        raise ValueError(
            f"{name} must be one of {allowed}; got {describe(value, 16)}"
        )
    return value


def same_lengths(name: str, rows: Sequence[Sequence[object]]) -> int:
    """Return the common length of *rows*, which must be a non-empty list of lists.

    >>> same_lengths("per_rank", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    ValueError: per_rank must hold one equal-length list per rank; lengths are [2, 1]
    """
    if isinstance(rows, str | bytes | range) or not isinstance(rows, Sequence):
        raise TypeError(f"{name} must be a sequence of per-rank sequences")
    if len(rows) > MAX_RANKS:
        raise ValueError(
            f"{name} must hold at most {MAX_RANKS} ranks, got {len(rows)}"
        )
    if len(rows) == 0:
        raise ValueError(f"{name} must hold at least one rank, got 0")
    for row in rows:
        if isinstance(row, str | bytes) or not isinstance(row, Sequence):
            raise TypeError(f"{name} must be a sequence of per-rank sequences")
    lengths = [
        len(r) if not isinstance(r, range) or abs(r.stop - r.start) < 2**62 else -1
        for r in rows
    ]
    if sum(abs(n) for n in lengths) > MAX_ITEMS or -1 in lengths:
        raise ValueError(f"{name} must hold at most {MAX_ITEMS} items in all")
    if len(set(lengths)) != 1:
        shown = (
            str(lengths)
            if len(lengths) <= 8
            else f"{lengths[:8]} and {len(lengths) - 8} more"
        )
        raise ValueError(
            f"{name} must hold one equal-length list per rank; lengths are {shown}"
        )
    return lengths[0]
