"""How NCCL runs a collective: algorithm, protocol, latency, bandwidth, and which one it picks.

A model of NCCL 2.30's tuner (``src/graph/tuning.cc``, NCCL 2.30.7). For every
algorithm and protocol NCCL can use on a group it prices

    time = latency + nbytes / algbw

and runs the cheapest, as ``ncclTopoGetAlgoTime`` does. Latencies and the
per-protocol and per-algorithm factors are NCCL's own constants; bandwidths
come from the hardware presets: NVLink per GPU as NCCL's topology counts it,
and, between NVLink domains, the node's network adapters. A ring enters
and leaves each node once per channel and NCCL spreads its channels over
every adapter, so a ring's cross-node bus bandwidth is the node's adapters
added up, not one adapter's. That cost model is :mod:`infralens.nccl_cost`,
which also sets the two efficiencies (``NET_EFFICIENCY``,
``NVLS_EFFICIENCY``); this module holds the ops, algorithms and protocols, the
search for the cheapest pair, and what nccl-tests prints.

>>> from infralens.topology import Cluster
>>> one = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
>>> p = predict("all_reduce", 2**30, one)
>>> p.algorithm, round(p.bus_bandwidth)              # NVLink SHARP inside a DGX H100
('nvls', 475)
>>> eight = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> p = predict("all_reduce", 10**9, eight)
>>> p.algorithm, round(p.seconds * 1e3, 2)          # 1 GB over 64 GPUs
('nvls_tree', 5.54)

``bus_bandwidth`` is what nccl-tests prints in its ``busbw`` column for an
out-of-place run of the same size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from infralens._typecheck import check_fields
from infralens._validate import check_choice, nonnegative_int
from infralens.collectives import bus_bandwidth_factor
from infralens.nccl_cost import (
    _algbw,
    _group,
    _latency_us,
    _shape,
)
from infralens.topology import Cluster

__all__ = [
    "ALGORITHMS",
    "LATENCY_SCALE",
    "OPS",
    "PROTOCOLS",
    "Prediction",
    "bus_bandwidth",
    "candidates",
    "predict",
]

OPS = (
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
    "send_recv",
)  # fmt: skip
"""Operations priced; nccl-tests calls the last two ``alltoall`` and ``sendrecv``."""

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "p2p")
"""NCCL_ALGO's Ring, Tree, NVLS and NVLSTree; ``p2p`` is the send/receive path of
all-to-all and send/recv, which NCCL_ALGO does not choose."""

PROTOCOLS = ("LL", "LL128", "Simple")

LATENCY_SCALE = 2.0
"""Published nccl-tests times between 1 and 64 MB sit about twice above NCCL's own
tuner latencies, which only need to rank algorithms, not to predict time (they
leave out pipeline fill and launch). The one fitted constant: the multiple of
0.5 that minimises the median error of those rows over every shipped run."""


@dataclass(frozen=True)
class Prediction:
    """What NCCL would do for one call, and what nccl-tests would print for it.

    ``seconds`` is the modelled time of the call; ``algbw`` is
    ``nbytes / seconds`` and ``bus_bandwidth`` is ``algbw`` times
    nccl-tests' factor for the op, both in GB/s (10⁹ bytes per second).
    """

    op: str
    nbytes: int
    ranks: int
    algorithm: str
    protocol: str
    seconds: float
    algbw: float
    bus_bandwidth: float

    def __post_init__(self) -> None:
        check_fields(self)


def candidates(
    op: str, cluster: Cluster, ranks: Iterable[int] | None = None
) -> list[str]:
    """The algorithms NCCL 2.30 may pick for *op* on this group, in ``ALGORITHMS`` order.

    Tree is an all-reduce algorithm between nodes; NVLS needs NVLink SHARP
    (Hopper and later) and, without CollNet, one NVLink domain; NVLSTree is
    NVLS inside each domain and a tree between them.

    >>> from infralens.topology import Cluster
    >>> candidates("all_reduce", Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100"))
    ['ring', 'tree', 'nvls_tree']
    >>> candidates("all_reduce", Cluster.from_node_shape("1_node_x_8_gpus", "dgx-a100"))
    ['ring']
    >>> candidates("all_to_all", Cluster.from_node_shape("1_node_x_8_gpus"))
    ['p2p']

    Raises ``ValueError`` for an unknown op or a bad group.
    """
    # [start:candidates]
    check_choice("op", op, OPS)
    g = _shape(cluster, ranks)
    if op in ("all_to_all", "send_recv"):
        return ["p2p"]
    out = ["ring"]
    if op == "all_reduce" and g.domains > 1:
        out.append("tree")
    if cluster.system.gpu.nvls and g.fewest > 1:
        if g.domains == 1 and op in ("all_reduce", "all_gather", "reduce_scatter"):
            out.append("nvls")
        if g.domains > 1 and op == "all_reduce":
            out.append("nvls_tree")
    return out
    # [end:candidates]


def predict(
    op: str,
    nbytes: int,
    cluster: Cluster,
    ranks: Iterable[int] | None = None,
    algorithm: str | None = None,
) -> Prediction:
    """Time of one NCCL call of *op* on *nbytes*, with the algorithm and protocol NCCL picks.

    ``time = latency(algorithm, protocol) + nbytes / algbw(algorithm, protocol)``,
    minimised over :func:`candidates` and the protocols each allows (NVLS
    runs only Simple). *nbytes* is nccl-tests' size: the whole buffer (the
    output of all_gather, the input of reduce_scatter). *ranks* defaults to
    every GPU of *cluster*. *algorithm* forces one, as ``NCCL_ALGO`` does.

    >>> from infralens.topology import Cluster
    >>> two = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    >>> [(p.algorithm, p.protocol)
    ...  for p in (predict("all_reduce", n, two) for n in (2**10, 2**30))]
    [('tree', 'LL'), ('nvls_tree', 'Simple')]
    >>> ring = predict("all_reduce", 2**30, two, algorithm="ring")   # NCCL_ALGO=Ring
    >>> round(ring.bus_bandwidth)
    347
    >>> predict("all_reduce", 0, two).seconds               # empty: nothing runs
    0.0
    >>> predict("all_reduce", 1, two, ranks=[3]).seconds    # one rank: nothing to send
    0.0
    >>> predict("all_reduce", 8, Cluster.from_node_shape("1_node_x_8_gpus", "dgx-a100"),
    ...         algorithm="nvls")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: algorithm 'nvls' is not available for all_reduce on this group of ...

    Raises ``ValueError`` for an unknown op or algorithm, negative *nbytes*,
    ranks outside the cluster or repeated, or an algorithm the hardware or
    the group does not offer.
    """
    check_choice("op", op, OPS)
    n = nonnegative_int("nbytes", nbytes)
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    group = None if ranks is None else _group(cluster, ranks)
    g = _shape(cluster, group)
    allowed = candidates(op, cluster, group)
    if algorithm is not None:
        check_choice("algorithm", algorithm, ALGORITHMS)
        if algorithm not in allowed:
            raise ValueError(
                f"algorithm {algorithm!r} is not available for {op} on this group of a "
                f"{cluster.system.name}; choose from "
                + ", ".join(repr(a) for a in allowed)
            )
        allowed = [algorithm]
    # [start:selection]
    # [start:cheapest-pair]
    if g.n == 1 or n == 0:
        return Prediction(op, n, g.n, allowed[0], "Simple", 0.0, 0.0, 0.0)
    arch = cluster.system.gpu.arch
    best: tuple[float, str, str] | None = None
    for algo in allowed:
        protos = (2,) if algo in ("nvls", "nvls_tree", "p2p") else (0, 1, 2)
        for proto in protos:
            # time = LATENCY_SCALE · latency + nbytes / algbw, in microseconds
            latency = LATENCY_SCALE * _latency_us(op, algo, proto, g)
            us = latency + n / (1e3 * _algbw(op, algo, proto, g, arch))
            if best is None or us < best[0]:
                best = (us, algo, PROTOCOLS[proto])
    # [end:cheapest-pair]
    # [start:printed-bandwidth]
    assert best is not None
    seconds = best[0] * 1e-6
    algbw = n / seconds / 1e9
    factor = 1 if op == "send_recv" else float(bus_bandwidth_factor(op, g.n))
    return Prediction(op, n, g.n, best[1], best[2], seconds, algbw, algbw * factor)
    # [end:printed-bandwidth]
    # [end:selection]


def bus_bandwidth(
    op: str, nbytes: int, cluster: Cluster, ranks: Iterable[int] | None = None
) -> float:
    """The busbw, in GB/s, nccl-tests would print for an out-of-place *op* of *nbytes*.

    ``predict(op, nbytes, cluster, ranks).bus_bandwidth``.

    >>> from infralens.topology import Cluster
    >>> two = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    >>> [round(bus_bandwidth(op, 2**30, two)) for op in ("all_gather", "all_to_all")]
    [353, 88]

    Raises what :func:`predict` raises.
    """
    return predict(op, nbytes, cluster, ranks).bus_bandwidth
