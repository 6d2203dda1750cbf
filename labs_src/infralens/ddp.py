"""Data parallel training: why DDP all-reduces gradients, and what it costs.

Every data-parallel rank holds a full replica of the model and runs forward
and backward on its own slice of the global batch. The replicas stay equal
only if every rank applies the *same* update, so DDP all-reduces the
gradients and divides by the number of ranks: each rank then holds the
gradient of the loss averaged over the whole global batch.

A one-parameter model makes this exact. Loss per sample is
``(w*x - y)**2 / 2``, so its gradient is ``(w*x - y) * x``:

>>> samples = [(1, 2), (2, 2), (3, 5), (4, 3)]          # (x, y) pairs
>>> per_rank = split_batch(samples, dp_size=2)
>>> ddp_gradients(1, per_rank)                          # what each rank holds
[Fraction(-3, 4), Fraction(-3, 4)]
>>> mean_squared_error_grad(1, samples)                 # one GPU, whole batch
Fraction(-3, 4)

The cost is one all-reduce of every gradient per optimizer step; see
:class:`DataParallelStep`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from infralens._typecheck import check_fields, typed
from infralens._validate import divisible, positive_int, ranks_cap
from infralens.batch import global_batch_size
from infralens.collectives import Value, all_reduce, ring_bytes_sent

__all__ = [
    "DataParallelStep",
    "ddp_gradients",
    "mean_squared_error_grad",
    "split_batch",
]

T = TypeVar("T")


@typed
def mean_squared_error_grad(
    weight: Value, samples: Sequence[tuple[Value, Value]]
) -> Fraction:
    """Gradient of the mean loss ``(w*x - y)**2 / 2`` over *samples*, at *weight*.

    ``grad = sum((w*x - y) * x) / len(samples)``.

    >>> mean_squared_error_grad(2, [(1, 2)])        # a perfect fit has zero gradient
    Fraction(0, 1)
    >>> mean_squared_error_grad(0, [(1, 1), (3, 1)])
    Fraction(-2, 1)

    Raises ``ValueError`` if *samples* is empty.
    """
    if len(samples) == 0:
        raise ValueError("samples must hold at least one (x, y) pair, got 0")
    total = sum(
        (Fraction(weight * x - y) * x for x, y in samples), start=Fraction(0)
    )
    return total / len(samples)


@typed
def split_batch(samples: Sequence[T], dp_size: int) -> list[list[T]]:
    """Split a global batch into *dp_size* equal, contiguous per-rank slices.

    Equal slices matter: DDP averages per-rank *means*, which equals the
    global mean only when every rank sees the same number of samples.

    >>> split_batch(["a", "b", "c", "d", "e", "f"], 3)
    [['a', 'b'], ['c', 'd'], ['e', 'f']]
    >>> split_batch(["a", "b", "c"], 2)
    Traceback (most recent call last):
    ...
    ValueError: len(samples) must be divisible by dp_size: 3 % 2 = 1

    Raises ``ValueError`` if ``len(samples)`` is not a multiple of *dp_size*.
    """
    n = ranks_cap("dp_size", dp_size)
    size = divisible("len(samples)", len(samples), "dp_size", n) // n
    return [list(samples[r * size : (r + 1) * size]) for r in range(n)]


@typed
def ddp_gradients(
    weight: Value, per_rank_samples: Sequence[Sequence[tuple[Value, Value]]]
) -> list[Fraction]:
    """The gradient each rank holds after DDP's synchronisation.

    Each rank computes its local mean gradient; an all-reduce sums them and
    each rank divides by the world size: ``g = (g_0 + ... + g_{n-1}) / n``.

    >>> ddp_gradients(0, [[(1, 1)], [(3, 1)]])
    [Fraction(-2, 1), Fraction(-2, 1)]

    Unequal slices break the equivalence with single-device training, a
    rank with one sample weighs as much as a rank with three:

    >>> ddp_gradients(0, [[(1, 1)], [(3, 1), (3, 1), (3, 1)]])
    [Fraction(-2, 1), Fraction(-2, 1)]
    >>> mean_squared_error_grad(0, [(1, 1), (3, 1), (3, 1), (3, 1)])
    Fraction(-5, 2)

    Raises ``ValueError`` if there are no ranks or a rank has no samples.
    """
    # [start:local-backward]
    if len(per_rank_samples) == 0:
        raise ValueError("per_rank_samples must hold at least one rank, got 0")
    if any(len(s) == 0 for s in per_rank_samples):
        raise ValueError(
            "per_rank_samples must hold at least one (x, y) pair on every rank"
        )
    local = [[mean_squared_error_grad(weight, s)] for s in per_rank_samples]
    # [end:local-backward]
    # [start:allreduce-then-average]
    # g = (g_0 + ... + g_{n-1}) / n: the only exchange between ranks
    summed = all_reduce(local)
    return [Fraction(row[0]) / len(per_rank_samples) for row in summed]
    # [end:allreduce-then-average]


@dataclass(frozen=True)
class DataParallelStep:
    """One optimizer step of plain data parallelism (DDP).

    ``dp_size`` replicas each run ``grad_accum_steps`` micro-batches of
    ``micro_batch_size`` samples, then all-reduce ``num_params`` gradients of
    ``bytes_per_grad`` bytes each.

    >>> step = DataParallelStep(dp_size=8, micro_batch_size=4, grad_accum_steps=2,
    ...                         num_params=1_000_000_000, bytes_per_grad=2)
    >>> step.global_batch_size
    64
    >>> step.gradient_bytes
    2000000000
    >>> step.allreduce_bytes_per_rank()
    Fraction(3500000000, 1)
    >>> step.allreduce_bytes_per_rank(no_sync=False)   # after every micro-batch
    Fraction(7000000000, 1)
    >>> alone = DataParallelStep(dp_size=1, micro_batch_size=1, grad_accum_steps=1,
    ...                          num_params=10)
    >>> alone.allreduce_bytes_per_rank()               # one rank sends nothing
    Fraction(0, 1)

    Raises ``ValueError`` if a field is not a positive int.
    """

    dp_size: int
    micro_batch_size: int
    grad_accum_steps: int
    num_params: int
    bytes_per_grad: int = 4

    def __post_init__(self) -> None:
        for name in (
            "dp_size",
            "micro_batch_size",
            "grad_accum_steps",
            "num_params",
        ):
            positive_int(name, getattr(self, name))
        positive_int("bytes_per_grad", self.bytes_per_grad)
        check_fields(self)

    # [start:batch-and-buffer]
    @property
    def global_batch_size(self) -> int:
        """Samples per optimizer step (:func:`infralens.batch.global_batch_size`)."""
        return global_batch_size(
            micro_batch_size=self.micro_batch_size,
            grad_accum_steps=self.grad_accum_steps,
            dp_size=self.dp_size,
        )

    @property
    def gradient_bytes(self) -> int:
        """Bytes of one full gradient: ``num_params * bytes_per_grad``."""
        return self.num_params * self.bytes_per_grad
        # [end:batch-and-buffer]

    # [start:bytes-per-step]
    def allreduce_bytes_per_rank(self, *, no_sync: bool = True) -> Fraction:
        """Bytes each rank sends per optimizer step in a ring all-reduce.

        ``2 (n-1)/n * gradient_bytes`` once per step when accumulation runs
        under DDP's ``no_sync()``; *grad_accum_steps* times that otherwise,
        because DDP then all-reduces after every backward.
        """
        once = ring_bytes_sent("all_reduce", self.gradient_bytes, self.dp_size)
        return once if no_sync else once * self.grad_accum_steps
        # [end:bytes-per-step]
