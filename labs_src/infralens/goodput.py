"""Goodput: what failures cost a synchronous job, and how often to checkpoint it.

A synchronous job stops when any of its GPUs fails, so with independent
failures its mean time between failures is the per-GPU one divided by the
GPU count. Each failure costs the restart plus the work since the last
checkpoint; each checkpoint costs the time the job is paused to take it.
Young (1974) balanced the two to first order; Daly (2006) refined the rule
and gave the exact expected run time under Poisson failures, which
:func:`goodput` evaluates.

Llama 3 405B: 466 interruptions in a 54-day snapshot on 16,384 GPUs
(Dubey et al. 2024, section 3.3.4 and Table 5), one every 2.78 hours:

>>> mtbf = observed_mtbf_seconds(interruptions=466, seconds=54 * 86_400)
>>> round(mtbf / 3600, 2)
2.78
>>> round(optimal_checkpoint_interval(checkpoint_seconds=60, mtbf_seconds=mtbf) / 60, 1)
17.6
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infralens._typecheck import check_fields
from infralens._validate import nonnegative_number, positive_int, positive_number

__all__ = [
    "MAX_QUANTITY",
    "CheckpointCost",
    "checkpoint_cost",
    "daly_interval",
    "expected_loss_per_failure",
    "goodput",
    "job_mtbf_seconds",
    "max_restart_seconds",
    "observed_mtbf_seconds",
    "optimal_checkpoint_interval",
    "young_interval",
]


MAX_QUANTITY = 10**18
"""Largest seconds, bytes or bytes per second any argument may give (10**18 s is 30
billion years); one that divides or multiplies is at least 1e-9. Products and quotients of two such
values stay far inside a float, so every result is finite and none underflows."""


def _bounded(name: str, value: float) -> float:
    if value > MAX_QUANTITY:
        raise ValueError(f"{name} must be <= 10**18, got {value:.3g}")
    return value


def _pos(name: str, value: object) -> float:
    v = _bounded(name, float(positive_number(name, value)))
    if v < 1e-9:  # a divisor or factor this small underflows its products to 0
        raise ValueError(f"{name} must be >= 1e-9, got {v:.3g}")
    return v


def _nonneg(name: str, value: object) -> float:
    return _bounded(name, float(nonnegative_number(name, value)))


def observed_mtbf_seconds(*, interruptions: int, seconds: float) -> float:
    """Mean time between interruptions of a job: observed time over the count.

    >>> observed_mtbf_seconds(interruptions=4, seconds=3600)
    900.0

    Raises ``ValueError`` if *interruptions* < 1 or *seconds* <= 0.
    """
    return _pos("seconds", seconds) / positive_int("interruptions", interruptions)


def job_mtbf_seconds(*, gpus: int, gpu_mtbf_seconds: float) -> float:
    """MTBF of a job that stops when any of *gpus* fails: ``M_gpu / N``.

    Independent failures at a constant rate add up: N GPUs fail N times as
    often as one.

    >>> job_mtbf_seconds(gpus=1, gpu_mtbf_seconds=3600)
    3600.0
    >>> job_mtbf_seconds(gpus=16_384, gpu_mtbf_seconds=16_384 * 3600)
    3600.0

    Raises ``ValueError`` if *gpus* < 1 or *gpu_mtbf_seconds* <= 0.
    """
    return _pos("gpu_mtbf_seconds", gpu_mtbf_seconds) / positive_int("gpus", gpus)


def young_interval(*, checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """Young's first-order optimum: ``sqrt(2 * delta * M)`` seconds of work per checkpoint.

    It minimises the first-order waste ``delta / tau + tau / (2 M)``: the
    checkpoint cost spread over the interval plus, per failure, half an
    interval of lost work.

    >>> young_interval(checkpoint_seconds=300, mtbf_seconds=6 * 3600) / 60
    60.0

    Raises ``ValueError`` if either argument is <= 0.
    """
    delta, m = (
        _pos("checkpoint_seconds", checkpoint_seconds),
        _pos("mtbf_seconds", mtbf_seconds),
    )
    return math.sqrt(2 * delta * m)


def daly_interval(*, checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """Daly's higher-order optimum (2006), the one :func:`optimal_checkpoint_interval` returns.

    For ``delta < 2 M``::

        tau = sqrt(2 delta M) * (1 + sqrt(delta / (2 M)) / 3 + (delta / (2 M)) / 9) - delta

    and ``tau = M`` otherwise. It subtracts the checkpoint time Young counts
    as work and corrects for failures during checkpoints; for ``delta << M``
    the two agree. Daly's own examples (delta = 5 min, R = 10 min) give 117
    and 57 minutes for M = 24 h and 6 h:

    >>> [round(daly_interval(checkpoint_seconds=300, mtbf_seconds=h * 3600) / 60)
    ...  for h in (24, 6)]
    [117, 57]
    >>> daly_interval(checkpoint_seconds=7200, mtbf_seconds=3600)    # checkpoint >= 2 M
    3600.0

    Raises ``ValueError`` if either argument is <= 0.
    """
    # [start:daly-correction]
    delta, m = (
        _pos("checkpoint_seconds", checkpoint_seconds),
        _pos("mtbf_seconds", mtbf_seconds),
    )
    if delta >= 2 * m:
        return m
    x = delta / (2 * m)
    # Young's sqrt(2 delta M), corrected by (1 + sqrt(x)/3 + x/9),
    # minus the checkpoint itself
    return math.sqrt(2 * delta * m) * (1 + math.sqrt(x) / 3 + x / 9) - delta
    # [end:daly-correction]


def optimal_checkpoint_interval(
    *, checkpoint_seconds: float, mtbf_seconds: float
) -> float:
    """Seconds of work between checkpoints that maximise goodput: Daly's estimate.

    See :func:`~infralens.goodput.daly_interval`;
    :func:`~infralens.goodput.young_interval` gives the first-order
    ``sqrt(2 * delta * M)``.

    >>> tau = optimal_checkpoint_interval(checkpoint_seconds=300, mtbf_seconds=900)
    >>> round(tau / 60, 1)
    9.1

    Raises ``ValueError`` if either argument is <= 0.
    """
    return daly_interval(
        checkpoint_seconds=checkpoint_seconds, mtbf_seconds=mtbf_seconds
    )


def expected_loss_per_failure(
    *, interval_seconds: float, checkpoint_seconds: float, restart_seconds: float
) -> float:
    """Expected seconds one failure costs: ``(tau + delta) / 2 + R``.

    A failure strikes on average halfway through a compute-plus-checkpoint
    segment, and the restart (reschedule, initialise, load) comes on top.

    >>> expected_loss_per_failure(interval_seconds=1800, checkpoint_seconds=0,
    ...                           restart_seconds=600)
    1500.0

    Raises ``ValueError`` if *interval_seconds* <= 0 or a cost is negative.
    """
    tau = _pos("interval_seconds", interval_seconds)
    delta = _nonneg("checkpoint_seconds", checkpoint_seconds)
    return (tau + delta) / 2 + _nonneg("restart_seconds", restart_seconds)


def goodput(
    *,
    interval_seconds: float,
    checkpoint_seconds: float,
    restart_seconds: float,
    mtbf_seconds: float,
) -> float:
    """Fraction of wall time spent on work that is kept (Daly 2006, Poisson failures).

    Expected wall time per ``tau`` seconds of kept work is
    ``M * exp(R / M) * (exp((tau + delta) / M) - 1)``; goodput is ``tau``
    over that. To first order it is ``1 - delta / tau - ((tau + delta) / 2 + R) / M``.

    >>> # failures never happen
    >>> round(goodput(interval_seconds=1800, checkpoint_seconds=0, restart_seconds=0,
    ...               mtbf_seconds=10**12), 6)
    1.0
    >>> round(goodput(interval_seconds=3600, checkpoint_seconds=60, restart_seconds=600,
    ...               mtbf_seconds=24 * 3600), 3)
    0.956

    Raises ``ValueError`` if *interval_seconds* or *mtbf_seconds* <= 0 or a cost is negative.
    """
    tau = _pos("interval_seconds", interval_seconds)
    delta = _nonneg("checkpoint_seconds", checkpoint_seconds)
    r, m = (
        _nonneg("restart_seconds", restart_seconds),
        _pos("mtbf_seconds", mtbf_seconds),
    )
    # In logarithms, so that costs far beyond the MTBF give a goodput near 0, not an overflow.
    return math.exp(
        math.log(tau) - math.log(m) - r / m - _log_expm1((tau + delta) / m)
    )


def _log_expm1(x: float) -> float:
    """``log(exp(x) - 1)`` for x > 0 without overflow: ``x + log1p(-exp(-x))``."""
    return x + math.log1p(-math.exp(-x)) if x > 1 else math.log(math.expm1(x))


def max_restart_seconds(
    *, target: float, checkpoint_seconds: float, mtbf_seconds: float
) -> float:
    """Longest restart that still reaches goodput *target* at the optimal interval.

    Solves :func:`goodput` for ``R`` with ``tau`` from
    :func:`optimal_checkpoint_interval`; a negative result means the
    checkpoint cost alone already misses the target.

    >>> r = max_restart_seconds(target=0.9, checkpoint_seconds=1, mtbf_seconds=10**6)
    >>> round(r / 3600, 1)
    28.9

    Raises ``ValueError`` unless 0 < *target* < 1, or as :func:`goodput` does.
    """
    g = _pos("target", target)
    if g >= 1:
        raise ValueError(f"target must be < 1, got {target}")
    delta, m = (
        _pos("checkpoint_seconds", checkpoint_seconds),
        _pos("mtbf_seconds", mtbf_seconds),
    )
    tau = daly_interval(checkpoint_seconds=delta, mtbf_seconds=m)
    return m * (math.log(tau) - math.log(g * m) - _log_expm1((tau + delta) / m))


@dataclass(frozen=True)
class CheckpointCost:
    """Seconds a checkpoint pauses training, and seconds it keeps writing in the background."""

    blocking_s: float
    background_s: float

    def __post_init__(self) -> None:
        check_fields(self)


def checkpoint_cost(
    *,
    total_bytes: int,
    gpus: int,
    storage_bytes_per_s: float,
    staging_bytes_per_s: float | None = None,
) -> CheckpointCost:
    """Pause and background time of one checkpoint of *total_bytes*, sharded over *gpus*.

    A synchronous save pauses for ``total_bytes / storage_bytes_per_s`` (the
    storage's aggregate write bandwidth). An asynchronous save
    (``torch.distributed.checkpoint.async_save``) pauses only while each GPU
    copies its shard to host memory, ``total_bytes / gpus /
    staging_bytes_per_s``, and writes to storage while training continues; it
    hides the write only if the next checkpoint starts after it ends.

    >>> checkpoint_cost(total_bytes=4 * 10**12, gpus=1000, storage_bytes_per_s=10**12)
    CheckpointCost(blocking_s=4.0, background_s=0.0)
    >>> checkpoint_cost(total_bytes=4 * 10**12, gpus=1000, storage_bytes_per_s=10**12,
    ...                 staging_bytes_per_s=2 * 10**10)
    CheckpointCost(blocking_s=0.2, background_s=4.0)

    Raises ``ValueError`` for a negative size, *gpus* < 1 or a bandwidth <= 0.
    """
    nbytes = _nonneg("total_bytes", total_bytes)
    n = positive_int("gpus", gpus)
    write = nbytes / _pos("storage_bytes_per_s", storage_bytes_per_s)
    if staging_bytes_per_s is None:
        return CheckpointCost(write, 0.0)
    return CheckpointCost(
        nbytes / n / _pos("staging_bytes_per_s", staging_bytes_per_s), write
    )
