"""Lab 10 demo: load-balanced ring attention, checked against infralens.ring_attention.

Run with torchrun (gloo on CPU, NCCL on GPUs)::

    python -m pip install -e ".[plan,demos]"    # once, from the repository root
    torchrun --nproc-per-node 4 labs_src/demos/lab10_ring_attention.py --backend gloo

Each rank owns chunks r and 2*cp - 1 - r of a 16-token sequence, passes its
K/V block around the ring with ``batch_isend_irecv``, merges the partial
results with an online softmax, and prints one line: the K/V blocks it saw
in order, the unmasked (query, key) pairs it computed and the bytes it
received, each next to what the module predicted, and the largest
difference from unsharded causal attention. It exits 1 on any mismatch.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from _demo import finish, start, stop

from infralens.context_parallel import causal_work, token_ranges
from infralens.ring_attention import ring_kv_block_bytes, ring_schedule

SEQ_LEN, HEADS, HEAD_DIM = 16, 4, 8


def main() -> int:
    rank, world, device = start(__doc__.splitlines()[0])
    if SEQ_LEN % (2 * world):
        return stop(
            f"lab10_ring_attention: {SEQ_LEN} tokens must split into 2 * world_size "
            f"chunks: {SEQ_LEN} % {2 * world} = {SEQ_LEN % (2 * world)}"
        )

    gen = torch.Generator().manual_seed(0)  # every rank builds the same q, k, v
    q, k, v = (
        torch.randn(SEQ_LEN, HEADS, HEAD_DIM, generator=gen, dtype=torch.float64)
        for _ in range(3)
    )
    q, k, v = q.to(device), k.to(device), v.to(device)
    mine = torch.cat(
        [
            torch.arange(a, b)
            for a, b in token_ranges(SEQ_LEN, world, "load_balanced")[rank]
        ]
    ).to(device)

    shape = (HEADS, len(mine))
    top = torch.full(shape, float("-inf"), dtype=torch.float64, device=device)
    total = torch.zeros(shape, dtype=torch.float64, device=device)
    acc = torch.zeros(
        len(mine), HEADS, HEAD_DIM, dtype=torch.float64, device=device
    )
    block = (
        k[mine],
        v[mine],
        torch.full((1,), float(rank), dtype=torch.float64, device=device),
        mine.double(),
    )
    seen, pairs, received = [], 0, 0
    for step in range(world):
        k_b, v_b, owner, pos = block
        seen.append(int(owner.item()))
        allowed = pos.long()[None, :] <= mine[:, None]
        pairs += int(allowed.sum())
        scores = torch.einsum("qhd,khd->hqk", q[mine], k_b) / HEAD_DIM**0.5
        scores = scores.masked_fill(~allowed, float("-inf"))
        new_top = torch.maximum(top, scores.amax(dim=-1))
        scale = torch.exp(top - new_top)
        p = torch.exp(scores - new_top[..., None])
        total = total * scale + p.sum(dim=-1)
        acc = acc * scale.T[..., None] + torch.einsum("hqk,khd->qhd", p, v_b)
        top = new_top
        if step < world - 1:  # pass the block on: send to r + 1, receive from r - 1
            incoming = tuple(torch.empty_like(x) for x in block)
            ops = [dist.P2POp(dist.isend, x, (rank + 1) % world) for x in block]
            ops += [dist.P2POp(dist.irecv, x, (rank - 1) % world) for x in incoming]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            block = incoming
            received += (incoming[0].numel() + incoming[1].numel()) * incoming[
                0
            ].element_size()

    out = acc / total.T[..., None]
    scores = torch.einsum("qhd,khd->hqk", q, k) / HEAD_DIM**0.5
    causal = torch.ones(SEQ_LEN, SEQ_LEN, dtype=torch.bool, device=device).tril()
    full = torch.einsum(
        "hqk,khd->qhd", scores.masked_fill(~causal, float("-inf")).softmax(-1), v
    )
    error = float((out - full[mine]).abs().max())

    order, want_pairs = (
        list(ring_schedule(world)[rank]),
        causal_work(SEQ_LEN, world, "load_balanced")[rank],
    )
    want_bytes = (world - 1) * ring_kv_block_bytes(
        SEQ_LEN, world, HEADS, HEAD_DIM, bytes_per_element=8
    )
    ok = (
        seen == order
        and pairs == want_pairs
        and received == want_bytes
        and error < 1e-12
    )
    return finish(
        f"rank {rank}/{world}: kv_from={seen} predicted={order} pairs={pairs} "
        f"predicted={want_pairs} bytes={received} predicted={want_bytes} "
        f"max_error={error:.1e} match={ok}",
        ok,
    )


if __name__ == "__main__":
    sys.exit(main())
