"""Overlap and launch: what a collective leaves exposed, and what kernel launches cost a step.

A collective that runs beside compute costs the step only the part that
sticks out of its compute window. This module answers three questions with
exact times (seconds as ``Fraction``):

- how much of a collective a compute window hides (:func:`exposed`), and how
  much a tensor-parallel all-gather or reduce-scatter leaves when it is split
  into a ring exchange that runs beside the pieces of its GEMM, as Transformer
  Engine's userbuffers and PyTorch's async TP do (:func:`decomposed_exposed`);
- how much of a bucketed parameter all-gather issued ahead of the forward
  pass (Megatron-Core's ``overlap_param_gather``) is left (:func:`gather_ahead`);
- how long a step of many small kernels takes when the CPU cannot launch
  them as fast as the GPU runs them (:func:`launch_timeline`), the cost that
  CUDA graphs remove.

>>> exposed(comm_s=3, window_s=2)
Fraction(1, 1)
>>> decomposed_exposed(comm_s=3, gemm_s=4, tp=4)      # 3 of 4 GEMM shards hide it
Fraction(0, 1)
>>> launch_timeline([1] * 10, launch_s=2).idle_s      # launches every 2, kernels of 1
Fraction(11, 1)

The per-launch cost is an argument with no default: it depends on the CPU,
the driver and the framework, and is read off a profile (the spacing of
``cudaLaunchKernel`` calls on the CPU timeline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import typed
from infralens._validate import nonnegative_number, positive_int

__all__ = [
    "LaunchTimeline",
    "decomposed_exposed",
    "exposed",
    "gather_ahead",
    "launch_timeline",
]

Seconds = int | Fraction


def _seconds(name: str, value: object) -> Fraction:
    return Fraction(nonnegative_number(name, value))


def _list(name: str, values: Sequence[Seconds]) -> list[Fraction]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of times in seconds")
    return [_seconds(f"{name}[{i}]", v) for i, v in enumerate(values)]


def exposed(*, comm_s: Seconds, window_s: Seconds) -> Fraction:
    """Time a collective adds to the step when it runs beside *window_s* of compute.

    ``max(0, comm_s - window_s)``: the collective starts with the window and
    whatever outlasts it is waited for. It assumes the compute does not slow
    down while the collective takes SMs and memory bandwidth beside it; a
    profile that shows longer GEMMs under overlap has to add that back.

    >>> exposed(comm_s=Fraction(5, 2), window_s=4)
    Fraction(0, 1)
    >>> exposed(comm_s=4, window_s=0)                  # nothing to hide behind
    Fraction(4, 1)
    >>> exposed(comm_s=-1, window_s=0)
    Traceback (most recent call last):
    ...
    ValueError: comm_s must be >= 0, got -1

    Raises ``ValueError`` for a negative time, ``TypeError`` for a non-number.
    """
    return max(
        Fraction(0), _seconds("comm_s", comm_s) - _seconds("window_s", window_s)
    )


def decomposed_exposed(*, comm_s: Seconds, gemm_s: Seconds, tp: int) -> Fraction:
    """Exposed time of a TP all-gather (or reduce-scatter) split into a ring beside its GEMM.

    The collective becomes ``tp - 1`` point-to-point steps of ``comm_s / (tp - 1)``
    and the GEMM ``tp`` shards of ``gemm_s / tp``. Each step's transfer runs
    beside one shard's GEMM; one shard has no transfer beside it (the local
    shard of an all-gather goes first, the last partial sum of a
    reduce-scatter goes last). With every step paying the slower of the two:

        total   = gemm_s / tp + (tp - 1) · max(gemm_s / tp, comm_s / (tp - 1))
        exposed = total - gemm_s = max(0, comm_s - gemm_s · (tp - 1) / tp)

    >>> decomposed_exposed(comm_s=3, gemm_s=2, tp=2)      # hides behind one half
    Fraction(2, 1)
    >>> decomposed_exposed(comm_s=3, gemm_s=2, tp=8)
    Fraction(5, 4)
    >>> decomposed_exposed(comm_s=3, gemm_s=2, tp=1)      # tp = 1: no collective to hide
    Fraction(0, 1)
    >>> decomposed_exposed(comm_s=3, gemm_s=2, tp=0)
    Traceback (most recent call last):
    ...
    ValueError: tp must be >= 1, got 0

    Raises ``ValueError`` for a negative time or *tp* < 1.
    """
    c, g = _seconds("comm_s", comm_s), _seconds("gemm_s", gemm_s)
    t = positive_int("tp", tp)
    if t == 1:
        return Fraction(0)
    # total = g/t + (t-1) · max(g/t, c/(t-1)); exposed = total - g
    total = g / t + (t - 1) * max(g / t, c / (t - 1))
    return total - g


@typed
def gather_ahead(
    forward_s: Sequence[Seconds], gather_s: Sequence[Seconds]
) -> Fraction:
    """Exposed time of per-bucket parameter all-gathers issued one bucket ahead of the forward.

    Bucket ``i``'s forward starts when bucket ``i - 1``'s forward has ended and
    its own all-gather is done; the all-gather of bucket ``i + 1`` is issued
    when bucket ``i``'s forward starts, after the previous all-gather on the
    same stream (the first one has nothing to hide behind). This is how
    Megatron-Core's distributed optimizer with ``overlap_param_gather``
    dispatches the next bucket's all-gather from the current bucket's
    forward pre-hook. Returns ``forward end - sum(forward_s)``.

    >>> gather_ahead([2, 2, 2], [1, 1, 1])             # only the first gather shows
    Fraction(1, 1)
    >>> gather_ahead([1, 1, 1], [2, 2, 2])             # gathers slower than compute
    Fraction(4, 1)
    >>> gather_ahead([], [])
    Fraction(0, 1)
    >>> gather_ahead([1], [1, 1])
    Traceback (most recent call last):
    ...
    ValueError: forward_s and gather_s must have one entry per bucket: 1 != 2

    Raises ``ValueError`` if the lists differ in length or hold a negative time.
    """
    fwd, gat = _list("forward_s", forward_s), _list("gather_s", gather_s)
    if len(fwd) != len(gat):
        raise ValueError(
            f"forward_s and gather_s must have one entry per bucket: {len(fwd)} != {len(gat)}"
        )
    if not fwd:
        return Fraction(0)
    gathered = gat[0]  # the first all-gather runs alone
    clock = Fraction(0)
    for i, f in enumerate(fwd):
        start = max(clock, gathered)
        if i + 1 < len(
            gat
        ):  # issued at this bucket's pre-hook, after the previous gather
            gathered = max(start, gathered) + gat[i + 1]
        clock = start + f
    return clock - sum(fwd, start=Fraction(0))


@dataclass(frozen=True)
class LaunchTimeline:
    """One stream's step when the CPU launches each kernel and the GPU runs them in order.

    ``step_s`` is when the last kernel ends; ``busy_s`` the kernels' own time;
    ``idle_s = step_s - busy_s`` the time the GPU waited for a launch.
    """

    step_s: Fraction
    busy_s: Fraction

    @property
    def idle_s(self) -> Fraction:
        """GPU time lost waiting for the CPU to launch the next kernel."""
        return self.step_s - self.busy_s

    @property
    def launch_share(self) -> Fraction:
        """``idle_s / step_s``: the share of the step that launch overhead costs."""
        return self.idle_s / self.step_s if self.step_s else Fraction(0)


@typed
def launch_timeline(
    kernel_s: Sequence[Seconds], *, launch_s: Seconds
) -> LaunchTimeline:
    """Replay a stream of kernels launched one by one from a CPU thread that never waits.

    Launch ``i`` is issued at ``(i + 1) · launch_s`` (the CPU spends *launch_s*
    on each), and kernel ``i`` starts at the later of its launch and the end
    of kernel ``i - 1``. When kernels are shorter than a launch, the GPU
    idles between them and the step is ``len(kernel_s) · launch_s`` plus the
    last kernel; a CUDA graph replays the whole list from one launch, which is
    this timeline with one kernel of ``sum(kernel_s)`` and the graph's launch
    cost. *launch_s* has no default: measure it (the spacing of
    ``cudaLaunchKernel`` calls in a profile of the running job).

    >>> t = launch_timeline([3, 3, 3], launch_s=1)       # long kernels: the GPU leads
    >>> t.step_s, t.idle_s
    (Fraction(10, 1), Fraction(1, 1))
    >>> t = launch_timeline([1] * 100, launch_s=4)       # short kernels: the CPU leads
    >>> t.step_s, t.launch_share
    (Fraction(401, 1), Fraction(301, 401))
    >>> launch_timeline([], launch_s=4).step_s
    Fraction(0, 1)
    >>> launch_timeline([1], launch_s=-1)
    Traceback (most recent call last):
    ...
    ValueError: launch_s must be >= 0, got -1

    Raises ``ValueError`` for a negative time, ``TypeError`` if *kernel_s* is
    not a sequence of numbers.
    """
    kernels = _list("kernel_s", kernel_s)
    launch = _seconds("launch_s", launch_s)
    end = Fraction(0)
    for i, k in enumerate(kernels):
        # start_i = max(launched_i, end_{i-1}); launched_i = (i + 1) · launch_s
        end = max((i + 1) * launch, end) + k
    return LaunchTimeline(step_s=end, busy_s=sum(kernels, start=Fraction(0)))
