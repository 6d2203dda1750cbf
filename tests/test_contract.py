"""The input contract, fuzzed: every public callable, fed bad input, raises only
``ValueError``/``TypeError`` with a message naming one of its arguments, within a
time and memory bound.

Walks every module's ``__all__``: functions, classes (their constructors) and
the public methods of public classes (called on instances the package itself
defines). Hypothesis mixes bad values (wrong types, bools, ±inf, NaN,
negative, huge, empty, ragged, unknown strings; integers beyond a float and
beyond 4,300 digits; ``range`` objects of up to 10**20 items; strings such as
"no" for booleans and 3.0 for counts; one object passed as two arguments) with
plausible ones, so calls get past the first check. A message must name an
argument in one line of under 200 characters, and a returned float must be
finite. Each call runs under a 2 s timer (``SIGALRM``) and an
address-space limit 512 MiB above the process's size (``RLIMIT_AS``), so a
call that would run away fails as ``_Overrun`` or ``MemoryError``.

Below the fuzz: every estimate in the ranker's search space on a few clusters
keeps 0 < MFU <= HFU <= 1, finite non-negative terms, a bubble under the step
and a computed memory; and each defect class found before, as one call.

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
    for info in pkgutil.walk_packages(infralens.__path__, "infralens."):  # planner too
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

HUGE = [10**309, -(10**309), 10**5000, 2**63, 2**1024]
"""Integers beyond a float (about 1.8e308) and beyond Python's 4,300-digit str limit."""

BAD = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, -(2**63), 2**64, 10**30, 2**24 + 1, 10**12]),
    st.sampled_from(HUGE),
    st.sampled_from([range(9, 10**12), range(10**20), range(-3, 3), range(0), range(2**62)]),
    st.sampled_from(["no", "false", "False", "0", "yes", "true"]),  # strings for booleans
    st.sampled_from([3.0, 1.0, 8.0, -0.5, 1e-300]),  # floats where counts belong
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
    st.sampled_from([True, False, 131072, 2**17 + 1, 4096 * 8]),
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
ALIASES = {
    "infralens.planner.plan_file.parse_plan": {"plan file", "parallelism", "training", "world_size"}
}


def _shown(values: Any) -> str:
    """repr of the drawn arguments, with huge ints shortened (str() refuses 4,300+ digits)."""

    def short(v: Any) -> Any:
        if isinstance(v, int) and v.bit_length() > 256:
            return f"<int of {v.bit_length()} bits>"
        return v

    if isinstance(values, dict):
        return repr({k: short(v) for k, v in values.items()})[:300]
    return repr(tuple(short(v) for v in values))[:300]


def _check_result(qualname: str, result: Any) -> None:
    """A returned number is never NaN or infinite: bytes, seconds and fractions are finite."""
    values = [result] if not isinstance(result, tuple) else list(result)
    for v in values:
        if isinstance(v, float):
            assert math.isfinite(v), f"{qualname} returned {v}"


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
        drawn: list[Any] = []
        for p in params:
            if p.default is not p.empty and data.draw(st.booleans()):
                continue  # leave an optional argument at its default
            if drawn and data.draw(st.integers(0, 9)) == 0:
                value = data.draw(st.sampled_from(drawn), label=p.name)  # one object, twice
            else:
                value = data.draw(VALUE, label=p.name)
            drawn.append(value)
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
            else:
                _check_result(qualname, result)
        except (ValueError, TypeError) as err:
            message = str(err)
            assert _names_an_argument(message, names, qualname, [*args, *kwargs.values()]), (
                f"{qualname}{_shown(args)} {_shown(kwargs)}: message names no argument "
                f"of {sorted(names)}: {message[:300]}"
            )
            assert len(message) < 200, f"{qualname}: message of {len(message)} chars"
            assert "\n" not in message, f"{qualname}: message of several lines"
        except (MemoryError, _Overrun) as err:
            raise AssertionError(
                f"{qualname}{_shown(args)} {_shown(kwargs)}: over its bound: {err!r}"
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
    assert {"infralens.planner.job", "infralens.planner.step", "infralens.planner.fit"} <= names
    assert "infralens.planner.job.Job" in dict(TARGETS)  # Job's constructor is fuzzed
    assert len(TARGETS) > 150, len(TARGETS)


# --- Results that cannot be: every estimate the ranker could print keeps its meaning. ---

RANK_CASES = [
    # (model, system, GPUs, sequence length, global batch): long context is where attention's
    # FLOPs dominate and a miscounted attention term shows first.
    ("llama2-7b", "dgx-a100", 32, 131072, 32),
    ("llama3-8b", "dgx-h100", 16, 131072, 16),
    ("llama3-70b", "dgx-h100", 64, 4096, 512),
    ("llama3-8b", "dgx-h200", 8, 8192, 64),
]


def _search_space(model: str, system: str, gpus: int, seq: int, batch: int) -> Iterator[Any]:
    """Every (plan, options) estimate rank_plans may price, through the same filters."""
    from infralens.hardware import SYSTEMS
    from infralens.model import PRESETS
    from infralens.planner.ranking import _candidates, _schedules
    from infralens.topology import Cluster

    node = SYSTEMS[system]
    cluster = Cluster(gpus // node.gpus_per_node, node.gpus_per_node, node)
    m = PRESETS[model]
    for plan in _candidates(m, cluster, seq, batch, 1, 8):
        for schedule, chunks in _schedules(m, plan.pp):
            for zero in (1, 3):
                for recompute in ("selective", "full"):
                    kw = dict(schedule=schedule, chunks=chunks, zero_stage=zero)
                    yield m, plan, cluster, dict(kw, recompute=recompute)


@pytest.mark.parametrize("case", RANK_CASES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in RANK_CASES])
def test_every_estimate_in_the_rankers_search_keeps_its_meaning(case: tuple[Any, ...]) -> None:
    from infralens.planner.job import Job
    from infralens.planner.step import estimate

    priced = 0
    for m, plan, cluster, kw in _search_space(*case):
        try:  # a plan that does not fit is refused; a broken invariant is a RuntimeError
            e = estimate(Job(m, plan, cluster, seq_len=case[3], global_batch_size=case[4],
                         micro_batch_size=1,  **kw), check_memory=False)  # fmt: skip
        except ValueError:
            continue
        priced += 1
        where = f"{plan} {kw}"
        assert 0 < e.mfu <= e.hfu <= 1, (where, e.mfu, e.hfu)
        assert math.isfinite(e.seconds) and e.seconds > 0, where
        assert all(math.isfinite(v) and v >= 0 for _, v in e.breakdown.items()), where
        assert abs(e.breakdown.total - e.seconds) <= 1e-9 * e.seconds, where
        assert 0 <= e.breakdown.pp_bubble / e.seconds < 1, where
        assert e.memory_bytes is not None and e.memory_bytes > 0, where
    assert priced > 10, priced


def test_the_ranked_long_context_plans_stay_below_the_dense_peak() -> None:
    from infralens.cli import rank_report

    table = rank_report("llama2-7b", "dgx-a100", 32, 131072, 32)
    rows = [line for line in table.splitlines()[3:] if line.startswith("| ")]
    mfus = [float(line.split("|")[13].strip().rstrip("%")) for line in rows]
    assert len(mfus) == 10 and all(0 < x <= 100 for x in mfus), mfus


# --- Each class of defect found before, as one call: a named error, within its bound. ---


def _reproducers() -> list[tuple[str, Callable[[], Any], str]]:
    from infralens import goodput, memory, nccl, operations, sharding
    from infralens import pipeline_orders as po
    from infralens import pipeline_schedules as ps
    from infralens.model import TransformerConfig
    from infralens.plan import ParallelPlan
    from infralens.planner import step
    from infralens.planner.fit import Breakdown, fits
    from infralens.planner.job import Job
    from infralens.planner.plan_file import parse_plan
    from infralens.topology import Cluster

    two = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    one = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    job = dict(seq_len=4096, global_batch_size=8, micro_batch_size=1)
    shape = dict(layers=2, hidden=8, heads=2, kv_heads=2, ffn_hidden=32, vocab_size=10, seq_len=4)
    rec = operations.CollectiveRecord
    return [
        ("float overflow", lambda: nccl.predict("all_reduce", 10**309, two), "nbytes"),
        ("4300 digits", lambda: nccl.predict("all_reduce", 10**5000, two), "nbytes"),
        ("not iterable", lambda: nccl.predict("all_reduce", 1024, two, ranks=5), "ranks"),
        ("empty timeline", lambda: ps.measured_bubble(ps.Timeline("gpipe", ())), "rows"),
        ("unknown axis", lambda: step.group_of(ParallelPlan(tp=8), "bogus"), "axis"),
        (
            "chunks blow-up",
            lambda: po.schedule_order("interleaved", stages=2, microbatches=2, chunks=10**12),
            "chunks",
        ),
        ("rank grid", lambda: ParallelPlan(tp=10**12).groups("tp"), "world_size"),
        ("range walk", lambda: two.tier_of(range(9, 10**12)), "ranks"),
        ("range walk", lambda: sharding.shard_shape(range(9, 10**12), 4, 0), "shape"),
        ("simulate", lambda: ps.simulate("1f1b", stages=1024, microbatches=1024), "stages"),
        ("list per rank", lambda: sharding.chunk_sizes(10, 2**24), "world_size"),
        (
            "inf result",
            lambda: goodput.optimal_checkpoint_interval(checkpoint_seconds=300, mtbf_seconds=1e308),
            "mtbf_seconds",
        ),
        (
            "negative bytes",
            lambda: fits(Breakdown("first", -(10**12), 0, 0, 0), "h100-sxm5-80gb"),
            "model_states",
        ),
        (
            "string flag",
            lambda: Job("llama3-8b", ParallelPlan(tp=8), one, **job, sequence_parallel="no"),
            "sequence_parallel",
        ),
        (
            "float count",
            lambda: Job("llama3-8b", ParallelPlan(tp=8), one, **job, zero_stage=3.0),
            "zero_stage",
        ),
        (
            "string flag",
            lambda: memory.activation_bytes(
                "llama3-8b", seq_len=8, micro_batch_size=1, dropout="no"
            ),
            "dropout",
        ),
        ("string flag", lambda: TransformerConfig(**shape, gated_mlp="no"), "gated_mlp"),
        ("long message", lambda: ParallelPlan(order="x" * 10**6), "order"),
        (
            "contradicting count",
            lambda: parse_plan(
                {
                    "world_size": 8,
                    "node_shape": "1_node_x_8_gpus",
                    "parallelism": {"dp_size": 8},
                    "training": {
                        "num_params": 1,
                        "layers": 80,
                        "hidden": 8192,
                        "heads": 64,
                        "seq_len": 4096,
                    },
                }
            ),
            "num_params",
        ),
        (
            "layers per stage",
            lambda: step.estimate(
                Job("llama3-8b", ParallelPlan(pp=8), one, **job, schedule="interleaved", chunks=3)
            ),
            "layers",
        ),
        (
            "sequence walk",
            lambda: operations.find_hang(
                {r: [rec(1, "all_reduce", 8, True), rec(10**9, "all_reduce", 8)] for r in (0, 1)}
            ),
            "",
        ),
    ]


REPRODUCERS = _reproducers()


@pytest.mark.parametrize(
    ("kind", "call", "argument"),
    REPRODUCERS,
    ids=[f"{i}-{r[0].replace(' ', '-')}" for i, r in enumerate(REPRODUCERS)],
)
def test_each_known_defect_class_is_a_named_error_within_bounds(
    kind: str, call: Callable[[], Any], argument: str
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + EXTRA_BYTES, hard))
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        if not argument:  # a valid input: it must answer, not walk every number
            hang = call()
            assert (hang.seq, hang.waiting) == (10**9, (0, 1)), hang
            return
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        message = str(info.value)
        assert argument in message and len(message) < 200 and "\n" not in message, message
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
