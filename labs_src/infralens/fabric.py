"""The network side of a collective: bytes that leave a node, and NVLS's buffer memory.

A node's adapters carry what its GPUs cannot settle over NVLink. How much
that is depends on the algorithm NCCL runs (NCCL 2.30.7):

- a **ring** runs through every rank and crosses each node boundary once per
  channel, so a node sends what one ring link carries, ``2(N - 1)/N · S`` for
  an all-reduce of ``S`` bytes over ``N`` ranks;
- a **tree** (and NVLSTree, NVLS inside the node) reduces inside the node
  first, then runs NCCL's double binary tree between nodes, each tree
  carrying half the buffer (``src/graph/trees.cc``): a node sends ``S/2``
  over each of its tree links;
- **CollNet** with SHARP switches sends each node's reduced buffer into the
  switches once and receives the sum once: ``S`` each way at any scale.

>>> algorithms = ("ring", "tree", "collnet")
>>> [node_egress_bytes(a, 1, nodes=2, gpus_per_node=8) for a in algorithms]
[Fraction(15, 8), Fraction(1, 1), Fraction(1, 1)]
>>> [node_egress_bytes(a, 1, nodes=64, gpus_per_node=8) for a in algorithms]
[Fraction(511, 256), Fraction(2, 1), Fraction(1, 1)]

NVLS needs GPU memory the switch can multicast into; NCCL allocates it per
communicator when NVLS is enabled (``src/transport/nvls.cc``):

>>> nvls_buffer_bytes(heads=8, channels=16) / 2**20          # MiB per GPU
256.0
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import check_choice, nonnegative_int, positive_int
from infralens.collectives import ring_bytes_sent

__all__ = [
    "ALGORITHMS",
    "NCCL_STEPS",
    "NVLS_CHANNELS",
    "NVLS_CHUNK_BYTES",
    "node_egress_bytes",
    "nvls_buffer_bytes",
    "tree_links",
]

ALGORITHMS = ("ring", "tree", "nvls_tree", "collnet")
"""All-reduce algorithms between nodes: NCCL_ALGO's Ring, Tree, NVLSTree and CollNet."""

NCCL_STEPS = 8
"""Slots in each NCCL connection's buffer (``NCCL_STEPS``, ``src/include/device.h``)."""

NVLS_CHUNK_BYTES = 128 * 1024
"""Default NVLS chunk, the size of one slot (``NCCL_NVLS_CHUNKSIZE``, ``src/transport/nvls.cc``)."""

NVLS_CHANNELS = {"hopper": 16, "blackwell-nvl": 24, "blackwell": 32}
"""NVLS channels NCCL 2.30.7 starts from (``src/transport/nvls.cc``): 16 on Hopper;
on Blackwell 24 inside one NVLink domain and 32 across several (its tuning may
change both)."""


def _btree(nranks: int, rank: int) -> tuple[int, int, int]:
    """Parent and two children of *rank* in NCCL's binary tree (ncclGetBtree); -1 for none."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1 if nranks > 1 else -1)
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    low = bit >> 1
    down0 = -1 if low == 0 else rank - low
    down1 = -1 if low == 0 else rank + low
    while down1 >= nranks:
        down1 = -1 if low == 0 else rank + low
        low >>= 1
    return up, down0, down1


def tree_links(nodes: int, node: int) -> tuple[int, int]:
    """Network links of *node* in each of NCCL's two trees: (parent + children) per tree.

    The first tree is ncclGetBtree over the nodes; the second mirrors it when
    the node count is even and shifts it by one when it is odd (ncclGetDtree),
    so a leaf of one tree is an inner node of the other.

    >>> tree_links(2, 0), tree_links(2, 1)
    ((1, 1), (1, 1))
    >>> [sum(tree_links(8, n)) for n in range(8)]
    [2, 4, 4, 4, 4, 4, 4, 2]
    >>> tree_links(1, 0)                     # one node: no network tree
    (0, 0)
    >>> tree_links(4, 4)
    Traceback (most recent call last):
    ...
    ValueError: node must be in range(0, 4), got 4

    Raises ``ValueError`` if *nodes* < 1 or *node* is not a node index.
    """
    n = positive_int("nodes", nodes)
    r = nonnegative_int("node", node)
    if r >= n:
        raise ValueError(f"node must be in range(0, {n}), got {r}")
    first = _btree(n, r)
    # odd: the second tree is the first shifted by one rank; even: its mirror image
    second = _btree(n, (r - 1) % n) if n % 2 else _btree(n, n - 1 - r)
    return sum(x != -1 for x in first), sum(x != -1 for x in second)


def node_egress_bytes(
    algorithm: str, nbytes: int, *, nodes: int, gpus_per_node: int
) -> Fraction:
    """Bytes the busiest node sends into the network for an all-reduce of *nbytes* per GPU.

    - ``ring``: ``ring_bytes_sent("all_reduce", S, nodes · gpus_per_node)``,
      ``2(N - 1)/N · S``: one ring link's traffic, whichever channel carries it;
    - ``tree`` and ``nvls_tree``: ``S/2 · links``, the most links any node has
      in the two trees of :func:`tree_links` (the node's GPUs reduce over
      NVLink first, so the count does not depend on *gpus_per_node*);
    - ``collnet``: ``S``, once into the switches (what it receives back is
      the same ``S`` the other way).

    Received bytes are the same by symmetry. One node sends nothing.

    >>> node_egress_bytes("ring", 2**30, nodes=8, gpus_per_node=8) / 2**30
    Fraction(63, 32)
    >>> node_egress_bytes("tree", 2**30, nodes=8, gpus_per_node=8) / 2**30
    Fraction(2, 1)
    >>> node_egress_bytes("collnet", 10, nodes=1, gpus_per_node=8)
    Fraction(0, 1)
    >>> node_egress_bytes("pat", 1, nodes=2, gpus_per_node=8)
    Traceback (most recent call last):
    ...
    ValueError: algorithm must be one of 'ring', 'tree', 'nvls_tree', 'collnet'; got 'pat'

    Raises ``ValueError`` for an unknown *algorithm*, negative *nbytes*, or a
    count below 1.
    """
    check_choice("algorithm", algorithm, ALGORITHMS)
    s = nonnegative_int("nbytes", nbytes)
    n = positive_int("nodes", nodes)
    g = positive_int("gpus_per_node", gpus_per_node)
    if n == 1:
        return Fraction(0)
    if algorithm == "ring":
        # 2(N-1)/N · S through the one ring link that leaves the node
        return ring_bytes_sent("all_reduce", s, n * g)
    if algorithm == "collnet":
        return Fraction(s)
    # each tree carries S/2: up to the parent in the reduce, down to each child in the broadcast
    return Fraction(s, 2) * max(sum(tree_links(n, node)) for node in range(n))


def nvls_buffer_bytes(
    *, heads: int, channels: int, chunk_bytes: int = NVLS_CHUNK_BYTES
) -> int:
    """GPU memory NCCL allocates per GPU for one communicator's NVLS buffers.

    ``heads · channels · 2 · chunk_bytes · NCCL_STEPS``: for every NVLS head
    and channel a reduce buffer and a broadcast buffer of ``NCCL_STEPS``
    slots (``ncclNvlsBufferSetup``, NCCL 2.30.7). *heads* is NCCL's
    ``nHeads``, which ``NCCL_DEBUG=INFO`` prints on the ``NVLS comm`` line with
    the total; *channels* is the NVLS channel count (:data:`NVLS_CHANNELS`).
    Every communicator that uses NVLS pays it: a job with separate TP, DP
    and EP process groups pays it once per group a GPU belongs to.

    >>> nvls_buffer_bytes(heads=8, channels=16) // 2**20       # H100, one node
    256
    >>> nvls_buffer_bytes(heads=8, channels=16, chunk_bytes=64 * 1024) // 2**20
    128
    >>> nvls_buffer_bytes(heads=0, channels=16)
    Traceback (most recent call last):
    ...
    ValueError: heads must be >= 1, got 0

    Raises ``ValueError`` for a count or size below 1.
    """
    h = positive_int("heads", heads)
    c = positive_int("channels", channels)
    return h * c * 2 * positive_int("chunk_bytes", chunk_bytes) * NCCL_STEPS
