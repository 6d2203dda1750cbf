"""infralens.fabric: bytes that leave a node per algorithm, NCCL's trees, NVLS buffers."""

from __future__ import annotations

from fractions import Fraction

import pytest

from infralens.collectives import ring_bytes_sent
from infralens.fabric import (
    NCCL_STEPS,
    NVLS_CHUNK_BYTES,
    _btree,
    node_egress_bytes,
    nvls_buffer_bytes,
    tree_links,
)

NODES = [1, 2, 3, 4, 5, 7, 8, 13, 16, 33, 64, 128]


@pytest.mark.parametrize("n", NODES)
def test_ncclgetbtree_builds_one_tree_whose_edges_agree(n: int) -> None:
    parents = {}
    for r in range(n):
        up, d0, d1 = _btree(n, r)
        parents[r] = up
        for child in (d0, d1):
            if child != -1:
                assert 0 <= child < n and _btree(n, child)[0] == r
    roots = [r for r, up in parents.items() if up == -1]
    assert roots == [0]
    for r in range(n):  # every rank reaches the root
        seen, x = set(), r
        while x != -1:
            assert x not in seen
            seen.add(x)
            x = parents[x]


@pytest.mark.parametrize("n", NODES)
def test_each_of_the_two_trees_has_n_minus_1_edges(n: int) -> None:
    links = [tree_links(n, r) for r in range(n)]
    for t in (0, 1):
        assert sum(node[t] for node in links) == 2 * (n - 1)  # each edge counted at both ends
    # a binary tree: a parent and at most two children
    assert all(max(node) <= 3 for node in links)


@pytest.mark.parametrize("n", [m for m in NODES if m > 1])
def test_egress_by_algorithm(n: int) -> None:
    s, g = 3 * 2**20, 8
    ring = node_egress_bytes("ring", s, nodes=n, gpus_per_node=g)
    tree = node_egress_bytes("tree", s, nodes=n, gpus_per_node=g)
    assert ring == ring_bytes_sent("all_reduce", s, n * g) < 2 * s
    assert node_egress_bytes("nvls_tree", s, nodes=n, gpus_per_node=g) == tree
    assert node_egress_bytes("collnet", s, nodes=n, gpus_per_node=g) == s
    # a tree never sends less than SHARP, and never more than twice the buffer
    assert s <= tree <= 2 * s
    # only with two or three nodes does the tree send less than the ring
    assert (tree < ring) == (n <= 3)


def test_two_nodes_send_each_byte_once_by_tree_and_almost_twice_by_ring() -> None:
    ring = node_egress_bytes("ring", 1, nodes=2, gpus_per_node=8)
    tree = node_egress_bytes("tree", 1, nodes=2, gpus_per_node=8)
    assert tree == 1 and ring / tree == Fraction(2 * 15, 16)


def test_one_node_sends_nothing() -> None:
    for a in ("ring", "tree", "nvls_tree", "collnet"):
        assert node_egress_bytes(a, 10**9, nodes=1, gpus_per_node=8) == 0


def test_nvls_buffers_scale_with_each_factor() -> None:
    base = nvls_buffer_bytes(heads=1, channels=1, chunk_bytes=1)
    assert base == 2 * NCCL_STEPS
    assert nvls_buffer_bytes(heads=8, channels=16) == 8 * 16 * NVLS_CHUNK_BYTES * base
    assert nvls_buffer_bytes(heads=4, channels=16) * 2 == nvls_buffer_bytes(heads=8, channels=16)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: node_egress_bytes("ring", -1, nodes=2, gpus_per_node=8), ValueError, "nbytes"),
        (lambda: node_egress_bytes("ring", 1, nodes=0, gpus_per_node=8), ValueError, "nodes"),
        (lambda: node_egress_bytes("ring", 1, nodes=2, gpus_per_node=True), TypeError, "gpus"),
        (lambda: node_egress_bytes("Ring", 1, nodes=2, gpus_per_node=8), ValueError, "algorithm"),
        (lambda: tree_links(2, -1), ValueError, "node"),
        (lambda: nvls_buffer_bytes(heads=8, channels=0), ValueError, "channels"),
        (lambda: nvls_buffer_bytes(heads=8, channels=16, chunk_bytes=1.5), TypeError, "chunk"),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()  # type: ignore[operator]
