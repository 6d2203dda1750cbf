"""Pipeline-parallel schedules timed: when each stage computes, how long it waits, what it holds.

The simulator that checks the closed forms of ``infralens.pipeline`` (same p stages, m
microbatches, v chunks per stage). It takes each stage's order of forwards and backwards
from :mod:`infralens.pipeline_orders` (GPipe, 1F1B, interleaved 1F1B and ZB-H1) and
answers when each action starts and ends, how much of the step is bubble, and how many
microbatches' activations each stage holds at its peak. Times are exact (``Fraction``):
``forward`` and ``backward`` are one stage's time for all of its layers (F = 1, B = 2 by
default); communication is free.

>>> from infralens.pipeline import bubble_fraction
>>> from infralens.pipeline_schedules import measured_bubble, simulate
>>> gpipe = simulate("gpipe", stages=4, microbatches=8)
>>> gpipe.makespan, measured_bubble(gpipe), bubble_fraction(stages=4, microbatches=8)
(Fraction(33, 1), Fraction(3, 8), Fraction(3, 8))
>>> simulate("1f1b", stages=4, microbatches=8).peak_in_flight
(4, 3, 2, 1)
>>> measured_bubble(simulate("interleaved", stages=4, microbatches=8, chunks=2))
Fraction(3, 16)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, nonnegative_int
from infralens.pipeline import _times
from infralens.pipeline_orders import SCHEDULES, schedule_order

__all__ = ["Slot", "Timeline", "measured_bubble", "measured_idle", "simulate"]


@dataclass(frozen=True)
class Slot:
    """One action on one stage: forward ("F"), backward ("B") or, in zb-h1, the backward's
    weight-gradient part ("W"), of a microbatch on a chunk (virtual stage chunk · p + stage)."""

    start: Fraction
    end: Fraction
    kind: str
    microbatch: int
    chunk: int

    def __post_init__(self) -> None:
        check_fields(self)
        check_choice("kind", self.kind, ("F", "B", "W"))
        nonnegative_int("microbatch", self.microbatch)
        nonnegative_int("chunk", self.chunk)
        if not 0 <= self.start <= self.end:
            raise ValueError(
                f"start and end must satisfy 0 <= start <= end, got {self.start}"
            )


@dataclass(frozen=True)
class Timeline:
    """Per-stage slots of one training step, in time order (``rows[stage]``)."""

    schedule: str
    rows: tuple[tuple[Slot, ...], ...]

    def __post_init__(self) -> None:
        check_fields(self)
        check_choice("schedule", self.schedule, SCHEDULES)
        if not self.rows or not all(self.rows):
            raise ValueError("rows must hold at least one slot for every stage")

    @property
    def makespan(self) -> Fraction:
        """Time from the first action to the last one on any stage."""
        return max(row[-1].end for row in self.rows)

    def busy(self, stage: int) -> Fraction:
        """Time *stage* spends computing."""
        return sum((s.end - s.start for s in self.rows[stage]), Fraction(0))

    def idle(self, stage: int) -> Fraction:
        """Time *stage* waits inside the step: makespan minus busy time."""
        return self.makespan - self.busy(stage)

    @property
    def peak_in_flight(self) -> tuple[int, ...]:
        """Per stage, the most (microbatch, chunk) forwards whose backward has not run yet.

        Each keeps a chunk's activations (1/v of the stage's layers) alive; in zb-h1 a "B"
        frees them and the W that follows keeps less (Qi et al.)."""
        step = {"F": 1, "B": -1, "W": 0}
        return tuple(
            max(accumulate((step[s.kind] for s in row), initial=0))
            for row in self.rows
        )


def simulate(
    schedule: str,
    *,
    stages: int,
    microbatches: int,
    chunks: int = 1,
    forward: int | Fraction = 1,
    backward: int | Fraction = 2,
    weight: int | Fraction | None = None,
    rules: str = "megatron",
    group: int | None = None,
) -> Timeline:
    """Time every action of ``schedule_order``: start = max(stage free, input ready).

    The forward of microbatch i on virtual stage k waits for its forward on k - 1; its
    backward waits for the backward on k + 1 (the last virtual stage waits for its own
    forward). A chunk's forward takes forward / v and its backward backward / v. In zb-h1
    *weight* (default: half of *backward*) is the W part of the backward, B the rest.

    >>> t = simulate("gpipe", stages=2, microbatches=2)
    >>> [(str(s.start), str(s.end), s.kind + str(s.microbatch)) for s in t.rows[1]]
    [('1', '2', 'F0'), ('2', '3', 'F1'), ('3', '5', 'B0'), ('5', '7', 'B1')]
    >>> simulate("1f1b", stages=3, microbatches=1).makespan  # m = 1: no overlap at all
    Fraction(9, 1)
    >>> simulate("gpipe", stages=2, microbatches=2, forward=0)
    Traceback (most recent call last):
    ...
    ValueError: forward must be > 0, got 0

    *group* is Megatron-Core's micro-batch group size for the interleaved schedule.

    Raises what ``schedule_order`` raises; ``ValueError`` for *forward* or *backward* <= 0,
    or a *weight* outside (0, *backward*) or off zb-h1; ``TypeError`` for a float time.
    """
    order = schedule_order(
        schedule,
        stages=stages,
        microbatches=microbatches,
        chunks=chunks,
        rules=rules,
        group=group,
    )
    if weight is not None and schedule != "zb-h1":
        raise ValueError(
            f"weight applies only to the zb-h1 schedule, not {schedule!r}"
        )
    f, b, w = _times(forward, backward, weight)
    # [start:chunk-durations]
    split = w if schedule == "zb-h1" else Fraction(0)
    times = {"F": f / chunks, "B": (b - split) / chunks, "W": split / chunks}
    p, last = stages, stages * chunks - 1
    # [end:chunk-durations]
    done: dict[
        tuple[str, int, int], Fraction
    ] = {}  # (kind, microbatch, virtual stage) -> end
    rows: list[list[Slot]] = [[] for _ in range(p)]
    clock = [Fraction(0)] * p
    pending = sum(map(len, order))
    # [start:find-the-input]
    while pending:
        progressed = False
        for s in range(p):
            while len(rows[s]) < len(order[s]):
                kind, mb, c = order[s][len(rows[s])]
                k = c * p + s
                if kind == "F":
                    dep = ("F", mb, k - 1) if k > 0 else None
                elif kind == "W":
                    dep = ("B", mb, k)
                else:
                    dep = ("B", mb, k + 1) if k < last else ("F", mb, k)
                if dep is not None and dep not in done:
                    break
                # [end:find-the-input]
                # [start:clock]
                # start = max(stage free, input ready)
                start = max(clock[s], done[dep]) if dep is not None else clock[s]
                clock[s] = start + times[kind]
                done[(kind, mb, k)] = clock[s]
                rows[s].append(Slot(start, clock[s], kind, mb, c))
                pending -= 1
                progressed = True
                # [end:clock]
        if not progressed:  # pragma: no cover - every order above is deadlock-free
            raise RuntimeError(
                f"{schedule} order deadlocks: stages wait on each other"
            )
    return Timeline(schedule, tuple(tuple(r) for r in rows))


def _total(per_stage: Callable[[int], Fraction], p: int) -> Fraction:
    return sum(map(per_stage, range(p)), Fraction(0))


@typed
def measured_bubble(timeline: Timeline) -> Fraction:
    """Idle time over compute time, summed over the stages of a simulated step.

    >>> measured_bubble(simulate("gpipe", stages=1, microbatches=3))
    Fraction(0, 1)
    """
    p = len(timeline.rows)
    return _total(timeline.idle, p) / _total(timeline.busy, p)


@typed
def measured_idle(timeline: Timeline) -> Fraction:
    """Idle time over the whole step (makespan × stages), of a simulated step.

    >>> measured_idle(simulate("1f1b", stages=4, microbatches=8))
    Fraction(3, 11)
    """
    p = len(timeline.rows)
    return _total(timeline.idle, p) / (timeline.makespan * p)
