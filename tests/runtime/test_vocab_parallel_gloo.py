"""The vocabulary-parallel embedding and cross-entropy on gloo ranks agree with PyTorch.

Each rank holds its ``vocab_range`` of a padded embedding table and of the
logits, runs Megatron-LM's arithmetic with real ``all_reduce`` calls (one SUM
for the embedding; MAX, SUM, SUM for the loss) and returns the result; the
test compares it with ``torch.nn.functional.embedding`` and ``cross_entropy``
on the whole tensors and with :mod:`infralens.vocab_parallel`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.vocab_parallel import (  # noqa: E402
    padded_vocab,
    parallel_cross_entropy,
    parallel_embedding,
    vocab_range,
)

VOCAB, HIDDEN, TOKENS, DIVISIBLE_BY = 50, 6, 12, 4


def _case(tp: int) -> tuple[Any, Any, Any, Any]:
    """Token ids, a padded table, logits with the padding masked, and targets."""
    g = torch.Generator().manual_seed(tp)
    padded = padded_vocab(VOCAB, tp=tp, divisible_by=DIVISIBLE_BY)
    table = torch.randn(padded, HIDDEN, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, VOCAB, (TOKENS,), generator=g)
    logits = 4 * torch.randn(TOKENS, padded, generator=g, dtype=torch.float64)
    # the dummy rows never win: masked far below any real logit, and finite because
    # the module takes finite floats only; exp() of the shifted value is exactly 0
    logits[:, VOCAB:] = -1e30
    targets = torch.randint(0, VOCAB, (TOKENS,), generator=g)
    return tokens, table, logits, targets


def _vocab_parallel(rank: int, world: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    tokens, table, logits, targets = _case(world)
    start, end = vocab_range(table.shape[0], tp=world, rank=rank)
    # embedding: mask, look up locally, zero the masked rows, all-reduce SUM
    mask = (tokens < start) | (tokens >= end)
    local = table[start:end][torch.where(mask, 0, tokens - start)]
    local[mask] = 0.0
    dist.all_reduce(local)
    # cross-entropy: the three all-reduces of one number per token
    z = logits[:, start:end].clone()
    top = z.max(dim=-1).values
    dist.all_reduce(top, op=dist.ReduceOp.MAX)
    z -= top.unsqueeze(-1)
    inside = (targets >= start) & (targets < end)
    picked = z[torch.arange(TOKENS), torch.where(inside, targets - start, 0)]
    picked = torch.where(inside, picked, torch.zeros_like(picked))
    dist.all_reduce(picked)
    total = z.exp().sum(dim=-1)
    dist.all_reduce(total)
    loss = total.log() - picked
    return {"embedding": local.tolist(), "loss": loss.tolist()}


@pytest.mark.parametrize("tp", [2, 3, 4])
def test_vocab_parallel_agrees_with_pytorch_and_the_module(tp: int) -> None:
    tokens, table, logits, targets = _case(tp)
    expected_rows = torch.nn.functional.embedding(tokens, table)
    expected_loss = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    module_rows = parallel_embedding(tokens.tolist(), table.tolist(), tp=tp)
    module_loss = parallel_cross_entropy(logits.tolist(), targets.tolist(), tp=tp)
    assert table.shape[0] == {2: 56, 3: 60, 4: 64}[tp]  # 50 rounded up to 4 · tp
    for result in run_on_ranks_cached(_vocab_parallel, tp):
        assert torch.equal(torch.tensor(result["embedding"], dtype=torch.float64), expected_rows)
        assert torch.allclose(
            torch.tensor(result["loss"], dtype=torch.float64), expected_loss, rtol=1e-12, atol=1e-12
        )
    assert torch.equal(torch.tensor(module_rows, dtype=torch.float64), expected_rows)
    assert torch.allclose(
        torch.tensor(module_loss, dtype=torch.float64), expected_loss, rtol=1e-12, atol=1e-12
    )
