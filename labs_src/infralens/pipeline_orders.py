"""Pipeline-parallel orders: which forward and backward each stage runs, in what order.

The per-stage action lists that :mod:`infralens.pipeline_schedules` times, for GPipe,
1F1B (PipeDream-Flush), interleaved 1F1B and ZB-H1 (zero bubble: backward split into input
and weight gradients) on p stages, m microbatches and v chunks per stage. An action is
``(kind, microbatch, chunk)``: a forward ("F"), a backward ("B") or, in ZB-H1, the
backward's weight-gradient part ("W"). ``rules`` says whose interleaved rounds to follow,
Megatron-LM's (rounds of p) or PyTorch 2.13's (:func:`torch_round_size`).

>>> from infralens.pipeline_orders import schedule_order
>>> def show(row):
...     return " ".join(f"{kind}{mb}" for kind, mb, _ in row)
>>> show(schedule_order("gpipe", stages=2, microbatches=3)[0])
'F0 F1 F2 B0 B1 B2'
>>> show(schedule_order("1f1b", stages=2, microbatches=3)[0])
'F0 F1 B0 F2 B1 B2'
>>> show(schedule_order("zb-h1", stages=2, microbatches=3)[1])  # stage 1 defers one W
'F0 B0 F1 B1 W0 F2 B2 W1 W2'
"""

from __future__ import annotations

from infralens._validate import (
    check_choice,
    describe,
    divisible,
    nonnegative_int,
    positive_int,
)

__all__ = [
    "MAX_SLOTS",
    "SCHEDULES",
    "schedule_order",
    "torch_round_size",
    "warmup_forwards",
]

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
RULES = ("megatron", "torch")

MAX_SLOTS = 2**12
"""Most stages × microbatches × chunks a schedule lays out (4,096, e.g. 32 stages of 128
microbatches): every action is listed and simulated, so the work grows with the product.
Stages are at most 256 (the simulator's passes grow as their square). The
closed forms of :mod:`infralens.pipeline` have no such limits."""

Op = tuple[str, int, int]  # (kind "F", "B" or "W", microbatch, chunk)


def warmup_forwards(
    stage: int, stages: int, *, chunks: int | None = None, group: int | None = None
) -> int:
    """Forwards stage *stage* runs before its first backward, as Megatron-Core counts them.

    1F1B (*chunks* None): w = p − 1 − s. Interleaved with v *chunks* in rounds of g
    (*group*, default p): w = 2·(p − 1 − s) + (v − 1)·g. This is
    ``get_pp_rank_microbatches`` (megatron/core/pipeline_parallel/schedules.py:955-968
    at d98e8a6), which then caps w at the m·v chunk actions a stage runs; it has no
    other case (m = p included). The schedule orders and the memory count
    (:func:`infralens.pipeline_memory.in_flight`) both take w from here.

    >>> warmup_forwards(0, 4), [warmup_forwards(s, 4, chunks=2) for s in range(4)]
    (3, [10, 8, 6, 4])
    >>> warmup_forwards(4, 4)
    Traceback (most recent call last):
    ...
    ValueError: stage must be < stages: 4 >= 4
    """
    p = positive_int("stages", stages)
    if nonnegative_int("stage", stage) >= p:
        raise ValueError(f"stage must be < stages: {stage} >= {p}")
    if chunks is None:
        return p - 1 - stage
    v = positive_int("chunks", chunks)
    g = p if group is None else positive_int("group", group)
    return 2 * (p - 1 - stage) + (v - 1) * g


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

    w is :func:`warmup_forwards`, Megatron-Core's count. ``rules="megatron"``: g = p and p
    must divide m. ``rules="torch"`` (PyTorch 2.13): g = ``torch_round_size`` (also
    checked for zb-h1), and 1f1b needs m >= p.

    >>> def show(rows):
    ...     return [" ".join(f"{k}{i}.{c}" for k, i, c in row) for row in rows]
    >>> show(schedule_order("1f1b", stages=2, microbatches=3))
    ['F0.0 F1.0 B0.0 F2.0 B1.0 B2.0', 'F0.0 B0.0 F1.0 B1.0 F2.0 B2.0']
    >>> show(schedule_order("interleaved", stages=2, microbatches=3, chunks=2, rules="torch"))[1]
    'F0.0 F1.0 F2.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 B0.0 B1.0 B2.0'
    >>> show(schedule_order("interleaved", stages=2, microbatches=2, chunks=2))[1]  # m = p
    'F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0'
    >>> schedule_order("interleaved", stages=4, microbatches=6, chunks=2)
    Traceback (most recent call last):
    ...
    ValueError: microbatches must be divisible by stages: 6 % 4 = 2

    Raises ``ValueError`` for an unknown *schedule* or *rules*, a size below 1,
    chunks > 1 outside interleaved, a microbatch count the rules refuse, or more
    than :data:`MAX_SLOTS` stage × microbatch × chunk actions.
    """
    # [start:order-contract]
    name = check_choice("schedule", schedule, SCHEDULES)
    p = positive_int("stages", stages)
    m = positive_int("microbatches", microbatches)
    v = positive_int("chunks", chunks)
    mode = check_choice("rules", rules, RULES)
    if name != "interleaved" and v != 1:
        raise ValueError(f"chunks must be 1 for the {name} schedule, got {v}")
    # [end:order-contract]
    if p > MAX_SLOTS // 16:  # the simulator's passes grow with stages squared
        raise ValueError(
            f"stages must be <= {MAX_SLOTS // 16} to simulate, got {describe(p)}"
        )
    if p * m * v > MAX_SLOTS:
        raise ValueError(
            f"stages * microbatches * chunks must be <= {MAX_SLOTS} to list every action, "
            f"got {p} * {m} * {v}"
        )
    # [start:early-orders]
    if name == "1f1b" and mode == "torch" and m < p:
        raise ValueError(
            f"microbatches must be >= stages for PyTorch's 1F1B: {m} < {p}"
        )
    if name == "zb-h1":
        if mode == "torch":
            torch_round_size(
                stages=p, microbatches=m
            )  # the same check as interleaved
        return tuple(_zb_h1_row(p, m, s) for s in range(p))
    if name == "gpipe":
        flush = tuple(("F", i, 0) for i in range(m)) + tuple(
            ("B", i, 0) for i in range(m)
        )
        return (flush,) * p
    # [end:early-orders]
    # [start:round-size]
    if name == "interleaved" and mode == "megatron":
        g = p
        divisible("microbatches", m, "stages", p)
    else:
        g = (
            torch_round_size(stages=p, microbatches=m)
            if name == "interleaved"
            else m
        )
    # [end:round-size]
    # [start:warmup]
    total, out = m * v, []
    for s in range(p):
        # w = p - 1 - s for 1F1B; 2(p - 1 - s) + (v - 1)·g for the interleaved schedule
        interleaved = v if name == "interleaved" else None
        warmup = min(warmup_forwards(s, p, chunks=interleaved, group=g), total)
        # [end:warmup]
        # [start:one-forward-one-backward]
        fwd = _chunk_ops("F", range(total), g, v)
        bwd = _chunk_ops("B", range(total), g, v)
        row = fwd[:warmup]
        for k in range(total - warmup):
            row += [fwd[warmup + k], bwd[k]]
        out.append(tuple(row + bwd[total - warmup :]))
        # [end:one-forward-one-backward]
    return tuple(out)


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
