"""Lab 11 demo: one MoE layer's dispatch and combine over EP ranks, checked against infralens.

Run with torchrun (gloo on CPU, NCCL on GPUs)::

    python -m pip install -e ".[plan,demos]"    # once, from the repository root
    torchrun --nproc-per-node 4 labs_src/demos/lab11_moe.py --backend gloo

Every rank is one EP rank holding two experts; expert e multiplies a token's
hidden vector by e + 1. Each rank routes its tokens top-2 with
``infralens.experts.top_k_experts``, learns how many copies it will receive
with an all-to-all of its send counts (as MoE dispatchers do), dispatches,
applies its experts, combines, and sums each token's two results. Each rank
prints one line comparing the send counts, its received copies and its
outputs with the module's predictions, and exits 1 on any mismatch.
"""

from __future__ import annotations

import random
import sys

import torch
import torch.distributed as dist
from _demo import finish, start

from infralens.expert_dispatch import (
    rank_tokens,
    received,
    send_buffer,
    send_counts,
)
from infralens.experts import route, top_k_experts

TOKENS, TOP_K, EXPERTS_PER_RANK, HIDDEN = 8, 2, 2, 4


def routes_of(rank: int, experts: int) -> list[tuple[int, ...]]:
    """Rank *rank*'s top-2 routes from seeded router scores; expert 0 gets a bonus."""
    rng = random.Random(rank)
    scores = [
        [rng.randint(0, 9) + 5 * (x == 0) for x in range(experts)]
        for _ in range(TOKENS)
    ]
    return top_k_experts(scores, TOP_K)


def main() -> int:
    rank, ep, device = start(__doc__.splitlines()[0])
    experts = EXPERTS_PER_RANK * ep
    mine = routes_of(rank, experts)

    # 1. Exchange send counts: rank i learns column i (its output split sizes).
    blocks = send_buffer(mine, experts, ep)
    in_splits = [len(b) for b in blocks]
    theirs = torch.empty(ep, dtype=torch.int64, device=device)
    dist.all_to_all_single(
        theirs, torch.tensor(in_splits, dtype=torch.int64, device=device)
    )
    out_splits = theirs.tolist()

    # 2. Dispatch: hidden vectors, token t's = (global id) * ones, in send-buffer order.
    copies = [(t, x) for block in blocks for t, x in block]
    ids = [rank * TOKENS + t for t, _ in copies]
    hidden = torch.tensor(ids, dtype=torch.float64, device=device)[:, None].repeat(
        1, HIDDEN
    )
    got_x = torch.empty(sum(out_splits), HIDDEN, dtype=torch.float64, device=device)
    dist.all_to_all_single(got_x, hidden, out_splits, in_splits)
    expert_ids = torch.tensor(
        [x for _, x in copies], dtype=torch.int64, device=device
    )
    got_e = torch.empty(sum(out_splits), dtype=torch.int64, device=device)
    dist.all_to_all_single(got_e, expert_ids, out_splits, in_splits)

    # 3. The experts: expert e scales by e + 1. Then combine along the transposed splits.
    y = got_x * (got_e + 1).to(torch.float64)[:, None]
    back = torch.empty_like(hidden)
    dist.all_to_all_single(back, y, in_splits, out_splits)
    out = torch.zeros(TOKENS, HIDDEN, dtype=torch.float64, device=device)
    out.index_add_(0, torch.tensor([t for t, _ in copies], device=device), back)

    every = [routes_of(r, experts) for r in range(ep)]
    counts = send_counts(every, experts, ep)
    predicted_in = [
        (s * TOKENS + t, x) for s, t, x in received(every, experts, ep)[rank]
    ]
    observed_in = list(
        zip([int(v) for v in got_x[:, 0].tolist()], got_e.tolist(), strict=True)
    )
    predicted_out = [
        (rank * TOKENS + t) * sum(x + 1 for x in c) for t, c in enumerate(mine)
    ]
    load = route([c for r in every for c in r], experts).load
    ok = (
        out_splits == [row[rank] for row in counts]
        and observed_in == predicted_in
        and out[:, 0].tolist() == predicted_out
    )
    line = (
        f"rank {rank}/{ep}: send_counts={in_splits} recv_counts={out_splits} "
        f"received={len(observed_in)} rank_tokens={rank_tokens(load, ep)} match={ok}"
    )
    return finish(line, ok)


if __name__ == "__main__":
    sys.exit(main())
