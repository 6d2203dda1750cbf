"""infralens.context_parallel's layouts and Ulysses, and infralens.ring_attention, on gloo.

One process group per degree (cp = 2 and cp = 4) runs every case, on tensors
whose values name their own (token, head) position, so a block in the wrong
place or order cannot go unnoticed:

* the Ulysses re-shard with ``dist.all_to_all_single`` (sequence-sharded to
  head-sharded and back);
* a ring pass of K/V blocks with blocking ``dist.send`` / ``dist.recv``;
* an all-gather of K/V shards in the load-balanced layout, as Llama 3 does;
* causal attention computed blockwise on the load-balanced layout, ring
  style with an online softmax and all-gather style, against unsharded
  attention in float64.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.context_parallel import (  # noqa: E402
    causal_work,
    chunk_order,
    token_ranges,
    ulysses_placement,
)
from infralens.ring_attention import ring_kv_block_bytes, ring_schedule  # noqa: E402

DEGREES = (2, 4)
SEQ_LEN, HEADS, HEAD_DIM = 16, 4, 3


def _qkv() -> tuple[Any, Any, Any]:
    gen = torch.Generator().manual_seed(0)
    shape = (SEQ_LEN, HEADS, HEAD_DIM)
    return tuple(torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))


def _full_causal_attention(q: Any, k: Any, v: Any) -> Any:
    scores = torch.einsum("qhd,khd->hqk", q, k) / HEAD_DIM**0.5
    mask = torch.ones(SEQ_LEN, SEQ_LEN, dtype=torch.bool).tril()
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return torch.einsum("hqk,khd->qhd", weights, v)


def _positions(ranges: Any) -> Any:
    return torch.cat([torch.arange(a, b) for a, b in ranges])


def _ulysses(rank: int, world: int) -> dict[str, Any]:
    import torch.distributed as dist

    c, g = SEQ_LEN // world, HEADS // world
    labels = torch.arange(SEQ_LEN * HEADS, dtype=torch.float64).reshape(SEQ_LEN, HEADS)
    local = labels[rank * c : (rank + 1) * c, :, None].expand(c, HEADS, HEAD_DIM).contiguous()
    # chunk j of the send buffer is head group j: all_to_all_single splits dim 0
    send = local.reshape(c, world, g, HEAD_DIM).permute(1, 0, 2, 3).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send)
    by_heads = received.reshape(SEQ_LEN, g, HEAD_DIM)
    back = torch.empty_like(received)
    dist.all_to_all_single(back, by_heads.reshape(world, c, g, HEAD_DIM).contiguous())
    restored = back.permute(1, 0, 2, 3).reshape(c, HEADS, HEAD_DIM)
    return {
        "labels": [int(x) for x in by_heads[:, :, 0].reshape(-1).tolist()],
        "copies_agree": bool((by_heads == by_heads[:, :, :1]).all()),
        "restored": bool(torch.equal(restored, local)),
    }


def _ring_pass(rank: int, world: int, k: Any, v: Any, pos: Any, step: Any) -> None:
    """Rotate (k, v, pos) around the ring with blocking send/recv, calling step() on each block.

    Even ranks send before they receive and odd ranks the other way round, so
    the blocking calls pair up on an even ring (the demo uses batch_isend_irecv).
    """
    import torch.distributed as dist

    block = (k, v, pos.to(torch.float64))
    for t in range(world):
        step(t, block)
        if t == world - 1:
            return
        incoming = tuple(torch.empty_like(x) for x in block)
        send = [lambda x=x: dist.send(x, (rank + 1) % world) for x in block]
        recv = [lambda x=x: dist.recv(x, (rank - 1) % world) for x in incoming]
        for call in send + recv if rank % 2 == 0 else recv + send:
            call()
        block = incoming


def _ring_attention(rank: int, world: int) -> dict[str, Any]:
    q, k, v = _qkv()
    mine = _positions(token_ranges(SEQ_LEN, world, "load_balanced")[rank])
    q_loc, k_loc, v_loc = q[mine], k[mine], v[mine]
    shape = (HEADS, len(mine))
    m = torch.full(shape, float("-inf"), dtype=torch.float64)
    total = torch.zeros(shape, dtype=torch.float64)
    acc = torch.zeros(len(mine), HEADS, HEAD_DIM, dtype=torch.float64)
    seen: list[list[int]] = []
    pairs = [0]
    received = [0]

    def step(t: int, block: tuple[Any, Any, Any]) -> None:
        nonlocal m, total, acc
        k_b, v_b, pos_b = block
        seen.append([int(p) for p in pos_b.tolist()])
        if t > 0:
            received[0] += (k_b.numel() + v_b.numel()) * k_b.element_size()
        allowed = pos_b.long()[None, :] <= mine[:, None]
        pairs[0] += int(allowed.sum())
        scores = torch.einsum("qhd,khd->hqk", q_loc, k_b) / HEAD_DIM**0.5
        scores = scores.masked_fill(~allowed, float("-inf"))
        m_new = torch.maximum(m, scores.amax(dim=-1))
        scale = torch.exp(m - m_new).nan_to_num(0.0)
        p = torch.exp(scores - m_new[..., None])
        total = total * scale + p.sum(dim=-1)
        acc = acc * scale.T[..., None] + torch.einsum("hqk,khd->qhd", p, v_b)
        m = m_new

    _ring_pass(rank, world, k_loc, v_loc, mine, step)
    out = acc / total.T[..., None]
    expected = _full_causal_attention(q, k, v)[mine]
    return {
        "first_token_per_step": [s[0] for s in seen],
        "pairs": pairs[0],
        "bytes_received": received[0],
        "matches_unsharded": bool(torch.allclose(out, expected, rtol=1e-12, atol=1e-12)),
    }


def _all_gather_attention(rank: int, world: int) -> dict[str, Any]:
    import torch.distributed as dist

    q, k, v = _qkv()
    mine = _positions(token_ranges(SEQ_LEN, world, "load_balanced")[rank])
    gathered = [torch.empty(len(mine) * world, *x.shape[1:], dtype=x.dtype) for x in (k, v)]
    pos = torch.empty(len(mine) * world, dtype=torch.float64)
    dist.all_gather_into_tensor(gathered[0], k[mine].contiguous())
    dist.all_gather_into_tensor(gathered[1], v[mine].contiguous())
    dist.all_gather_into_tensor(pos, mine.to(torch.float64))
    pos_long = pos.long()
    allowed = pos_long[None, :] <= mine[:, None]
    scores = torch.einsum("qhd,khd->hqk", q[mine], gathered[0]) / HEAD_DIM**0.5
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    out = torch.einsum("hqk,khd->qhd", weights, gathered[1])
    expected = _full_causal_attention(q, k, v)[mine]
    return {
        "gathered_positions": [int(p) for p in pos_long.tolist()],
        "matches_unsharded": bool(torch.allclose(out, expected, rtol=1e-12, atol=1e-12)),
    }


def _record(rank: int, world: int) -> dict[str, dict[str, Any]]:
    """Every case for one degree in one process group (spawning ranks is the slow part)."""
    return {
        "ulysses": _ulysses(rank, world),
        "ring": _ring_attention(rank, world),
        "all_gather": _all_gather_attention(rank, world),
    }


def _results(world: int, case: str) -> list[dict[str, Any]]:
    return [r[case] for r in run_on_ranks_cached(_record, world)]


@pytest.mark.parametrize("world", DEGREES)
def test_ulysses_all_to_all_lands_the_predicted_head_blocks(world: int) -> None:
    predicted = ulysses_placement(SEQ_LEN, world, HEADS)
    for rank, got in enumerate(_results(world, "ulysses")):
        assert got["labels"] == [t * HEADS + h for t, h in predicted[rank]], f"rank {rank}"
        assert got["copies_agree"], f"rank {rank}"
        assert got["restored"], f"rank {rank}: the output all-to-all did not undo the first"


@pytest.mark.parametrize("world", DEGREES)
def test_ring_delivers_kv_blocks_in_the_predicted_order(world: int) -> None:
    starts = [ranges[0][0] for ranges in token_ranges(SEQ_LEN, world, "load_balanced")]
    block = ring_kv_block_bytes(SEQ_LEN, world, HEADS, HEAD_DIM, bytes_per_element=8)
    for rank, got in enumerate(_results(world, "ring")):
        assert got["first_token_per_step"] == [starts[s] for s in ring_schedule(world)[rank]]
        assert got["bytes_received"] == (world - 1) * block, f"rank {rank}"


@pytest.mark.parametrize("world", DEGREES)
def test_load_balanced_ring_attention_equals_unsharded_causal_attention(world: int) -> None:
    work = causal_work(SEQ_LEN, world, "load_balanced")
    for rank, got in enumerate(_results(world, "ring")):
        assert got["matches_unsharded"], f"rank {rank}"
        assert got["pairs"] == work[rank], f"rank {rank}"


@pytest.mark.parametrize("world", DEGREES)
def test_all_gather_of_kv_returns_chunks_in_head_tail_order(world: int) -> None:
    size = SEQ_LEN // (2 * world)
    for rank, got in enumerate(_results(world, "all_gather")):
        chunks = [p // size for p in got["gathered_positions"][::size]]
        assert chunks == list(chunk_order(world)), f"rank {rank}"
        assert got["matches_unsharded"], f"rank {rank}"


@pytest.mark.parametrize("world", DEGREES)
def test_torch_head_tail_load_balancer_matches_token_ranges(world: int) -> None:
    # PyTorch 2.13's context_parallel shards with this balancer by default (private API).
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import (
        _HeadTailLoadBalancer,
    )

    indices = _HeadTailLoadBalancer(SEQ_LEN, world, "cpu")._generate_indices()
    expected = [
        t
        for ranges in token_ranges(SEQ_LEN, world, "load_balanced")
        for a, b in ranges
        for t in range(a, b)
    ]
    assert indices.reshape(-1).tolist() == expected
