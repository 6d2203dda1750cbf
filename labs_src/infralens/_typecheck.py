"""Runtime type checks: every argument, or every dataclass field, against its annotation.

:func:`typed` wraps a public function and :func:`check_fields` runs first in a
dataclass's ``__post_init__``; a value that does not fit raises ``TypeError``
naming the argument or field, under the same rules as :mod:`infralens._validate`
(a bool is not an int, a ``float`` takes any finite real)::

    >>> from infralens._typecheck import typed
    >>> @typed
    ... def ranks(world_size: int) -> int:
    ...     return world_size
    >>> ranks(8)
    8
    >>> ranks(8.0)
    Traceback (most recent call last):
    ...
    TypeError: world_size must be an int, got float
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import itertools
import math
import types
import typing
from collections.abc import Callable, Collection, Sequence
from fractions import Fraction
from typing import ParamSpec, TypeVar

from infralens._validate import MAX_ITEMS, describe, in_int_range

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["check_fields", "typed"]


class _Refused(Exception):
    """Raised inside :func:`_matches` when a value is the right type but out of range."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _matches(
    value: object, hint: object, depth: int = 0, budget: list[int] | None = None
) -> bool:
    """Whether *value* fits the annotation *hint* (containers checked element by element).

    Walks at most :data:`MAX_ITEMS` elements in all (*budget*); a ``range`` is checked
    by its ends, its length counted against the budget. An int or Fraction beyond
    ``MAX_INT``, or a container over the budget, raises :class:`_Refused`.
    """
    if (
        type(value) is hint
    ):  # an exact instance: nothing to walk, an int's size to check
        if hint is int and value.bit_length() <= 63:  # type: ignore[attr-defined]
            return True
        if hint not in _NUMBERS:
            return True
    origin, args = _parts(hint)
    if origin is collections.abc.Callable:  # its arguments are not checked
        return callable(value)
    if budget is None:
        budget = [MAX_ITEMS]
    if hint is typing.Any or isinstance(hint, TypeVar) or depth > 4:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a, depth, budget) for a in args)
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if isinstance(value, int) and not isinstance(value, bool) and hint in _NUMBERS:
        if not in_int_range(value):
            raise _Refused(f"must be within +-(2**63 - 1), got {describe(value)}")
        return True
    if hint is int:
        return False
    if hint is Fraction:  # ints are exact fractions
        if isinstance(value, Fraction) and not in_int_range(int(value)):
            raise _Refused(f"must be within +-(2**63 - 1), got {describe(value)}")
        return isinstance(value, Fraction)
    if hint is float:  # a float parameter takes any finite real
        if not isinstance(value, float | Fraction):
            return False
        return (
            _matches(value, Fraction, depth, budget)
            if isinstance(value, Fraction)
            else (not math.isinf(value))
        )
    if origin is None:
        return not isinstance(hint, type) or isinstance(value, hint)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        _spend(budget, len(value))
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0], depth + 1, budget) for v in value)
        return len(value) == len(args) and all(
            _matches(v, a, depth + 1, budget)
            for v, a in zip(value, args, strict=True)
        )
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        if isinstance(value, str | bytes) or not isinstance(value, origin):
            return False
        if not isinstance(value, Sequence):
            return True  # a one-shot iterable is not consumed here
        if isinstance(
            value, range
        ):  # its items are ints: check the ends, never walk it
            ends = (value.start, value.stop, value.step)
            fits = not args or all(
                _matches(v, args[0], depth + 1, budget) for v in ends
            )
            # The callee may walk it: it counts like a list (its length may not fit a C long).
            _spend(
                budget,
                len(value)
                if abs(value.stop - value.start) < 2**62
                else MAX_ITEMS + 1,
            )
            return fits
        _spend(budget, len(value))
        return not args or all(
            _matches(v, args[0], depth + 1, budget) for v in value
        )
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, origin):
            return False
        _spend(budget, len(value))
        return len(args) != 2 or all(
            _matches(k, args[0], depth + 1, budget)
            and _matches(v, args[1], depth + 1, budget)
            for k, v in value.items()
        )
    return isinstance(value, origin)


_PARTS: dict[object, tuple[typing.Any, tuple[typing.Any, ...]]] = {}


def _parts(hint: object) -> tuple[typing.Any, tuple[typing.Any, ...]]:
    """``typing.get_origin`` and ``typing.get_args`` of *hint*, worked out once per hint."""
    try:
        return _PARTS[hint]
    except KeyError:
        _PARTS[hint] = (typing.get_origin(hint), typing.get_args(hint))
    except TypeError:  # an unhashable annotation
        return typing.get_origin(hint), typing.get_args(hint)
    return _PARTS[hint]


def _spend(budget: list[int], items: int) -> None:
    budget[0] -= items
    if budget[0] < 0:
        raise _Refused(f"must hold at most {MAX_ITEMS} items, nested ones counted")


_NUMBERS = {int, float, Fraction}


def _hint_name(hint: object, plural: bool = False) -> str:
    if typing.get_origin(hint) is collections.abc.Callable:  # its arguments: a list
        return "callables" if plural else "a callable"
    args = set(typing.get_args(hint)) - {type(None)}
    if (
        typing.get_origin(hint) in (typing.Union, types.UnionType)
        and args <= _NUMBERS
    ):
        return "numbers" if plural else "a number"
    if isinstance(hint, type):
        if plural:
            return f"{hint.__name__} values"
        return (
            f"{'an' if hint.__name__[0] in 'AEIOUaeiou' else 'a'} {hint.__name__}"
        )
    text = str(hint).replace("typing.", "").replace("collections.abc.", "")
    return text.replace("infralens.", "").replace("fractions.", "")[:80]


def _explain(name: str, value: object, hint: object, nested: bool = False) -> str:
    """The message for a *value* that does not fit *hint*: the innermost misfit, kept short."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and value is not None:
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _explain(name, value, inner[0], nested)
    is_seq = origin in (
        list,
        collections.abc.Sequence,
        collections.abc.Iterable,
    ) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis)
    # Only a container of the right kind is searched for its misfit (never a range for a
    # tuple): the check stopped at that element, so the search stops there too.
    kind = tuple if origin is tuple else origin
    right_kind = isinstance(kind, type) and isinstance(value, kind)
    seq = value if right_kind and isinstance(value, Sequence) else None
    if is_seq and seq is not None and not isinstance(seq, str | bytes) and args:
        for v in itertools.islice(
            seq, MAX_ITEMS
        ):  # the misfit is among the checked ones
            if not _matches(v, args[0]):
                return _explain(name, v, args[0], nested=True)
    if (
        origin in (dict, collections.abc.Mapping)
        and isinstance(value, dict)
        and len(args) == 2
    ):
        for k, v in itertools.islice(value.items(), MAX_ITEMS):
            if not _matches(k, args[0]):
                return _explain(f"{name} keys", k, args[0])
            if not _matches(v, args[1]):
                return _explain(f"{name}[{describe(k)}]", v, args[1])
    got = type(value).__name__
    if isinstance(value, float) and math.isinf(value):
        got = str(value)
    return f"{name} must be {_hint_name(hint, plural=nested)}, got {got}"


_FIELD_HINTS: dict[type, tuple[tuple[str, object], ...]] = {}


def _field_hints(cls: type) -> tuple[tuple[str, object], ...]:
    """A dataclass's (field, annotation) pairs, resolved once per class."""
    if cls not in _FIELD_HINTS:
        hints = typing.get_type_hints(cls)
        _FIELD_HINTS[cls] = tuple(
            (f.name, hints.get(f.name)) for f in dataclasses.fields(cls)
        )
    return _FIELD_HINTS[cls]


def check_fields(obj: object, signed: Collection[str] = ()) -> None:
    """Check a dataclass instance's fields against their annotations (see :func:`typed`).

    Call it first in ``__post_init__``. Beyond the types, a number is never NaN
    and, unless its field is named in *signed*, never negative: sizes, bytes,
    seconds and counts cannot be. Raises ``TypeError`` naming the field for a
    wrong type, ``ValueError`` for a value out of range.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Step:
    ...     seconds: float
    ...     def __post_init__(self) -> None:
    ...         check_fields(self)
    >>> Step(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: seconds must be >= 0, got -1.0
    """
    for name, hint in _field_hints(type(obj)):
        value = getattr(obj, name)
        if hint is not None and (type(value) is not hint or hint in _NUMBERS):
            _check(name, value, hint)
        if isinstance(value, int | float | Fraction) and not isinstance(
            value, bool
        ):
            if value != value:
                raise ValueError(f"{name} must be a number, got nan")
            if value < 0 and name not in signed:
                raise ValueError(f"{name} must be >= 0, got {describe(value)}")


def _check(name: str, value: object, hint: object) -> None:
    """Raise ``TypeError`` if *value* does not fit *hint*, ``ValueError`` if it is too big."""
    try:
        fits = _matches(value, hint)
    except _Refused as err:
        raise ValueError(f"{name} {err.why}") from None
    if not fits:
        raise TypeError(_explain(name, value, hint))


def typed(fn: Callable[P, R]) -> Callable[P, R]:
    """Check every argument of *fn* against its annotation before *fn* runs.

    ``bool`` is not an ``int``, a ``float`` parameter takes a finite real, and
    sequences and mappings are checked element by element, at most
    :data:`~infralens._validate.MAX_ITEMS` in all (a ``range`` by its ends).
    A mismatch raises ``TypeError`` naming the argument; an int beyond
    :data:`~infralens._validate.MAX_INT` or a container too large, ``ValueError``.

    >>> @typed
    ... def area(sides: Sequence[int]) -> int:
    ...     return sides[0] * sides[1]
    >>> area([2, True])
    Traceback (most recent call last):
    ...
    TypeError: sides must be int values, got bool
    """
    sig = inspect.signature(fn)
    checked: dict[str, object] | None = None  # each annotated parameter's hint
    params = sig.parameters.values()
    # Without *args, **kwargs or positional-only parameters, a call binds by name alone.
    plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
    positional = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
    required = {p.name for p in params if p.default is p.empty}

    def _arguments(
        args: tuple[object, ...], kwargs: dict[str, object]
    ) -> dict[str, object]:
        if plain and len(args) <= len(positional):
            given = dict(zip(positional, args, strict=False))
            if (
                given.keys().isdisjoint(kwargs)
                and kwargs.keys() <= sig.parameters.keys()
            ):
                given.update(kwargs)
                if required <= given.keys():
                    return given
        try:  # anything else, and every mistake, goes through inspect for its message
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{getattr(fn, '__name__', 'call')}(): {err}") from None
        return bound.arguments

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        nonlocal checked
        if checked is None:  # resolved once the module has loaded
            hints = typing.get_type_hints(fn)
            varargs = (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            )
            checked = {p.name: hints[p.name] for p in params
                       if p.name in hints and p.kind not in varargs}  # fmt: skip
        for name, value in _arguments(args, kwargs).items():
            hint = checked.get(name)
            if hint is None or (type(value) is hint and hint not in _NUMBERS):
                continue  # unannotated, or an exact instance with no range to check
            _check(name, value, hint)
        return fn(*args, **kwargs)

    return wrapper
