"""Cluster topology: which link a group of ranks crosses, and what a collective costs there.

A cluster is ``nodes × gpus_per_node`` GPUs with two link tiers: a fast one
inside a node (NVLink through NVSwitch) and a slower one between nodes (one
network adapter per GPU in the DGX designs). Ranks are numbered node by
node, so rank r sits on node ``r // gpus_per_node``.

>>> h100 = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> h100.tier_of([0, 1, 2, 3, 4, 5, 6, 7]).name, h100.tier_of([0, 8]).name
('nvlink', 'network')

Bandwidths are per GPU and per direction, the figure a ring is limited by:
NVLink 4 gives an H100 900 GB/s in total, 450 GB/s each way; a DGX H100
gives each GPU one 400 Gb/s adapter, 50 GB/s each way. Latencies are
illustrative assumptions, not datasheet values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from infralens._validate import check_choice, nonnegative_int, positive_int
from infralens.collectives import OPS, ring_bytes_sent

__all__ = [
    "CLUSTER_PRESETS",
    "Cluster",
    "LinkTier",
    "collective_seconds",
    "hierarchical_all_reduce_seconds",
    "parse_node_shape",
]

GB = 10**9


@dataclass(frozen=True)
class LinkTier:
    """A class of link: per-GPU, per-direction bandwidth and a per-message latency."""

    name: str
    bandwidth_bytes_per_s: int
    latency_s: Fraction


CLUSTER_PRESETS: dict[str, tuple[LinkTier, LinkTier]] = {
    # NVLink 4: 900 GB/s total per H100 (450 GB/s each way); ConnectX-7 400 Gb/s per GPU.
    "dgx-h100": (
        LinkTier("nvlink", 450 * GB, Fraction(3, 10**6)),
        LinkTier("network", 50 * GB, Fraction(10, 10**6)),
    ),
    # NVLink 3: 600 GB/s total per A100 (300 GB/s each way); HDR 200 Gb/s per GPU.
    "dgx-a100": (
        LinkTier("nvlink", 300 * GB, Fraction(3, 10**6)),
        LinkTier("network", 25 * GB, Fraction(10, 10**6)),
    ),
}
"""(intra-node, inter-node) tiers of the DGX H100 and DGX A100 designs."""

_SHAPE = re.compile(r"^(\d+)_nodes?_x_(\d+)_gpus?$")


def parse_node_shape(node_shape: str) -> tuple[int, int]:
    """Read ``"N_nodes_x_G_gpus"`` as ``(N, G)``.

    >>> parse_node_shape("8_nodes_x_8_gpus")
    (8, 8)
    >>> parse_node_shape("1_node_x_4_gpus")
    (1, 4)
    >>> parse_node_shape("8x8")
    Traceback (most recent call last):
    ...
    ValueError: node_shape must look like '8_nodes_x_8_gpus', got '8x8'
    """
    match = _SHAPE.match(node_shape) if isinstance(node_shape, str) else None
    if not match:
        raise ValueError(f"node_shape must look like '8_nodes_x_8_gpus', got {node_shape!r}")
    return (
        positive_int("node_shape nodes", int(match[1])),
        positive_int("node_shape gpus", int(match[2])),
    )


@dataclass(frozen=True)
class Cluster:
    """``nodes × gpus_per_node`` GPUs joined by an intra-node and an inter-node tier."""

    nodes: int
    gpus_per_node: int
    intra: LinkTier
    inter: LinkTier

    def __post_init__(self) -> None:
        positive_int("nodes", self.nodes)
        positive_int("gpus_per_node", self.gpus_per_node)

    @classmethod
    def from_node_shape(cls, node_shape: str, preset: str = "dgx-h100") -> Cluster:
        """Build a cluster from a shape string and a key of :data:`CLUSTER_PRESETS`.

        Raises ``ValueError`` for a malformed shape or an unknown preset.
        """
        nodes, gpus = parse_node_shape(node_shape)
        intra, inter = CLUSTER_PRESETS[check_choice("preset", preset, list(CLUSTER_PRESETS))]
        return cls(nodes, gpus, intra, inter)

    @property
    def world_size(self) -> int:
        """Number of GPUs."""
        return self.nodes * self.gpus_per_node

    def node_of(self, rank: int) -> int:
        """Node index of *rank*: ``rank // gpus_per_node``.

        >>> Cluster.from_node_shape("2_nodes_x_8_gpus").node_of(9)
        1

        Raises ``ValueError`` if *rank* is outside the cluster.
        """
        r = nonnegative_int("rank", rank)
        if r >= self.world_size:
            raise ValueError(f"rank must be < world_size {self.world_size}, got {r}")
        return r // self.gpus_per_node

    def tier_of(self, ranks: Sequence[int]) -> LinkTier:
        """The slowest tier a group crosses: ``intra`` if all ranks share a node.

        >>> c = Cluster.from_node_shape("2_nodes_x_4_gpus")
        >>> c.tier_of([0, 3]).name, c.tier_of([3, 4]).name, c.tier_of([5]).name
        ('nvlink', 'network', 'nvlink')

        Raises ``ValueError`` for an empty group or a rank outside the cluster.
        """
        if len(ranks) == 0:
            raise ValueError("ranks must hold at least one rank")
        nodes = {self.node_of(r) for r in ranks}
        return self.intra if len(nodes) == 1 else self.inter


def _ring_seconds(op: str, nbytes: int, n: int, tier: LinkTier) -> Fraction:
    check_choice("op", op, OPS)
    if n == 1:
        return Fraction(0)
    steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    return steps * tier.latency_s + ring_bytes_sent(op, nbytes, n) / tier.bandwidth_bytes_per_s


def collective_seconds(op: str, nbytes: int, group: Sequence[int], cluster: Cluster) -> Fraction:
    """Alpha–beta time of a ring collective over *group*, bound by its slowest link.

    ``steps * latency + ring_bytes_sent(op, nbytes, n) / bandwidth`` with
    ``2(n-1)`` steps for an all-reduce and ``n-1`` otherwise.

    >>> c = Cluster.from_node_shape("2_nodes_x_8_gpus")
    >>> ms = lambda seconds: round(float(seconds) * 1000, 2)
    >>> ms(collective_seconds("all_reduce", 10**9, range(8), c))     # inside a node
    3.93
    >>> ms(collective_seconds("all_reduce", 10**9, range(16), c))    # across nodes
    37.8
    >>> collective_seconds("all_reduce", 10**9, [3], c)                    # alone: free
    Fraction(0, 1)

    Raises ``ValueError`` for an unknown op, negative size, or bad group.
    """
    ranks = list(group)
    tier = cluster.tier_of(ranks)
    return _ring_seconds(op, nonnegative_int("nbytes", nbytes), len(ranks), tier)


def hierarchical_all_reduce_seconds(nbytes: int, cluster: Cluster) -> Fraction:
    """All-reduce over the whole cluster in three phases instead of one flat ring.

    Reduce-scatter inside each node (NVLink), all-reduce the 1/g slice between
    nodes (one ring per local GPU index, all in parallel on the network),
    all-gather inside each node. Each GPU then sends only ``1/g`` of the
    flat ring's bytes over the network.

    >>> c = Cluster.from_node_shape("8_nodes_x_8_gpus")
    >>> flat = collective_seconds("all_reduce", 10**9, range(64), c)
    >>> hier = hierarchical_all_reduce_seconds(10**9, c)
    >>> round(float(flat / hier), 2)
    4.81

    Raises ``ValueError`` for a negative size.
    """
    n = nonnegative_int("nbytes", nbytes)
    g, nodes = cluster.gpus_per_node, cluster.nodes
    local = _ring_seconds("reduce_scatter", n, g, cluster.intra)
    across = _ring_seconds("all_reduce", n // g, nodes, cluster.inter) if nodes > 1 else Fraction(0)
    return local + across + _ring_seconds("all_gather", n, g, cluster.intra)
