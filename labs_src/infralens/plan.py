"""Parallel plans: which ranks form each TP, CP, DP, PP and EP group.

A plan gives each axis a degree and an order. The first axis of the order
varies fastest: with the default ``"tp-cp-dp-pp"`` (Megatron-Core's
convention), the ranks of a tensor-parallel group are consecutive, so with
TP equal to the GPUs per node a TP group is exactly one node. Expert
parallelism is carved out of data parallelism: ``ep`` divides ``dp``, and an
EP group is a run of consecutive data-parallel indices (Megatron-Core's
``tp-cp-ep-dp-pp``).

>>> plan = ParallelPlan(tp=8, pp=4, dp=2)
>>> plan.world_size, plan.groups("tp")[0], plan.groups("dp")[0], plan.groups("pp")[0]
(64, [0, 1, 2, 3, 4, 5, 6, 7], [0, 8], [0, 16, 32, 48])
>>> plan.coords(42)
{'tp': 2, 'cp': 0, 'dp': 1, 'pp': 2, 'ep': 0}
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import isqrt

from infralens._typecheck import check_fields
from infralens._validate import describe, nonnegative_int, positive_int, ranks_cap

__all__ = ["AXES", "FREQUENCY", "ParallelPlan", "enumerate_plans"]

AXES = ("tp", "cp", "dp", "pp", "ep")
"""Every axis a plan can split; ``order`` names the first four."""

FREQUENCY = {
    "tp": "per layer (all-reduce, or reduce-scatter + all-gather with SP)",
    "cp": "per layer (K/V exchange in attention)",
    "ep": "per MoE layer (all-to-all dispatch and combine)",
    "dp": "per backward bucket (gradient all-reduce or reduce-scatter)",
    "pp": "per stage boundary per micro-batch (send/recv)",
}
"""How often each axis's collectives run in one training step."""


@dataclass(frozen=True)
class ParallelPlan:
    """Degrees of each parallel axis and the order ranks are laid out in.

    Raises ``ValueError`` if a degree is below 1, ``ep`` does not divide
    ``dp``, or ``order`` is not a permutation of tp, cp, dp and pp.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    order: str = "tp-cp-dp-pp"

    def __post_init__(self) -> None:
        for axis in AXES:
            positive_int(axis, getattr(self, axis))
        if self.dp % self.ep:
            raise ValueError(
                f"ep must divide dp (experts are carved out of dp): {self.dp} % {self.ep} != 0"
            )
        axes = self.order.split("-") if isinstance(self.order, str) else []
        if sorted(axes) != sorted(AXES[:4]):
            raise ValueError(
                "order must be a permutation of tp, cp, dp and pp joined by '-', "
                f"got {describe(self.order)}"
            )
        check_fields(self)

    @property
    def world_size(self) -> int:
        """Ranks the plan needs: ``tp * cp * dp * pp``."""
        return self.tp * self.cp * self.dp * self.pp

    def _strides(self) -> dict[str, int]:
        # stride(axis) = product of the degrees before it in the order
        strides, step = {}, 1
        for axis in self.order.split("-"):
            strides[axis] = step
            step *= getattr(self, axis)
        return strides

    def coords(self, rank: int) -> dict[str, int]:
        """Coordinates of *rank* on every axis; ``ep`` is the fastest part of ``dp``.

        >>> ParallelPlan(tp=2, dp=4, ep=2).coords(5)
        {'tp': 1, 'cp': 0, 'dp': 2, 'pp': 0, 'ep': 0}

        Raises ``ValueError`` if *rank* is not in ``range(world_size)``.
        """
        r = nonnegative_int("rank", rank)
        if r >= self.world_size:
            raise ValueError(
                f"rank must be < world_size {self.world_size}, got {r}"
            )
        # [start:rank-to-coords]
        strides = self._strides()
        # coordinate = (rank // stride) % degree, for each axis of the order
        out = {axis: r // strides[axis] % getattr(self, axis) for axis in AXES[:4]}
        out["ep"] = out["dp"] % self.ep
        return out
        # [end:rank-to-coords]

    def rank(self, **coords: int) -> int:
        """Rank at the given coordinates (missing axes count as 0).

        >>> plan = ParallelPlan(tp=8, pp=4, dp=2)
        >>> plan.rank(tp=2, dp=1, pp=2)
        42

        Raises ``ValueError`` for an unknown axis or a coordinate out of range.
        """
        strides = self._strides()
        total = 0
        for axis, value in coords.items():
            if axis not in strides:
                raise ValueError(
                    f"coordinate axis must be one of tp, cp, dp, pp; got {describe(axis)}"
                )
            v = nonnegative_int(axis, value)
            if v >= getattr(self, axis):
                raise ValueError(
                    f"{axis} coordinate must be < {getattr(self, axis)}, got {v}"
                )
            total += v * strides[axis]
        return total

    def groups(self, axis: str) -> list[list[int]]:
        """Every group of *axis*: ranks that differ only in that axis's coordinate.

        >>> ParallelPlan(tp=2, dp=4, ep=2).groups("ep")
        [[0, 2], [1, 3], [4, 6], [5, 7]]

        Raises ``ValueError`` for an unknown axis or a world size above ``MAX_RANKS``.
        """
        if axis not in AXES:
            raise ValueError(
                f"axis must be one of {', '.join(AXES)}; got {describe(axis)}"
            )
        # [start:group-by-other-axes]
        # one group per setting of the other axes' coordinates
        ranks_cap("world_size", self.world_size)  # every rank is listed
        found: dict[tuple[int, ...], list[int]] = {}
        for r in range(self.world_size):
            c = self.coords(r)
            if axis == "ep":  # vary only the ep part of dp
                key = (*(c[a] for a in AXES[:4] if a != "dp"), c["dp"] // self.ep)
            else:
                key = tuple(c[a] for a in AXES[:4] if a != axis)
            found.setdefault(key, []).append(r)
        return sorted(found.values())
        # [end:group-by-other-axes]

    def check_world_size(self, world_size: int) -> None:
        """Raise ``ValueError`` unless the degrees multiply to *world_size*.

        >>> ParallelPlan(tp=8, pp=4, dp=3).check_world_size(64)
        Traceback (most recent call last):
        ...
        ValueError: tp * cp * pp * dp must equal world_size: 8 * 1 * 4 * 3 = 96 != 64
        """
        # [start:world-size-contract]
        w = positive_int("world_size", world_size)
        if self.world_size != w:
            raise ValueError(
                "tp * cp * pp * dp must equal world_size: "
                f"{self.tp} * {self.cp} * {self.pp} * {self.dp} = {self.world_size} != {w}"
            )
        # [end:world-size-contract]


def _divisors(n: int) -> list[int]:
    # trial division up to sqrt(n): O(sqrt n), not O(n)
    small = [d for d in range(1, isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def enumerate_plans(
    world_size: int, gpus_per_node: int, *, max_cp: int | None = None
) -> Iterator[ParallelPlan]:
    """Every (tp, cp, pp, dp) that fills *world_size* with TP inside one node.

    TP must divide *gpus_per_node*; *max_cp* caps the context-parallel degree.

    >>> sum(1 for _ in enumerate_plans(64, 8))
    74
    >>> [(p.tp, p.pp, p.dp) for p in enumerate_plans(8, 8, max_cp=1)][:4]
    [(1, 1, 8), (1, 2, 4), (1, 4, 2), (1, 8, 1)]

    Raises ``ValueError`` if a size is below 1 or above ``2**17`` (``MAX_RANKS``).
    """
    w = ranks_cap("world_size", world_size)
    g = ranks_cap("gpus_per_node", gpus_per_node)
    cap = w if max_cp is None else positive_int("max_cp", max_cp)
    for tp in _divisors(g):
        if w % tp:
            continue
        for cp in _divisors(w // tp):
            if cp > cap:
                break
            rest = w // (tp * cp)
            for pp in _divisors(rest):
                yield ParallelPlan(tp=tp, cp=cp, pp=pp, dp=rest // pp)
