"""Diagnosing slow distributed jobs from per-rank timings, and measuring how they scale.

A trace holds, for each step and rank, the seconds spent computing, waiting
in collectives (exposed communication) and waiting for input data. The
medians over steps decide the verdict, in this order:

1. **straggler**: one rank computes more than ``straggler_ratio`` times the
   median of the others, and the others spend that difference waiting in
   collectives (a collective finishes when its slowest member arrives);
2. **input-pipeline stall**: data wait is more than ``stall_fraction`` of
   the step;
3. **communication-bound**: exposed collective time is the largest term of
   the step, larger than compute (the handbook's one meaning of "bound by");
4. otherwise **compute-bound**.

What to collect and read first when a job fails rather than slows is
:mod:`infralens.failure_checklist`.

>>> trace = load_trace(STARTER_TRACES / "straggler.json")
>>> verdict = classify(trace)
>>> verdict.kind, verdict.rank
('straggler', 2)
>>> verdict.evidence
'rank 2 computes 0.95 s against a median of 0.6 s; the others wait 0.4 s in collectives'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from statistics import median

from infralens._files import read_text
from infralens._typecheck import check_fields, typed
from infralens._validate import (
    check_choice,
    describe,
    flag,
    nonnegative_int,
    nonnegative_number,
    positive_int,
    positive_number,
    ranks_cap,
)

__all__ = [
    "MAX_TRACE_BYTES",
    "STARTER_TRACES",
    "Diagnosis",
    "RankStep",
    "Trace",
    "classify",
    "load_trace",
    "scaling_efficiency",
]

MAX_TRACE_BYTES = 64 * 2**20
"""Largest trace file :func:`load_trace` reads (64 MiB)."""

STARTER_TRACES = Path(__file__).resolve().parents[1] / "starters" / "traces"
"""The synthetic traces shipped with Lab 14 (in the source tree, beside the package)."""


@dataclass(frozen=True)
class RankStep:
    """Seconds one rank spent in one step, by activity."""

    step: int
    rank: int
    compute_s: float
    comm_s: float
    data_wait_s: float

    def __post_init__(self) -> None:
        nonnegative_int("step", self.step)
        nonnegative_int("rank", self.rank)
        for name in ("compute_s", "comm_s", "data_wait_s"):
            nonnegative_number(name, getattr(self, name))
        check_fields(self)

    @property
    def step_s(self) -> float:
        """Wall time of the step on this rank."""
        return self.compute_s + self.comm_s + self.data_wait_s


@dataclass(frozen=True)
class Trace:
    """Per-rank step timings of a job; every step has every rank."""

    world_size: int
    records: tuple[RankStep, ...]

    def __post_init__(self) -> None:
        # work and memory grow with the records, never with world_size itself
        w = ranks_cap("world_size", self.world_size)
        if isinstance(self.records, str | bytes) or not isinstance(
            self.records, Sequence
        ):
            raise TypeError(
                f"records must be a sequence of RankStep, got {describe(self.records)}"
            )
        steps: dict[int, set[int]] = {}
        for r in self.records:
            if not isinstance(r, RankStep):
                raise TypeError(f"records must hold RankStep, got {describe(r)}")
            ranks = steps.setdefault(r.step, set())
            if r.rank >= w:
                raise ValueError(
                    f"records at step {r.step} must have ranks 0..{w - 1}; unexpected [{r.rank}]"
                )
            if r.rank in ranks:
                raise ValueError(
                    f"records: rank {r.rank} appears twice at step {r.step}"
                )
            ranks.add(r.rank)
        if not steps:
            raise ValueError("records must hold at least one record")
        for step, ranks in sorted(steps.items()):
            if len(ranks) != w:
                gone = w - len(ranks)
                missing = list(islice((k for k in range(w) if k not in ranks), 8))
                more = (
                    f" and {gone - len(missing)} more"
                    if gone > len(missing)
                    else ""
                )
                raise ValueError(
                    f"records at step {step} must have ranks 0..{w - 1} once each; "
                    f"missing {missing}{more}"
                )
        check_fields(self)

    def per_rank(self, field: str) -> list[float]:
        """Median over steps of *field* for each rank, in rank order.

        Raises ``ValueError`` unless *field* is one of step_s, compute_s, comm_s, data_wait_s.
        """
        check_choice(
            "field", field, ("step_s", "compute_s", "comm_s", "data_wait_s")
        )
        by_rank: list[list[float]] = [[] for _ in range(self.world_size)]
        for r in self.records:  # one pass: linear in the records
            by_rank[r.rank].append(getattr(r, field))
        return [median(values) for values in by_rank]


@typed
def load_trace(path: str | Path) -> Trace:
    """Read a JSON trace: ``{"world_size": n, "records": [{step, rank, compute_s, ...}]}``.

    >>> load_trace(STARTER_TRACES / "input_stall.json").per_rank("data_wait_s")
    [0.4, 0.4, 0.4, 0.4]

    Raises ``ValueError`` if the file is not such a document or misses ranks.
    """
    text = read_text(path, "trace", MAX_TRACE_BYTES)
    where = describe(str(path), 80)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"trace {where} is not JSON") from None
    if (
        not isinstance(data, Mapping)
        or "records" not in data
        or "world_size" not in data
    ):
        raise ValueError(
            f"trace {where} must be a JSON object with 'world_size' and 'records'"
        )
    fields = ("step", "rank", "compute_s", "comm_s", "data_wait_s")
    if not isinstance(data["records"], list):
        raise ValueError(f"trace {where}: records must be a list")
    try:
        records = tuple(RankStep(*(r[f] for f in fields)) for r in data["records"])
    except (KeyError, TypeError):
        raise ValueError(
            f"every record in {where} needs {', '.join(fields)}"
        ) from None
    except ValueError as err:
        raise ValueError(f"trace {where}: {str(err)[:200]}") from None
    try:
        return Trace(data["world_size"], records)
    except (TypeError, ValueError) as err:
        raise ValueError(f"trace {where}: {str(err)[:200]}") from None


@dataclass(frozen=True)
class Diagnosis:
    """A verdict, the rank it points at (if any), and the evidence that decided it."""

    kind: str
    rank: int | None
    evidence: str

    def __post_init__(self) -> None:
        check_fields(self)


def classify(
    trace: Trace,
    *,
    straggler_ratio: float = 1.2,
    stall_fraction: float = 0.2,
) -> Diagnosis:
    """Classify a trace as straggler, input-pipeline stall, communication- or compute-bound.

    A step is bound by its largest term: communication-bound when exposed
    collectives take more of it than compute does, whatever their share.
    The evidence gives both shares (medians over ranks).

    >>> [classify(load_trace(STARTER_TRACES / f"{n}.json")).kind
    ...  for n in ("compute_bound", "communication_bound", "input_stall")]
    ['compute-bound', 'communication-bound', 'input-pipeline stall']
    """
    # [start:classify-medians]
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a Trace, got {type(trace).__name__}")
    positive_number("straggler_ratio", straggler_ratio)
    nonnegative_number("stall_fraction", stall_fraction)
    compute, comm = trace.per_rank("compute_s"), trace.per_rank("comm_s")
    wait, step = trace.per_rank("data_wait_s"), trace.per_rank("step_s")
    # [end:classify-medians]
    # [start:straggler-test]
    if trace.world_size > 1:
        slowest = max(range(trace.world_size), key=lambda r: compute[r])
        others = [compute[r] for r in range(trace.world_size) if r != slowest]
        typical = median(others)
        waiting = median(comm[r] for r in range(trace.world_size) if r != slowest)
        # straggler: c_slowest > ratio · median(c_others),
        # and the others wait longer than it
        if compute[slowest] > straggler_ratio * typical and waiting > comm[slowest]:
            return Diagnosis(
                "straggler",
                slowest,
                f"rank {slowest} computes {round(compute[slowest], 3)} s "
                f"against a median of {round(typical, 3)} s; "
                f"the others wait {round(waiting, 3)} s in collectives",
            )
    # [end:straggler-test]
    # [start:input-stall]
    if not any(step):
        raise ValueError("trace records all take 0 s: nothing to classify")
    step = [
        s or 1.0 for s in step
    ]  # an idle rank (0 s) contributes share 0, not 0/0
    # share = seconds / step on each rank, median over ranks:
    # data wait first, then collectives
    share_wait = median(w / s for w, s in zip(wait, step, strict=True))
    if share_wait > stall_fraction:
        return Diagnosis(
            "input-pipeline stall",
            None,
            f"data wait is {share_wait:.0%} of the step",
        )
    # [end:input-stall]
    # [start:bound-by]
    share_comm = median(c / s for c, s in zip(comm, step, strict=True))
    share_compute = median(c / s for c, s in zip(compute, step, strict=True))
    shares = (
        f"exposed collectives take {share_comm:.0%}, compute {share_compute:.0%}"
    )
    # bound by the largest term: compute against exposed collectives
    if share_comm > share_compute:
        return Diagnosis("communication-bound", None, shares)
    return Diagnosis("compute-bound", None, shares)
    # [end:bound-by]


def scaling_efficiency(
    step_seconds: Mapping[int, float], *, weak: bool = True
) -> dict[int, float]:
    """Efficiency at each world size relative to the smallest one measured.

    Weak scaling (fixed work per GPU): ``t(n0) / t(n)``. Strong scaling (fixed
    total work): ``t(n0) * n0 / (t(n) * n)``.

    >>> scaling_efficiency({8: 1.0, 16: 1.05, 64: 1.4})
    {8: 1.0, 16: 0.952, 64: 0.714}
    >>> scaling_efficiency({8: 4.0, 16: 2.2}, weak=False)
    {8: 1.0, 16: 0.909}

    Raises ``ValueError`` for an empty mapping or a non-positive time.
    """
    if not step_seconds:
        raise ValueError("step_seconds must hold at least one world size")
    if not isinstance(step_seconds, Mapping):
        raise TypeError(
            f"step_seconds must be a mapping, got {type(step_seconds).__name__}"
        )
    flag("weak", weak)
    for n, t in step_seconds.items():
        positive_int("step_seconds key (world size)", n)
        positive_number(f"step_seconds[{describe(n)}]", t)
    base = min(step_seconds)
    t0 = step_seconds[base]
    return {
        n: round(t0 / t if weak else t0 * base / (t * n), 3)
        for n, t in sorted(step_seconds.items())
    }
