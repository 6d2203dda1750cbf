"""Pipeline-parallel schedules: which stage computes what when, and how long it waits.

The simulator that checks the closed forms of ``infralens.pipeline`` (same p stages, m
microbatches, v chunks per stage). It answers, for GPipe, 1F1B (PipeDream-Flush),
interleaved 1F1B and ZB-H1 (zero bubble: backward split into input and weight gradients),
in what order each stage runs its forwards and backwards, when each starts and ends, how
much of the step is bubble, and how many microbatches' activations each stage holds at its
peak. Times are exact (``Fraction``): ``forward`` and ``backward`` are one stage's time for
all of its layers (F = 1, B = 2 by default); communication is free.

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
from infralens._validate import check_choice, describe, divisible, nonnegative_int, positive_int
from infralens.pipeline import _times

__all__ = [
    "MAX_SLOTS",
    "SCHEDULES",
    "Slot",
    "Timeline",
    "measured_bubble",
    "measured_idle",
    "schedule_order",
    "simulate",
    "torch_round_size",
]

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
RULES = ("megatron", "torch")

MAX_SLOTS = 2**12
"""Most stages × microbatches × chunks a schedule lays out (4,096, e.g. 32 stages of 128
microbatches): every action is listed and simulated, so the work grows with the product.
Stages are at most 256 (the simulator's passes grow as their square). The
closed forms of :mod:`infralens.pipeline` have no such limits."""

Op = tuple[str, int, int]  # (kind "F", "B" or "W", microbatch, chunk)


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
            raise ValueError(f"start and end must satisfy 0 <= start <= end, got {self.start}")


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
        return tuple(max(accumulate((step[s.kind] for s in row), initial=0)) for row in self.rows)


def torch_round_size(*, stages: int, microbatches: int) -> int:
    """Microbatches per round in PyTorch 2.13's ``ScheduleInterleaved1F1B``.

    rounds = max(1, m // p); the round size is m / rounds, and m must be a multiple of
    rounds. Megatron-LM instead always uses rounds of p and requires m to be a multiple of p.

    >>> torch_round_size(stages=4, microbatches=8), torch_round_size(stages=4, microbatches=10)
    (4, 5)
    >>> torch_round_size(stages=4, microbatches=3)  # fewer microbatches than stages: one round
    3
    >>> torch_round_size(stages=4, microbatches=9)
    Traceback (most recent call last):
    ...
    ValueError: microbatches must be a multiple of max(1, 9 // 4) = 2, got 9
    """
    p = positive_int("stages", stages)
    m = positive_int("microbatches", microbatches)
    rounds = max(1, m // p)
    if m % rounds:
        raise ValueError(
            f"microbatches must be a multiple of max(1, {m} // {p}) = {rounds}, got {m}"
        )
    return m // rounds


def schedule_order(
    schedule: str,
    *,
    stages: int,
    microbatches: int,
    chunks: int = 1,
    rules: str = "megatron",
) -> tuple[tuple[Op, ...], ...]:
    """The order in which each stage runs its actions: ``(kind, microbatch, chunk)``.

    - gpipe: all m forwards, then all m backwards.
    - 1f1b: w = min(p - 1 - s, m) warm-up forwards on stage s, then one forward and one
      backward in turn, then the w backwards left.
    - interleaved (Narayanan et al. 2021, §2.2): the same over m·v chunk actions with
      w = min(2(p - 1 - s) + (v - 1)·g, m·v); forward k runs chunk (k // g) mod v,
      backward k chunk v - 1 - (k // g) mod v, in rounds of g microbatches.
    - zb-h1 (Qi et al. 2024): 1f1b with each backward split into B (input gradient) and
      W (weight gradient); stage s runs its first s Bs without their W and runs the
      deferred Ws last (PyTorch 2.13's ZB1P order with one stage per rank).

    ``rules="megatron"``: g = p, p must divide m, and the interleaved warm-up is every
    forward when m = p. ``rules="torch"`` (PyTorch 2.13): g = ``torch_round_size`` (also
    checked for zb-h1), and 1f1b needs m >= p.

    >>> def show(rows):
    ...     return [" ".join(f"{k}{i}.{c}" for k, i, c in row) for row in rows]
    >>> show(schedule_order("1f1b", stages=2, microbatches=3))
    ['F0.0 F1.0 B0.0 F2.0 B1.0 B2.0', 'F0.0 B0.0 F1.0 B1.0 F2.0 B2.0']
    >>> show(schedule_order("interleaved", stages=2, microbatches=2, chunks=2, rules="torch"))[1]
    'F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0'
    >>> show(schedule_order("interleaved", stages=2, microbatches=2, chunks=2))[1]  # m = p
    'F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0'
    >>> schedule_order("interleaved", stages=4, microbatches=6, chunks=2)
    Traceback (most recent call last):
    ...
    ValueError: microbatches must be divisible by stages: 6 % 4 = 2

    Raises ``ValueError`` for an unknown *schedule* or *rules*, a size below 1,
    chunks > 1 outside interleaved, a microbatch count the rules refuse, or more
    than :data:`MAX_SLOTS` stage × microbatch × chunk actions.
    """
    name = check_choice("schedule", schedule, SCHEDULES)
    p = positive_int("stages", stages)
    m = positive_int("microbatches", microbatches)
    v = positive_int("chunks", chunks)
    mode = check_choice("rules", rules, RULES)
    if name != "interleaved" and v != 1:
        raise ValueError(f"chunks must be 1 for the {name} schedule, got {v}")
    if p > MAX_SLOTS // 16:  # the simulator's passes grow with stages squared
        raise ValueError(f"stages must be <= {MAX_SLOTS // 16} to simulate, got {describe(p)}")
    if p * m * v > MAX_SLOTS:
        raise ValueError(
            f"stages * microbatches * chunks must be <= {MAX_SLOTS} to list every action, "
            f"got {p} * {m} * {v}"
        )
    if name == "1f1b" and mode == "torch" and m < p:
        raise ValueError(f"microbatches must be >= stages for PyTorch's 1F1B: {m} < {p}")
    if name == "zb-h1":
        if mode == "torch":
            torch_round_size(stages=p, microbatches=m)  # the same check as interleaved
        return tuple(_zb_h1_row(p, m, s) for s in range(p))
    if name == "gpipe":
        flush = tuple(("F", i, 0) for i in range(m)) + tuple(("B", i, 0) for i in range(m))
        return (flush,) * p
    if name == "interleaved" and mode == "megatron":
        g = p
        divisible("microbatches", m, "stages", p)
    else:
        g = torch_round_size(stages=p, microbatches=m) if name == "interleaved" else m
    # [start:warmup]
    total, out = m * v, []
    for s in range(p):
        # w = p - 1 - s for 1F1B; 2(p - 1 - s) + (v - 1)·g for the interleaved schedule
        warmup = min((2 if name == "interleaved" else 1) * (p - 1 - s) + (v - 1) * g, total)
        if name == "interleaved" and mode == "megatron" and m == p:
            warmup = total  # Megatron runs all forwards first when m = p
        fwd = _chunk_ops("F", range(total), g, v)
        bwd = _chunk_ops("B", range(total), g, v)
        row = fwd[:warmup]
        for k in range(total - warmup):
            row += [fwd[warmup + k], bwd[k]]
        out.append(tuple(row + bwd[total - warmup :]))
    return tuple(out)
    # [end:warmup]


def _zb_h1_row(p: int, m: int, s: int) -> tuple[Op, ...]:
    """Stage s of ZB-H1: 1F1B's F and B, each W after its B once s Bs have run."""
    warmup = min(p - 1 - s, m)
    row: list[Op] = [("F", i, 0) for i in range(warmup)]
    w = 0
    for k in range(m):  # k-th backward
        row += [("F", warmup + k, 0)] if k < m - warmup else []
        row.append(("B", k, 0))
        if k >= s:
            row.append(("W", w, 0))
            w += 1
    return tuple(row + [("W", i, 0) for i in range(w, m)])


def _chunk_ops(kind: str, steps: range, g: int, v: int) -> list[Op]:
    """The kind's k-th action runs chunk (k // g) mod v (reversed for "B"), next microbatch."""
    count = [0] * v
    ops = []
    for k in steps:
        chunk = (k // g) % v if kind == "F" else v - 1 - (k // g) % v
        ops.append((kind, count[chunk], chunk))
        count[chunk] += 1
    return ops


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

    Raises what ``schedule_order`` raises; ``ValueError`` for *forward* or *backward* <= 0,
    or a *weight* outside (0, *backward*) or off zb-h1; ``TypeError`` for a float time.
    """
    order = schedule_order(
        schedule, stages=stages, microbatches=microbatches, chunks=chunks, rules=rules
    )
    if weight is not None and schedule != "zb-h1":
        raise ValueError(f"weight applies only to the zb-h1 schedule, not {schedule!r}")
    f, b, w = _times(forward, backward, weight)
    # [start:clock]
    split = w if schedule == "zb-h1" else Fraction(0)
    times = {"F": f / chunks, "B": (b - split) / chunks, "W": split / chunks}
    p, last = stages, stages * chunks - 1
    done: dict[tuple[str, int, int], Fraction] = {}  # (kind, microbatch, virtual stage) -> end
    rows: list[list[Slot]] = [[] for _ in range(p)]
    clock = [Fraction(0)] * p
    pending = sum(map(len, order))
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
                # start = max(stage free, input ready)
                start = max(clock[s], done[dep]) if dep is not None else clock[s]
                clock[s] = start + times[kind]
                done[(kind, mb, k)] = clock[s]
                rows[s].append(Slot(start, clock[s], kind, mb, c))
                pending -= 1
                progressed = True
        if not progressed:  # pragma: no cover - every order above is deadlock-free
            raise RuntimeError(f"{schedule} order deadlocks: stages wait on each other")
    return Timeline(schedule, tuple(tuple(r) for r in rows))
    # [end:clock]


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
