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
added up, not one adapter's.

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

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from itertools import islice

from infralens._typecheck import check_fields
from infralens._validate import check_choice, nonnegative_int
from infralens.collectives import bus_bandwidth_factor
from infralens.topology import Cluster

__all__ = [
    "ALGORITHMS",
    "LATENCY_SCALE",
    "NET_EFFICIENCY",
    "NVLS_EFFICIENCY",
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

# NCCL 2.30.7, src/graph/tuning.cc: base latency per algorithm and protocol (LL, LL128,
# Simple), and hardware latency per hop over NVLink and over the network, in microseconds.
_BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0),
            "nvls_tree": (0, 0, 0)}  # fmt: skip
_HOP_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls": (0, 0, 25),
               "nvls_tree": (0, 0, 25)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18),
            "nvls_tree": (0, 0, 20.9)},
}  # fmt: skip
_NET_OVERHEAD_US = 1.0  # getNetOverhead on an Intel x86 host; tripled for Simple
# NCCL 2.30.7, src/graph/topo.h: GB/s NCCL credits to one NVLink link (SM80/SM90/SM100).
_NVLINK_LINK_GBPS = {"ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
# tuning.cc: llMaxBws, the LL protocol's ceiling: one node by GPU, 2 and >2 nodes (Intel host).
_LL_MAX_GBPS = {"ampere": 87.7, "hopper": 141.0, "blackwell": 282.0, 2: 39.0, 3: 20.4}

NVLS_EFFICIENCY = {"hopper": 275 / 370.8, "blackwell": 0.74 * 15 / 16}
"""NVLS all-reduce algorithm bandwidth as a share of NCCL's NVLink figure. Hopper:
NCCL's maintainers expect about 275 GB/s of algbw on 8 H100s (nccl-tests issue
212) against NCCL's 370.8 GB/s of NVLink. Blackwell: tuning.cc's nvlsEfficiency
(0.74) times 15 of 16 NVLS channels; no published run checks it."""

NET_EFFICIENCY = 47 / 50
"""Share of an adapter's line rate a ring sustains: NCCL's maintainers expect
46-48 GB/s per 400 Gb/s NDR adapter (nccl-tests issue 290); 47 of 50 GB/s."""

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


@dataclass(frozen=True)
class _Shape:
    n: int  # ranks
    domains: int  # NVLink domains spanned
    per_domain: int  # most ranks in one domain
    fewest: int  # fewest ranks in one domain: its adapters bound what crosses
    nvlink: float  # GB/s one rank reaches over NVLink, as NCCL counts it
    net: float  # GB/s one domain's ring reaches over the adapters the group can use
    net_gpu: float  # GB/s one GPU reaches over its own adapters (point to point)


def _group(cluster: Cluster, ranks: object) -> list[int]:
    """*ranks* as a list; a group holds each rank once, so at most world_size are read."""
    if ranks is None:
        return list(range(cluster.world_size))
    if isinstance(ranks, str | bytes) or not isinstance(ranks, Iterable):
        raise TypeError(f"ranks must be an iterable of ranks, got {type(ranks).__name__}")
    group = list(islice(ranks, cluster.world_size + 1))
    if len(group) > cluster.world_size:
        raise ValueError(f"ranks must hold at most the cluster's {cluster.world_size} ranks")
    return group


def _shape(cluster: Cluster, ranks: Iterable[int] | None) -> _Shape:
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    group = _group(cluster, ranks)
    if not group:
        raise ValueError("ranks must hold at least one rank")
    if len(set(group)) != len(group):
        raise ValueError("ranks must not repeat a rank")
    counts = Counter(cluster.domain_of(r) for r in group)
    per_domain, fewest = max(counts.values()), min(counts.values())
    # [start:adapters]
    s = cluster.system
    nics_per_gpu = Fraction(s.nics_per_node, s.gpus_per_node)
    nics_in_domain = nics_per_gpu * cluster.domain_size
    # a domain's traffic leaves through the adapters of its group members
    usable = min(nics_in_domain, Fraction(max(1, math.ceil(fewest * nics_per_gpu))))
    # channels spread over them: net = usable adapters · line rate · efficiency
    return _Shape(
        n=len(group),
        domains=len(counts),
        per_domain=per_domain,
        fewest=fewest,
        nvlink=s.gpu.nvlink_links * _NVLINK_LINK_GBPS[s.gpu.arch],
        net=float(usable) * s.nic_bytes_per_s / 1e9 * NET_EFFICIENCY,
        net_gpu=float(max(Fraction(1), nics_per_gpu)) * s.nic_bytes_per_s / 1e9 * NET_EFFICIENCY,
    )
    # [end:adapters]


def _ring_bus(g: _Shape) -> float:
    links = ([g.nvlink] if g.per_domain > 1 else []) + ([g.net] if g.domains > 1 else [])
    return min(links)


def _latency_us(op: str, algorithm: str, proto: int, g: _Shape) -> float:
    """NCCL's latency for one call (tuning.cc), in microseconds."""
    net = g.domains > 1
    if algorithm == "p2p":  # no tuner entry: one Simple ring step
        return _BASE_US["ring"][2] + _HOP_US["net" if net else "nvlink"]["ring"][2]
    intra = _HOP_US["nvlink"][algorithm][proto]
    inter = _HOP_US["net"]["tree" if g.per_domain == 1 else algorithm][proto]
    base = _BASE_US[algorithm][proto]
    if algorithm == "ring":
        steps = {"all_reduce": 2 * (g.n - 1), "all_gather": g.n - 1, "reduce_scatter": g.n - 1}
        nsteps = steps.get(op, g.n)
        if op in ("broadcast", "reduce"):  # a chain along the ring: every hop adds latency
            return base + nsteps * _HOP_US["net" if net else "nvlink"]["ring"][proto]
        cross = (2 if op == "all_reduce" else 1) * (g.domains - 1)
        if net:
            intra = max(intra, _NET_OVERHEAD_US * (3 if proto == 2 else 1))
        lat = base + (nsteps - cross) * intra + cross * inter
        return lat * 1.4 if net and op == "all_reduce" and proto == 2 else lat  # ring plateau
    if algorithm == "tree":
        return base + 2 * ((g.per_domain - 1) * intra + math.log2(g.domains) * inter)
    if algorithm == "nvls":
        return intra + (inter if net else 0)
    return intra + 2 * math.log2(g.domains) * inter  # nvls_tree


def _algbw(op: str, algorithm: str, proto: int, g: _Shape, arch: str) -> float:
    """Algorithm bandwidth in GB/s, from bus bandwidth as tuning.cc converts it."""
    if algorithm == "p2p":
        if op == "send_recv":  # each rank sends its buffer to the next rank
            return g.net_gpu if g.domains > 1 else g.nvlink
        # all-to-all: 1/n of the buffer to each peer at once; the peers in other
        # domains through this GPU's own adapter, those inside over NVLink
        inter = (g.n - g.per_domain) / g.n / g.net_gpu
        intra = (g.per_domain - 1) / g.n / g.nvlink
        return 1 / max(inter, intra)
    # Between two domains a tree sends each byte over the network once each
    # way where a ring sends it twice: NCCL prices trees on two nodes with the
    # intra-node bandwidth and doubles NVLSTree's network bandwidth (tuning.cc).
    net_tree = g.net * (2 if g.domains <= 2 else 1)
    if algorithm in ("nvls", "nvls_tree"):
        # Every GPU's NVLink carries about its whole buffer each way, so NVLS's
        # algbw is a share of one GPU's NVLink (not the tuner's 2n/(2(n-1))).
        nvls = g.nvlink * NVLS_EFFICIENCY[arch]
        # all-gather only multicasts, reduce-scatter only reduces: (ppn-1)/ppn
        if op != "all_reduce":
            return nvls * (g.per_domain - 1) / g.per_domain
        if algorithm == "nvls_tree":
            return min(nvls, net_tree * g.n / (2 * (g.n - 1)))
        return nvls
    ll_max = _LL_MAX_GBPS[arch if g.domains == 1 else min(g.domains, 3)]
    if algorithm == "tree":
        bus = min(g.nvlink, net_tree) * 0.92
        # LL: tuner's 1/3.8; LL128: 120 data bytes per 128-byte line; Simple: all
        bus = (min(bus / 3.8, ll_max), bus * 120 / 128, bus)[proto]
        return bus * 0.5
    bus = _ring_bus(g)
    # LL: 4 flag bytes in 8; LL128: the tuner's 0.92 (the line keeps 120/128)
    bus = (min(bus * 0.5, ll_max), bus * 0.92, bus)[proto]
    nsteps = {"all_reduce": 2 * (g.n - 1), "all_gather": g.n - 1, "reduce_scatter": g.n - 1}
    # algbw = busbw · n / steps: n / (2(n - 1)) for an all-reduce
    return bus * g.n / nsteps.get(op, g.n)


def candidates(op: str, cluster: Cluster, ranks: Iterable[int] | None = None) -> list[str]:
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
    >>> [(p.algorithm, p.protocol) for p in (predict("all_reduce", n, two) for n in (2**10, 2**30))]
    [('tree', 'LL'), ('nvls_tree', 'Simple')]
    >>> round(predict("all_reduce", 2**30, two, algorithm="ring").bus_bandwidth)   # NCCL_ALGO=Ring
    347
    >>> predict("all_reduce", 0, two).seconds                    # empty: nothing runs
    0.0
    >>> predict("all_reduce", 1, two, ranks=[3]).seconds         # one rank: nothing to send
    0.0
    >>> predict("all_reduce", 8, Cluster.from_node_shape("1_node_x_8_gpus", "dgx-a100"),
    ...         algorithm="nvls")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: algorithm 'nvls' is not available for all_reduce on this group of a DGX A100; ...

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
                f"{cluster.system.name}; choose from " + ", ".join(repr(a) for a in allowed)
            )
        allowed = [algorithm]
    # [start:selection]
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
    assert best is not None
    seconds = best[0] * 1e-6
    algbw = n / seconds / 1e9
    factor = 1 if op == "send_recv" else float(bus_bandwidth_factor(op, g.n))
    return Prediction(op, n, g.n, best[1], best[2], seconds, algbw, algbw * factor)
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
