"""MoE systems: what crosses the network in a dispatch, the dropless buffer, shared experts.

:mod:`infralens.expert_dispatch` counts a flat all-to-all: one copy per (token,
expert) to the rank that holds the expert. Production dispatchers for
multi-node expert parallelism (DeepEP's normal kernels, DeepSeek-V3 §3.2.2)
send a token across the network *once per destination node*, to the GPU with
the same local index there, and fan it out over NVLink; node-limited routing
caps how many nodes a token reaches. This module counts both, sizes the
receive buffer a dropless rank must be ready for, splits an MoE layer's FLOPs
between routed and shared experts, and states DualPipe's bubble next to 1F1B's.

>>> from infralens.moe_systems import network_copies, receive_rows
>>> # two tokens on rank 0; 8 experts, one per rank, on 2 nodes
>>> routes = [(0, 1, 4), (6, 7)]
>>> network_copies(routes, experts=8, ep=8, gpus_per_node=4, rank=0)
NetworkCopies(direct=3, forwarded=2, nvlink=3)
>>> receive_rows(4096, ep=64, experts=256, top_k=8)   # balanced vs worst case, per rank
(32768, 1048576)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

from infralens._typecheck import typed
from infralens._validate import (
    divisible,
    positive_int,
    positive_number,
    rank_in,
    ranks_cap,
)
from infralens.expert_dispatch import expert_rank, send_buffer

__all__ = [
    "NetworkCopies",
    "bubble_1f1b",
    "bubble_dualpipe",
    "bubble_zb1p",
    "expected_nodes",
    "forwarding_budget",
    "moe_flops_per_token",
    "network_copies",
    "receive_rows",
]


@dataclass(frozen=True)
class NetworkCopies:
    """Token copies one rank's dispatch puts on each link.

    ``direct``: copies a flat all-to-all sends to ranks on other nodes (one per expert);
    ``forwarded``: copies sent over the network once per destination node, to the GPU
    with the same local index (the same rail); ``nvlink``: copies that peer then forwards
    over NVLink to the GPUs holding the experts (one per destination rank, its own
    included). Copies to experts on the sender's own node travel NVLink directly and are
    counted in neither network figure.
    """

    direct: int
    forwarded: int
    nvlink: int


@typed
def network_copies(
    routes: Sequence[Sequence[int]],
    *,
    experts: int,
    ep: int,
    gpus_per_node: int,
    rank: int,
) -> NetworkCopies:
    """Count the network and NVLink copies of rank *rank*'s dispatch, flat and forwarded.

    For each token, with D its destination ranks on other nodes and N their nodes:
    direct += copies to experts on other nodes; forwarded += len(N); nvlink += len(D).

    >>> local = {"experts": 8, "ep": 8, "gpus_per_node": 4, "rank": 0}
    >>> network_copies([(0, 1, 2, 3)], **local)   # all on rank 0's node
    NetworkCopies(direct=0, forwarded=0, nvlink=0)
    >>> network_copies([(4, 5, 6, 7)], **local)
    NetworkCopies(direct=4, forwarded=1, nvlink=4)
    >>> network_copies([(0,)], experts=8, ep=6, gpus_per_node=4, rank=0)
    Traceback (most recent call last):
    ...
    ValueError: ep must be divisible by gpus_per_node: 6 % 4 = 2

    Raises ``ValueError`` as :func:`infralens.expert_dispatch.send_buffer` does, if *ep*
    is not a whole number of nodes, or *rank* is not in ``range(ep)``.
    """
    g = positive_int("gpus_per_node", gpus_per_node)
    divisible("ep", positive_int("ep", ep), "gpus_per_node", g)
    home = rank_in("rank", rank, ep) // g
    send_buffer(routes, experts, ep)  # validates the routes
    direct = forwarded = nvlink = 0
    for chosen in routes:
        ranks = [expert_rank(x, experts, ep) for x in chosen]
        away = [r for r in ranks if r // g != home]
        direct += len(away)
        forwarded += len({r // g for r in away})
        nvlink += len(set(away))
    return NetworkCopies(direct, forwarded, nvlink)


@typed
def expected_nodes(experts: int, nodes: int, top_k: int) -> Fraction:
    """Expected distinct nodes a token reaches when its top-k experts are uniformly random.

    E[nodes] = n · (1 - C(E - E/n, k) / C(E, k))   (each node is missed with that chance)

    >>> expected_nodes(experts=8, nodes=2, top_k=1)
    Fraction(1, 1)
    >>> round(float(expected_nodes(experts=256, nodes=8, top_k=8)), 2)   # DeepSeek-V3
    5.29
    >>> expected_nodes(experts=8, nodes=2, top_k=9)
    Traceback (most recent call last):
    ...
    ValueError: top_k must be <= experts and <= 1024, got 9 > 8

    Raises ``ValueError`` if *experts* is not divisible by *nodes*, *top_k* > *experts*,
    or *experts* > 2**24.
    """
    e, n = ranks_cap("experts", experts), positive_int("nodes", nodes)
    k = positive_int("top_k", top_k)
    divisible("experts", e, "nodes", n)
    if k > min(e, 1024):
        raise ValueError(
            f"top_k must be <= experts and <= 1024, got {k} > {min(e, 1024)}"
        )
    return n * (1 - Fraction(comb(e - e // n, k), comb(e, k)))


@typed
def forwarding_budget(
    *, node_limit: int, nvlink_bytes_per_s: int, network_bytes_per_s: int
) -> tuple[Fraction, Fraction]:
    """Experts a token can reach per node, and in all, for the network time it already pays.

    A token crosses the network once per node and fans out there over NVLink; the
    fan-out costs nothing extra while it takes no longer than the crossing:
    per node = NVLink / network bandwidth; per token = node_limit × per node.

    >>> forwarding_budget(node_limit=4, nvlink_bytes_per_s=160 * 10**9,
    ...                   network_bytes_per_s=50 * 10**9)        # DeepSeek-V3's H800s
    (Fraction(16, 5), Fraction(64, 5))
    >>> forwarding_budget(node_limit=0, nvlink_bytes_per_s=1, network_bytes_per_s=1)
    Traceback (most recent call last):
    ...
    ValueError: node_limit must be >= 1, got 0

    Raises ``ValueError`` for a limit or bandwidth below 1.
    """
    per_node = Fraction(
        positive_int("nvlink_bytes_per_s", nvlink_bytes_per_s),
        positive_int("network_bytes_per_s", network_bytes_per_s),
    )
    return per_node, positive_int("node_limit", node_limit) * per_node


@typed
def receive_rows(
    tokens_per_rank: int,
    *,
    ep: int,
    experts: int,
    top_k: int,
    per_rank_once: bool = False,
) -> tuple[int, int]:
    """Rows one EP rank receives in a dispatch: balanced, and the dropless worst case.

    balanced = T · k                      (every rank receives its share, T·k·ep / ep)
    worst    = ep · T · min(k, E / ep)    (every token of every rank picks this rank's experts)

    With ``per_rank_once`` a token reaches a rank once whatever the number of its
    experts there (DeepEP sends one row and the top-k indices), so worst = ep · T.
    A dropless layer has no capacity to stop the worst case: the receive buffer, and the
    expert activations after it, must be sized for it or allocated per step.

    >>> receive_rows(4096, ep=64, experts=256, top_k=8, per_rank_once=True)
    (32768, 262144)
    >>> receive_rows(10, ep=1, experts=4, top_k=2)         # one rank holds every expert
    (20, 20)
    >>> receive_rows(10, ep=3, experts=4, top_k=2)
    Traceback (most recent call last):
    ...
    ValueError: experts must be divisible by ep: 4 % 3 = 1

    Raises ``ValueError`` for a size below 1, *experts* not divisible by *ep*, or
    *top_k* > *experts*.
    """
    t, p = positive_int("tokens_per_rank", tokens_per_rank), positive_int("ep", ep)
    e, k = positive_int("experts", experts), positive_int("top_k", top_k)
    local = divisible("experts", e, "ep", p) // p
    if k > e:
        raise ValueError(f"top_k must be <= experts, got {k} > {e}")
    worst = p * t * (1 if per_rank_once else min(k, local))
    return t * k, worst


@typed
def moe_flops_per_token(
    hidden: int, expert_ffn: int, *, top_k: int, shared: int = 0, gated: bool = True
) -> tuple[int, int]:
    """Training FLOPs per token of one MoE layer's experts: (routed, shared).

    One expert's MLP has m·h·f weights (m = 3 gated, 2 otherwise), so 6·m·h·f FLOPs
    per token for forward and backward; routed = k times that, shared = *shared* times.
    Shared experts see every token on its own rank: no all-to-all, so their GEMMs can
    run while the dispatch is in flight.

    >>> moe_flops_per_token(7168, 2048, top_k=8, shared=1)     # DeepSeek-V3's MoE layer
    (2113929216, 264241152)
    >>> moe_flops_per_token(4, 8, top_k=1, gated=False)
    (384, 0)

    Raises ``ValueError`` for a size below 1 or a negative *shared*.
    """
    h, f = positive_int("hidden", hidden), positive_int("expert_ffn", expert_ffn)
    k = positive_int("top_k", top_k)
    if isinstance(shared, bool) or shared < 0:
        raise ValueError(f"shared must be an int >= 0, got {shared}")
    one = 6 * (3 if gated else 2) * h * f
    return k * one, shared * one


def _times(**values: object) -> dict[str, Fraction]:
    return {name: positive_number(name, v) for name, v in values.items()}


def _even_stages(stages: int) -> int:
    p = positive_int("stages", stages)
    if p % 2:
        raise ValueError(f"stages must be even for DualPipe, got {p}")
    return p


@typed
def bubble_1f1b(stages: int, *, forward: Fraction, backward: Fraction) -> Fraction:
    """1F1B's bubble per DeepSeek-V3's Table 2: (PP - 1)(F + B), in units of time.

    >>> bubble_1f1b(16, forward=1, backward=2)
    Fraction(45, 1)

    Raises ``ValueError`` for *stages* below 1 or a time <= 0.
    """
    t = _times(forward=forward, backward=backward)
    return (positive_int("stages", stages) - 1) * (t["forward"] + t["backward"])


@typed
def bubble_zb1p(
    stages: int, *, forward: Fraction, backward: Fraction, weight: Fraction
) -> Fraction:
    """ZB1P's bubble per DeepSeek-V3's Table 2: (PP - 1)(F + B - 2W).

    >>> bubble_zb1p(16, forward=1, backward=2, weight=1)
    Fraction(15, 1)

    Raises ``ValueError`` for *stages* below 1, a time <= 0, or W >= B.
    """
    t = _times(forward=forward, backward=backward, weight=weight)
    if t["weight"] >= t["backward"]:
        raise ValueError(
            f"weight must be < backward, got {t['weight']} >= {t['backward']}"
        )
    return (positive_int("stages", stages) - 1) * (
        t["forward"] + t["backward"] - 2 * t["weight"]
    )


@typed
def bubble_dualpipe(
    stages: int, *, overlapped: Fraction, backward: Fraction, weight: Fraction
) -> Fraction:
    """DualPipe's bubble per DeepSeek-V3's Table 2: (PP/2 - 1)(F&B + B - 3W).

    F&B is the time of one forward chunk and one backward chunk run together, one
    microbatch's all-to-alls hidden under the other's compute; DualPipe holds two
    copies of the parameters (one per direction) and PP + 1 microbatches of activations.

    >>> # F&B = F + B: nothing overlapped
    >>> bubble_dualpipe(16, overlapped=3, backward=2, weight=1)
    Fraction(14, 1)
    >>> bubble_dualpipe(15, overlapped=3, backward=2, weight=1)
    Traceback (most recent call last):
    ...
    ValueError: stages must be even for DualPipe, got 15

    Raises ``ValueError`` for odd *stages*, a time <= 0, or 3W > F&B + B.
    """
    p = _even_stages(stages)
    t = _times(overlapped=overlapped, backward=backward, weight=weight)
    inner = t["overlapped"] + t["backward"] - 3 * t["weight"]
    if inner < 0:
        raise ValueError(
            f"overlapped + backward - 3 * weight must be >= 0, got {inner}"
        )
    return (p // 2 - 1) * inner
