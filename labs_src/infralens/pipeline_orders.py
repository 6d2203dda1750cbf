"""Pipeline-parallel orders: which forward and backward each stage runs, in what order.

The per-stage action lists that :mod:`infralens.pipeline_schedules` times, for GPipe,
1F1B (PipeDream-Flush), interleaved 1F1B and ZB-H1 (zero bubble: backward split into input
and weight gradients) on p stages, m microbatches and v chunks per stage. An action is
``(kind, microbatch, chunk)``: a forward ("F"), a backward ("B") or, in ZB-H1, the
backward's weight-gradient part ("W"). ``rules`` says whose interleaved rounds to follow,
Megatron-LM's (groups of N, p by default) or PyTorch 2.13's (:func:`torch_round_size`).

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

from infralens._typecheck import typed
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
    "megatron_group_size",
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
    rounds. Megatron-LM uses groups of N = p by default (:func:`megatron_group_size`).

    >>> [torch_round_size(stages=4, microbatches=m) for m in (8, 10)]
    [4, 5]
    >>> torch_round_size(stages=4, microbatches=3)   # fewer than stages: one round
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


@typed
def megatron_group_size(
    *, stages: int, microbatches: int, group: int | None = None
) -> int:
    """Micro-batches per group in Megatron-Core's interleaved schedule.

    ``--microbatch-group-size-per-virtual-pipeline-stage`` N runs N micro-batches
    through a chunk before moving on; N defaults to p and must lie in [p, m], and the
    last group's m mod N micro-batches must be 0 or at least p (schedules.py at d98e8a6,
    lines 1160-1180). With N = p that is "p divides m"; other N admit other m.

    >>> megatron_group_size(stages=4, microbatches=8)
    4
    >>> megatron_group_size(stages=4, microbatches=10, group=5)   # m = 10 on 4 stages
    5
    >>> [n for n in range(4, 11) if _megatron_accepts(4, 10, n)]
    [5, 6, 10]
    >>> megatron_group_size(stages=4, microbatches=10)
    Traceback (most recent call last):
    ...
    ValueError: microbatches must be divisible by stages: 10 % 4 = 2

    Raises ``ValueError`` for N outside [p, m] or a last group of 1 to p - 1.
    """
    p = positive_int("stages", stages)
    m = positive_int("microbatches", microbatches)
    if group is None:
        divisible("microbatches", m, "stages", p)
        return p
    n = positive_int("group", group)
    if not _megatron_accepts(p, m, n):
        raise ValueError(
            f"group must lie in [stages, microbatches] = [{p}, {m}] and leave "
            f"microbatches % group = 0 or >= {p}, got group {n}"
        )
    return n


def _megatron_accepts(p: int, m: int, n: int) -> bool:
    """Megatron-Core's two checks on the group size N."""
    return p <= n <= m and (m % n == 0 or m % n >= p)


def schedule_order(
    schedule: str,
    *,
    stages: int,
    microbatches: int,
    chunks: int = 1,
    rules: str = "megatron",
    group: int | None = None,
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

    w is :func:`warmup_forwards`, Megatron-Core's count. ``rules="megatron"``: g = *group*
    (default p; :func:`megatron_group_size`); a last group shorter than g runs every
    chunk for its micro-batches, as Megatron-Core's ``get_schedule_table`` does.
    ``rules="torch"`` (PyTorch 2.13): g = ``torch_round_size`` (also
    checked for zb-h1), and 1f1b needs m >= p.

    >>> def show(rows):
    ...     return [" ".join(f"{k}{i}.{c}" for k, i, c in row) for row in rows]
    >>> show(schedule_order("1f1b", stages=2, microbatches=3))
    ['F0.0 F1.0 B0.0 F2.0 B1.0 B2.0', 'F0.0 B0.0 F1.0 B1.0 F2.0 B2.0']
    >>> two = {"stages": 2, "chunks": 2}
    >>> show(schedule_order("interleaved", microbatches=3, rules="torch", **two))[1]
    'F0.0 F1.0 F2.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 B0.0 B1.0 B2.0'
    >>> show(schedule_order("interleaved", microbatches=2, **two))[1]   # m = p
    'F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0'
    >>> fwd = [op for op in schedule_order("interleaved", stages=2, microbatches=5,
    ...                                    chunks=2, group=3)[0] if op[0] == "F"]
    >>> " ".join(str(i) for _, i, _ in fwd)    # Megatron-Core's own example, N = 3
    '0 1 2 0 1 2 3 4 3 4'
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
        # N in [p, m]; the last group m mod N must be 0 or >= p
        g = megatron_group_size(stages=p, microbatches=m, group=group)
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
        fwd = _chunk_ops("F", m, g, v)
        bwd = _chunk_ops("B", m, g, v)
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


def _chunk_ops(kind: str, m: int, g: int, v: int) -> list[Op]:
    """Megatron-Core's schedule table: each group of g microbatches (the last one
    shorter) runs through chunk 0, 1, ..., v - 1; backwards visit the chunks reversed."""
    ops: list[Op] = []
    for first in range(0, m, g):
        last = m if first + g >= m else first + g  # the last group takes the rest
        for c in range(v):
            chunk = c if kind == "F" else v - 1 - c
            ops += [(kind, i, chunk) for i in range(first, last)]
    return ops
