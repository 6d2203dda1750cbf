"""NCCL's cost model: a group's shape, and the latency and bandwidth of each algorithm on it.

The part of NCCL 2.30.7's tuner (``src/graph/tuning.cc``) that :mod:`infralens.nccl`
prices a call with. ``_shape`` reduces a group of ranks to what the tuner reads:
ranks, NVLink domains spanned, and the NVLink and network bandwidth a rank and a
domain reach. ``_latency_us`` and ``_algbw`` give one algorithm and protocol's
latency and algorithm bandwidth on that shape. The latencies, link bandwidths and
per-protocol factors are NCCL's own constants, each cited where it is set; the two
efficiencies, :data:`NVLS_EFFICIENCY` and :data:`NET_EFFICIENCY`, say how much of
NCCL's NVLink figure and of an adapter's line rate a run reaches. The op and the algorithm arrive
checked; the cluster and the ranks are checked here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from itertools import islice

from infralens.topology import Cluster

__all__ = ["NET_EFFICIENCY", "NVLS_EFFICIENCY"]

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
_LL_MAX_GBPS = {
    "ampere": 87.7,
    "hopper": 141.0,
    "blackwell": 282.0,
    2: 39.0,
    3: 20.4,
}

NVLS_EFFICIENCY = {"hopper": 275 / 370.8, "blackwell": 0.74 * 15 / 16}
"""NVLS all-reduce algorithm bandwidth as a share of NCCL's NVLink figure. Hopper:
NCCL's maintainers expect about 275 GB/s of algbw on 8 H100s (nccl-tests issue
212) against NCCL's 370.8 GB/s of NVLink. Blackwell: tuning.cc's nvlsEfficiency
(0.74) times 15 of 16 NVLS channels; no published run checks it."""

NET_EFFICIENCY = 47 / 50
"""Share of an adapter's line rate a ring sustains: NCCL's maintainers expect
46-48 GB/s per 400 Gb/s NDR adapter (nccl-tests issue 290); 47 of 50 GB/s."""


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
        raise TypeError(
            f"ranks must be an iterable of ranks, got {type(ranks).__name__}"
        )
    group = list(islice(ranks, cluster.world_size + 1))
    if len(group) > cluster.world_size:
        raise ValueError(
            f"ranks must hold at most the cluster's {cluster.world_size} ranks"
        )
    return group


def _shape(cluster: Cluster, ranks: Iterable[int] | None) -> _Shape:
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    group = _group(cluster, ranks)
    if not group:
        raise ValueError("ranks must hold at least one rank")
    if len(set(group)) != len(group):
        raise ValueError("ranks must not repeat a rank")
    d, world = cluster.domain_size, cluster.world_size
    if (
        all(type(r) is int for r in group)
        and min(group) >= 0
        and max(group) < world
    ):
        counts = Counter(
            r // d for r in group
        )  # every rank valid: domain = rank // d
    else:  # domain_of names the first bad rank
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
        net_gpu=float(max(Fraction(1), nics_per_gpu))
        * s.nic_bytes_per_s
        / 1e9
        * NET_EFFICIENCY,
    )
    # [end:adapters]


def _ring_bus(g: _Shape) -> float:
    links = ([g.nvlink] if g.per_domain > 1 else []) + (
        [g.net] if g.domains > 1 else []
    )
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
        steps = {
            "all_reduce": 2 * (g.n - 1),
            "all_gather": g.n - 1,
            "reduce_scatter": g.n - 1,
        }
        nsteps = steps.get(op, g.n)
        if op in (
            "broadcast",
            "reduce",
        ):  # a chain along the ring: every hop adds latency
            return (
                base + nsteps * _HOP_US["net" if net else "nvlink"]["ring"][proto]
            )
        cross = (2 if op == "all_reduce" else 1) * (g.domains - 1)
        if net:
            intra = max(intra, _NET_OVERHEAD_US * (3 if proto == 2 else 1))
        lat = base + (nsteps - cross) * intra + cross * inter
        return (
            lat * 1.4 if net and op == "all_reduce" and proto == 2 else lat
        )  # ring plateau
    if algorithm == "tree":
        return base + 2 * (
            (g.per_domain - 1) * intra + math.log2(g.domains) * inter
        )
    if algorithm == "nvls":
        return intra + (inter if net else 0)
    return intra + 2 * math.log2(g.domains) * inter  # nvls_tree


def _algbw(op: str, algorithm: str, proto: int, g: _Shape, arch: str) -> float:
    """Algorithm bandwidth in GB/s, from bus bandwidth as tuning.cc converts it."""
    # [start:algbw-p2p]
    if algorithm == "p2p":
        if op == "send_recv":  # each rank sends its buffer to the next rank
            return g.net_gpu if g.domains > 1 else g.nvlink
        # all-to-all: 1/n of the buffer to each peer at once; the peers in other
        # domains through this GPU's own adapter, those inside over NVLink
        inter = (g.n - g.per_domain) / g.n / g.net_gpu
        intra = (g.per_domain - 1) / g.n / g.nvlink
        return 1 / max(inter, intra)
    # [end:algbw-p2p]
    # [start:algbw-nvls]
    # Between two domains a tree sends each byte over the network once each
    # way where a ring sends it twice: NCCL prices trees on two nodes with the
    # intra-node bandwidth and doubles NVLSTree's network bandwidth (tuning.cc).
    net_tree = g.net * (2 if g.domains <= 2 else 1)
    if algorithm in ("nvls", "nvls_tree"):
        # Every GPU's NVLink carries about its whole buffer each way, so NVLS's
        # algbw is a share of one GPU's NVLink (not the tuner's 2n/(2(n-1))).
        nvls = g.nvlink * NVLS_EFFICIENCY[arch]
        # all-gather only multicasts, reduce-scatter only reduces: a GPU's NVLink
        # carries (n-1)/n of the buffer, so that share is the bus bandwidth and
        # algbw is n/(n-1) of it (tuning.cc's (ppn-1)/ppn skips this conversion)
        if op != "all_reduce":
            return nvls * g.n / (g.n - 1)
        if algorithm == "nvls_tree":
            return min(nvls, net_tree * g.n / (2 * (g.n - 1)))
        return nvls
    # [end:algbw-nvls]
    # [start:algbw-tree]
    ll_max = _LL_MAX_GBPS[arch if g.domains == 1 else min(g.domains, 3)]
    if algorithm == "tree":
        bus = min(g.nvlink, net_tree) * 0.92
        # LL: tuner's 1/3.8; LL128: 120 data bytes per 128-byte line; Simple: all
        bus = (min(bus / 3.8, ll_max), bus * 120 / 128, bus)[proto]
        return bus * 0.5
    # [end:algbw-tree]
    # [start:algbw-ring]
    bus = _ring_bus(g)
    # LL: 4 flag bytes in 8; LL128: the tuner's 0.92 (the line keeps 120/128)
    bus = (min(bus * 0.5, ll_max), bus * 0.92, bus)[proto]
    nsteps = {
        "all_reduce": 2 * (g.n - 1),
        "all_gather": g.n - 1,
        "reduce_scatter": g.n - 1,
    }
    # algbw = busbw · n / steps: n / (2(n - 1)) for an all-reduce
    return bus * g.n / nsteps.get(op, g.n)
    # [end:algbw-ring]
