"""Cluster topology: which GPUs share an NVLink domain, and which link a group crosses.

A cluster is ``nodes × gpus_per_node`` GPUs of one :class:`~infralens.hardware.System`.
Ranks are numbered node by node, so rank r sits on node ``r // gpus_per_node``.
GPUs talk over NVLink inside an NVLink domain (one DGX node, or a whole
GB200 NVL72 rack) and over the network adapters between domains.

>>> h100 = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> h100.tier_of([0, 1, 2, 3, 4, 5, 6, 7]).name, h100.tier_of([0, 8]).name
('nvlink', 'network')
>>> nvl72 = Cluster.from_node_shape("36_nodes_x_4_gpus", "gb200-nvl72")
>>> nvl72.tier_of(range(72)).name, nvl72.tier_of([71, 72]).name   # 18 trays, one fabric
('nvlink', 'network')

What a collective over a group costs is :mod:`infralens.nccl`'s question;
this module only says where the ranks are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import (
    check_choice,
    describe,
    nonnegative_int,
    positive_int,
    positive_number,
)
from infralens.hardware import SYSTEMS, System, system

__all__ = ["Cluster", "LinkTier", "parse_node_shape"]


@dataclass(frozen=True)
class LinkTier:
    """A class of link and its line rate per GPU and per direction, in bytes per second.

    ``nvlink`` is one GPU's NVLink ports; ``network`` is one GPU's share of
    its node's adapters (all of them, divided by the GPUs of the node).
    """

    name: str
    bandwidth_bytes_per_s: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__}")
        positive_number("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        check_fields(self)


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
        raise ValueError(
            f"node_shape must look like '8_nodes_x_8_gpus', got {describe(node_shape)}"
        )
    return (
        positive_int("node_shape nodes", int(match[1])),
        positive_int("node_shape gpus", int(match[2])),
    )


@dataclass(frozen=True)
class Cluster:
    """``nodes × gpus_per_node`` GPUs of one system design.

    ``gpus_per_node`` may be smaller than the design's (a partly used
    node); it may not be larger.
    """

    nodes: int
    gpus_per_node: int
    system: System = SYSTEMS["dgx-h100"]

    def __post_init__(self) -> None:
        positive_int("nodes", self.nodes)
        positive_int("gpus_per_node", self.gpus_per_node)
        if not isinstance(self.system, System):
            raise TypeError(
                f"system must be a System, got {type(self.system).__name__}"
            )
        if self.gpus_per_node > self.system.gpus_per_node:
            raise ValueError(
                f"gpus_per_node must be <= {self.system.gpus_per_node} on a "
                f"{self.system.name}, got {self.gpus_per_node}"
            )
        check_fields(self)

    @classmethod
    def from_node_shape(cls, node_shape: str, preset: str = "dgx-h100") -> Cluster:
        """Build a cluster from a shape string and a key of :data:`infralens.hardware.SYSTEMS`.

        >>> Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-a100").system.gpu.name
        'A100 SXM4 80GB'

        Raises ``ValueError`` for a malformed shape or an unknown preset.
        """
        nodes, gpus = parse_node_shape(node_shape)
        return cls(
            nodes, gpus, system(check_choice("preset", preset, list(SYSTEMS)))
        )

    @property
    def world_size(self) -> int:
        """Number of GPUs."""
        return self.nodes * self.gpus_per_node

    @property
    def domain_size(self) -> int:
        """GPUs per NVLink domain: the node, or the design's larger fabric (GB200 NVL72)."""
        # [start:nvlink-domain]
        # a DGX: the node; an NVL72: 18 trays, scaled if a tray is partly used
        if self.system.nvlink_domain > self.system.gpus_per_node:
            return (
                self.system.nvlink_domain
                // self.system.gpus_per_node
                * self.gpus_per_node
            )
        return self.gpus_per_node
        # [end:nvlink-domain]

    # [start:link-tiers]
    @property
    def intra(self) -> LinkTier:
        """The NVLink tier: one GPU's NVLink bandwidth per direction."""
        return LinkTier("nvlink", self.system.gpu.nvlink_bytes_per_s)

    @property
    def inter(self) -> LinkTier:
        """The network tier: one GPU's share of its node's adapters, per direction."""
        s = self.system
        # one GPU's share = adapters per node x bytes/s per adapter / GPUs per node
        return LinkTier(
            "network", s.nics_per_node * s.nic_bytes_per_s // s.gpus_per_node
        )
        # [end:link-tiers]

    def node_of(self, rank: int) -> int:
        """Node index of *rank*: ``rank // gpus_per_node``.

        >>> Cluster.from_node_shape("2_nodes_x_8_gpus").node_of(9)
        1

        Raises ``ValueError`` if *rank* is outside the cluster.
        """
        r = (
            rank
            if type(rank) is int and 0 <= rank < 2**63
            else nonnegative_int("rank", rank)
        )
        if r >= self.world_size:
            raise ValueError(
                f"rank must be < world_size {self.world_size}, got {r}"
            )
        return r // self.gpus_per_node

    def domain_of(self, rank: int) -> int:
        """NVLink domain of *rank*: ``rank // domain_size``.

        >>> Cluster.from_node_shape("36_nodes_x_4_gpus", "gb200-nvl72").domain_of(100)
        1

        Raises ``ValueError`` if *rank* is outside the cluster.
        """
        self.node_of(rank)
        return int(rank) // self.domain_size

    @typed
    def tier_of(self, ranks: Iterable[int]) -> LinkTier:
        """The slowest tier a group crosses: ``intra`` if all ranks share an NVLink domain.

        >>> c = Cluster.from_node_shape("2_nodes_x_4_gpus")
        >>> c.tier_of([0, 3]).name, c.tier_of([3, 4]).name, c.tier_of([5]).name
        ('nvlink', 'network', 'nvlink')

        Raises ``ValueError`` for an empty group or a rank outside the cluster.
        """
        # [start:domains-of-group]
        domains = set()
        for r in ranks:
            if nonnegative_int("ranks", r) >= self.world_size:
                raise ValueError(
                    f"ranks: rank must be < world_size {self.world_size}, got {r}"
                )
            domains.add(self.domain_of(r))
        if not domains:
            raise ValueError("ranks must hold at least one rank")
        return self.intra if len(domains) == 1 else self.inter
        # [end:domains-of-group]
