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
import math
import types
import typing
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import ParamSpec, TypeVar

from infralens._validate import describe

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["check_fields", "typed"]


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
