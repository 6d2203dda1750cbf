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

import collections.abc
import csv
import dataclasses
import functools
import inspect
import io
import math
import os
import types
import typing
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "MAX_RANKS",
    "check_choice",
    "check_fields",
    "describe",
    "divisible",
    "flag",
    "nonnegative_int",
    "nonnegative_number",
    "positive_int",
    "positive_number",
    "rank_in",
    "ranks_cap",
    "read_csv_rows",
    "read_text",
    "same_lengths",
    "typed",
]


MAX_RANKS = 2**24
"""Largest world size a function that lists one entry per rank accepts (16,777,216)."""


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
    if isinstance(value, float | Fraction):
        text = str(value)
        return text if len(text) <= limit else f"a {type(value).__name__} of {len(text)} chars"
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value)} chars)"
    try:
        size = len(value)  # type: ignore[arg-type]
    except Exception:
        return f"a {type(value).__name__}"
    return f"a {type(value).__name__} of {size} items"


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
    ValueError: world_size must be <= 2**24 (16777216) to list every rank, got 1073741824
    """
    v = positive_int(name, value)
    if v > MAX_RANKS:
        raise ValueError(
            f"{name} must be <= 2**24 ({MAX_RANKS}) to list every rank, got {describe(v)}"
        )
    return v


def _number(name: str, value: object) -> int | float | Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if isinstance(value, float) and math.isinf(value):  # NaN fails every range check
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _int(name: str, value: object) -> int:
    # bool is a subclass of int; "world_size=True" is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
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
        raise ValueError(f"{name} must be in range(0, {world_size}), got {describe(v)}")
    return v


def divisible(name: str, value: int, by_name: str, by: int) -> int:
    """Return *value* if *by* divides it, else raise naming both arguments.

    >>> divisible("heads", 12, "tp", 8)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by tp: 12 % 8 = 4
    """
    if value % by:
        raise ValueError(f"{name} must be divisible by {by_name}: {value} % {by} = {value % by}")
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
        raise ValueError(f"{name} must be one of {allowed}; got {describe(value)}")
    return value


def same_lengths(name: str, rows: Sequence[Sequence[object]]) -> int:
    """Return the common length of *rows*, which must be a non-empty list of lists.

    >>> same_lengths("per_rank", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    ValueError: per_rank must hold one equal-length list per rank; lengths are [2, 1]
    """
    if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
        raise TypeError(f"{name} must be a sequence of per-rank sequences")
    if len(rows) == 0:
        raise ValueError(f"{name} must hold at least one rank, got 0")
    for row in rows:
        if isinstance(row, str | bytes) or not isinstance(row, Sequence):
            raise TypeError(f"{name} must be a sequence of per-rank sequences")
    lengths = [len(r) for r in rows]
    if len(set(lengths)) != 1:
        shown = str(lengths) if len(lengths) <= 8 else f"{lengths[:8]} and {len(lengths) - 8} more"
        raise ValueError(f"{name} must hold one equal-length list per rank; lengths are {shown}")
    return lengths[0]


def _matches(value: object, hint: object, depth: int = 0) -> bool:
    """Whether *value* fits the annotation *hint* (containers checked element by element)."""
    if hint is typing.Any or isinstance(hint, TypeVar) or depth > 4:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a, depth) for a in args)
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Fraction:  # ints are exact fractions
        return isinstance(value, Fraction) or (
            isinstance(value, int) and not isinstance(value, bool)
        )
    if hint is float:  # a float parameter takes any finite real
        if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
            return False
        return not (isinstance(value, float) and math.isinf(value))
    if origin is None:
        return not isinstance(hint, type) or isinstance(value, hint)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0], depth + 1) for v in value)
        return len(value) == len(args) and all(
            _matches(v, a, depth + 1) for v, a in zip(value, args, strict=True)
        )
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        if isinstance(value, str | bytes) or not isinstance(value, origin):
            return False
        if not isinstance(value, Sequence):
            return True  # a one-shot iterable is not consumed here
        return not args or all(_matches(v, args[0], depth + 1) for v in value)
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, origin):
            return False
        return len(args) != 2 or all(
            _matches(k, args[0], depth + 1) and _matches(v, args[1], depth + 1)
            for k, v in value.items()
        )
    return isinstance(value, origin)


_NUMBERS = {int, float, Fraction}


def _hint_name(hint: object, plural: bool = False) -> str:
    args = set(typing.get_args(hint)) - {type(None)}
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and args <= _NUMBERS:
        return "numbers" if plural else "a number"
    if isinstance(hint, type):
        if plural:
            return f"{hint.__name__} values"
        return f"{'an' if hint.__name__[0] in 'AEIOUaeiou' else 'a'} {hint.__name__}"
    text = str(hint).replace("typing.", "").replace("collections.abc.", "")
    return text.replace("infralens.", "").replace("fractions.", "")[:80]


def _explain(name: str, value: object, hint: object, nested: bool = False) -> str:
    """The message for a *value* that does not fit *hint*: the innermost misfit, kept short."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and value is not None:
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _explain(name, value, inner[0], nested)
    is_seq = origin in (list, collections.abc.Sequence, collections.abc.Iterable) or (
        origin is tuple and len(args) == 2 and args[1] is Ellipsis
    )
    if is_seq and isinstance(value, Sequence) and not isinstance(value, str | bytes) and args:
        for v in value:
            if not _matches(v, args[0]):
                return _explain(name, v, args[0], nested=True)
    if origin in (dict, collections.abc.Mapping) and isinstance(value, dict) and len(args) == 2:
        for k, v in value.items():
            if not _matches(k, args[0]):
                return _explain(f"{name} keys", k, args[0])
            if not _matches(v, args[1]):
                return _explain(f"{name}[{describe(k)}]", v, args[1])
    got = type(value).__name__
    if isinstance(value, float) and math.isinf(value):
        got = str(value)
    return f"{name} must be {_hint_name(hint, plural=nested)}, got {got}"


def read_text(path: object, what: str, max_bytes: int) -> str:
    """Read the UTF-8 file *path* (at most *max_bytes*); every failure is a ``ValueError``
    naming *what* and the path, never an ``OSError`` or a ``UnicodeDecodeError``.

    >>> read_text("no/such.csv", "measurement file", 2**20)
    Traceback (most recent call last):
    ...
    ValueError: cannot read measurement file 'no/such.csv': No such file or directory
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    shown = describe(os.fspath(path), 80)
    if not os.fspath(path):
        raise ValueError(f"path of the {what} must not be empty")
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except (OSError, ValueError) as err:  # ValueError: an embedded NUL byte
        reason = getattr(err, "strerror", None) or "not a usable file name"
        raise ValueError(f"cannot read {what} {shown}: {reason}") from None
    if len(raw) > max_bytes:
        raise ValueError(f"{what} {shown} is larger than {max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} {shown} is not UTF-8 (byte {err.start})") from None


def read_csv_rows(path: object, what: str, max_bytes: int) -> tuple[str, list[dict[str, str]]]:
    """Read the CSV file *path* with :func:`read_text`; return its shown name and its rows.

    >>> read_csv_rows("no/such.csv", "measurement file", 2**20)
    Traceback (most recent call last):
    ...
    ValueError: cannot read measurement file 'no/such.csv': No such file or directory
    """
    text = read_text(path, what, max_bytes)
    where = describe(os.fspath(path), 80)  # type: ignore[call-overload]
    try:
        return where, list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ValueError(f"{where}: not a CSV file: {exc}") from None


def check_fields(obj: object) -> None:
    """Check a dataclass instance's fields against their annotations (see :func:`typed`).

    Call it first in ``__post_init__``; raises ``TypeError`` naming the field.
    """
    hints = typing.get_type_hints(type(obj))
    for field in dataclasses.fields(obj):  # type: ignore[arg-type]
        hint = hints.get(field.name)
        value = getattr(obj, field.name)
        if hint is not None and not _matches(value, hint):
            raise TypeError(_explain(field.name, value, hint))


def typed(fn: Callable[P, R]) -> Callable[P, R]:
    """Check every argument of *fn* against its annotation before *fn* runs.

    ``bool`` is not an ``int``, a ``float`` parameter takes a finite real, and
    sequences and mappings are checked element by element (work linear in the
    input). A mismatch raises ``TypeError`` naming the argument.

    >>> @typed
    ... def area(sides: Sequence[int]) -> int:
    ...     return sides[0] * sides[1]
    >>> area([2, True])
    Traceback (most recent call last):
    ...
    TypeError: sides must be int values, got bool
    """
    sig = inspect.signature(fn)
    hints: dict[str, object] | None = None

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        nonlocal hints
        if hints is None:
            hints = typing.get_type_hints(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{getattr(fn, '__name__', 'call')}(): {err}") from None
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            kind = sig.parameters[name].kind
            if hint is None or kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD):
                continue
            if not _matches(value, hint):
                raise TypeError(_explain(name, value, hint))
        return fn(*args, **kwargs)

    return wrapper
