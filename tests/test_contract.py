"""The input contract, fuzzed: every public callable, fed bad input, raises only
``ValueError``/``TypeError`` with a message naming one of its arguments, within a
time and memory bound.

Walks every module's ``__all__``: functions, classes (their constructors) and
the public methods of public classes (called on instances the package itself
defines). Hypothesis mixes bad values (wrong types, bools, ±inf, NaN,
negative, huge, empty, ragged, unknown strings) with plausible ones, so calls
get past the first check. Each call runs under a 2 s timer (``SIGALRM``) and an
address-space limit 512 MiB above the process's size (``RLIMIT_AS``), so a
call that would run away fails as ``_Overrun`` or ``MemoryError``.

``INFRALENS_FUZZ_EXAMPLES`` sets the examples per callable (20 in ``nox -s
tests``; ``nox -s fuzz`` raises it); ``INFRALENS_FUZZ_REPORT`` names a file
each test appends its executed case count to.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import os
import pkgutil
import resource
import signal
from collections.abc import Callable, Iterator
from fractions import Fraction
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infralens

EXAMPLES = int(os.environ.get("INFRALENS_FUZZ_EXAMPLES", "20"))
REPORT = os.environ.get("INFRALENS_FUZZ_REPORT")
SECONDS = 2.0
EXTRA_BYTES = 512 * 2**20
SKIP_MODULES = {"infralens.__main__", "infralens.cli"}  # the CLI has its own attack test
# main() parses sys.argv-like input and prints; the CLI attack test drives it.
SKIP = {"infralens.cli.main"}


def _modules() -> Iterator[Any]:
    for info in pkgutil.iter_modules(infralens.__path__, "infralens."):
        if info.name not in SKIP_MODULES and not info.name.split(".")[-1].startswith("_"):
            yield importlib.import_module(info.name)
    yield importlib.import_module("infralens.cli")


def _instances() -> dict[type, list[Any]]:
    """Instances of every public class found among the package's own constants."""
    found: dict[type, list[Any]] = {}

    def add(value: Any, depth: int = 0) -> None:
        if depth > 2:
            return
        if isinstance(value, dict):
            for v in list(value.values())[:20]:
                add(v, depth + 1)
        elif isinstance(value, list | tuple):
            for v in value[:20]:
                add(v, depth + 1)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            found.setdefault(type(value), []).append(value)
            for f in dataclasses.fields(value):
                add(getattr(value, f.name), depth + 1)

    for module in _modules():
        for name in dir(module):
            if not name.startswith("_"):
                add(getattr(module, name))
    from infralens.diagnosis import STARTER_TRACES, load_trace
    from infralens.plan import ParallelPlan
    from infralens.topology import Cluster

    add(ParallelPlan(tp=2, dp=4, ep=2))
    add(Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100"))
    add(load_trace(STARTER_TRACES / "straggler.json"))
    return found


def _targets() -> list[tuple[str, Callable[..., Any]]]:
    out: dict[str, Callable[..., Any]] = {}
    instances = _instances()
    for module in _modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            qual = f"{module.__name__}.{name}"
            if qual in SKIP or not callable(obj):
                continue
            out[qual] = obj
            if not inspect.isclass(obj):
                continue
            for meth_name, meth in vars(obj).items():
                if meth_name.startswith("_") or not inspect.isfunction(meth):
                    continue
                for inst in instances.get(obj, [])[:1]:
                    out[f"{qual}.{meth_name}"] = getattr(inst, meth_name)
    return sorted(out.items())


TARGETS = _targets()

BAD = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, -(2**63), 2**64, 10**30, 2**24 + 1, 10**12]),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([math.inf, -math.inf, math.nan, -0.0, 1e308, 5e-324, -2.5]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([Fraction(-1, 3), Fraction(10**40, 3)]),
    st.text(max_size=12),
    st.sampled_from(["", "x" * 5000, "no-such-name", "-", "1"]),
    st.lists(st.integers(-3, 10**9), max_size=6),
    st.lists(st.lists(st.integers(-2, 9), max_size=3), max_size=4),  # ragged
    st.sampled_from([[], (), {}, set(), b"\xff", object(), [[1, 2], [3]], {"a": -1}]),
    st.dictionaries(st.text(max_size=4), st.integers(-2, 9), max_size=3),
)
PLAUSIBLE = st.one_of(
    st.integers(min_value=1, max_value=64),
    st.sampled_from([1.0, 0.5, Fraction(1, 2), 4096, 8, 2**20]),
    st.sampled_from(["llama3-70b", "dgx-h100", "h100-sxm5-80gb", "megatron-bf16", "tp", "dp"]),
    st.sampled_from(["colwise", "all_reduce", "ring", "bf16", "full", "selective", "none"]),
)
VALUE = st.one_of(BAD, PLAUSIBLE)


class _Overrun(Exception):
    """Raised by the timer inside a call that ran past its bound."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _Overrun(f"call ran past {SECONDS} s")


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _params(fn: Callable[..., Any]) -> tuple[list[inspect.Parameter], set[str]]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], set()
    params = [
        p
        for p in sig.parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    names = {p.name for p in sig.parameters.values() if p.name != "self"}
    return params, names


# What a message may say instead of the parameter's name: a loader names the
# path it could not read, and parse_plan's one argument is "the plan file".
ALIASES = {"infralens.plan_file.parse_plan": {"plan file", "parallelism", "training", "world_size"}}


def _names_an_argument(message: str, names: set[str], qualname: str, args: list[Any]) -> bool:
    if any(n in message for n in names | ALIASES.get(qualname, set())):
        return True
    paths = [str(a) for a in args if isinstance(a, str | os.PathLike)]
    return "path" in names and any(p and repr(p)[1:30] in message for p in paths)


@pytest.mark.parametrize(("qualname", "fn"), TARGETS, ids=[t[0] for t in TARGETS])
def test_bad_input_raises_a_named_value_or_type_error(qualname: str, fn: Any) -> None:
    params, names = _params(fn)
    count = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=os.environ.get("INFRALENS_FUZZ_RANDOM") != "1",
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        nonlocal count
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in params:
            if p.default is not p.empty and data.draw(st.booleans()):
                continue  # leave an optional argument at its default
            value = data.draw(VALUE, label=p.name)
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
        count += 1
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        old = signal.signal(signal.SIGALRM, _on_alarm)
        resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + EXTRA_BYTES, hard))
        signal.setitimer(signal.ITIMER_REAL, SECONDS)
        try:
            result = fn(*args, **kwargs)
            if inspect.isgenerator(result):  # plans are generated lazily: drain a few
                for _, _item in zip(range(1000), result, strict=False):
                    pass
        except (ValueError, TypeError) as err:
            message = str(err)
            assert _names_an_argument(message, names, qualname, [*args, *kwargs.values()]), (
                f"{qualname}{tuple(args)!r:.300} {kwargs!r:.200}: message names no argument "
                f"of {sorted(names)}: {message[:300]}"
            )
            assert len(message) < 1000, f"{qualname}: message of {len(message)} chars"
        except (MemoryError, _Overrun) as err:
            raise AssertionError(
                f"{qualname}{tuple(args)!r:.300} {kwargs!r:.200}: over its bound: {err!r}"
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    run()
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(f"{qualname} {count}\n")


def test_every_module_is_walked() -> None:
    names = {q.rsplit(".", 1)[0] for q, _ in TARGETS}
    assert {"infralens.sharding", "infralens.diagnosis", "infralens.plan"} <= names
    assert len(TARGETS) > 150, len(TARGETS)
