"""infralens.head_memory.loss_peak_bytes against the loss PyTorch 2.13 runs, on CPU.

``torch.distributed._tools.mem_tracker.MemTracker`` follows every storage created
inside it and reports the peak of the live total. The logits are a bf16 leaf of
N × V (per rank, V / tp), so the peak less that leaf is what the loss adds:

* ``cross_entropy(logits.float(), target)`` and its backward, on one process;
* the same call on logits sharded by vocabulary over a 2-rank gloo mesh, inside
  ``loss_parallel()``, as torchtitan runs its loss with tensor parallelism.

Each is divided by one fp32 copy of the (local) logits, N · V/tp · 4 bytes, and must
equal the model's count of copies; the targets and scalars add less than 1 %.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.head_memory import loss_peak_bytes  # noqa: E402
from infralens.model import TransformerConfig  # noqa: E402

TOKENS, VOCAB = 64, 4096


def _config() -> TransformerConfig:
    return TransformerConfig(layers=1, hidden=8, heads=1, kv_heads=1, ffn_hidden=8,
                             vocab_size=VOCAB, seq_len=TOKENS)  # fmt: skip


def _peak_copies(world: int) -> float:
    """fp32 copies of the local logits alive at the peak of the loss's forward and backward."""
    import torch.nn.functional as F
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    full = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16)
    target = torch.randint(VOCAB, (TOKENS,))
    rank = torch.distributed.get_rank() if world > 1 else 0
    local = full.chunk(world, dim=1)[rank].clone().requires_grad_(True)

    def step() -> None:
        if world == 1:
            F.cross_entropy(local.float(), target).backward()
            return
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Shard
        from torch.distributed.tensor.parallel import loss_parallel

        mesh = init_device_mesh("cpu", (world,))
        logits = DTensor.from_local(local, mesh, [Shard(1)], run_check=False)
        with loss_parallel():
            F.cross_entropy(logits.float(), target).backward()

    tracker = MemTracker()
    tracker.track_external(local, target)
    with tracker:
        step()
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    one_copy = 4 * local.numel()
    return float(peak - 2 * local.numel()) / one_copy


def _on_rank(rank: int, world: int) -> Any:
    return _peak_copies(world)


def test_eager_cross_entropy_holds_three_fp32_copies() -> None:
    copies = _peak_copies(1)
    one = loss_peak_bytes(_config(), seq_len=TOKENS, micro_batch_size=1, loss="fused")
    predicted = loss_peak_bytes(_config(), seq_len=TOKENS, micro_batch_size=1, loss="eager")
    assert predicted == 3 * one
    assert copies == pytest.approx(predicted / one, abs=0.01)


def test_loss_parallel_holds_four_fp32_copies_of_its_shard() -> None:
    copies = run_on_ranks_cached(_on_rank, 2)
    one = loss_peak_bytes(_config(), seq_len=TOKENS, micro_batch_size=1, tp=2, loss="fused")
    predicted = loss_peak_bytes(_config(), seq_len=TOKENS, micro_batch_size=1, tp=2,
                                loss="eager")  # fmt: skip
    assert predicted == 4 * one
    assert copies == [pytest.approx(predicted / one, abs=0.01)] * 2
