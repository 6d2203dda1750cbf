"""The ``ddp`` and ``ddp-bucket-view`` recipes against DDP's storages on gloo ranks (PyTorch 2.13).

Each rank trains a small fp32 model with ``DistributedDataParallel`` for two
steps of Adam (the second runs on the rebuilt buckets). A communication hook
records every bucket's flat buffer; after the second step the test sums the
distinct storages of parameters, gradients, bucket buffers and Adam's state
and compares the sum with ``bytes_per_parameter(recipe) * Ψ``: a bucket copy
of every gradient without ``gradient_as_bucket_view``, none with it.
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.memory import bytes_per_parameter  # noqa: E402

LAYERS = ((300, 300), (300, 1000), (1000, 10))  # fp32: 0.36 MB, 1.2 MB, 40 kB: 2 buckets at 1 MiB


def _measure(rank: int, world: int, view: bool, bucket_cap_mb: int) -> dict[str, int]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(i, o) for i, o in LAYERS))
    ddp = DDP(model, gradient_as_bucket_view=view, bucket_cap_mb=bucket_cap_mb)
    buckets: dict[int, int] = {}

    def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects string annotations
        storage = bucket.buffer().untyped_storage()
        buckets[storage.data_ptr()] = storage.nbytes()
        return (
            dist.all_reduce(bucket.buffer(), async_op=True)
            .get_future()
            .then(lambda f: f.value()[0])
        )

    ddp.register_comm_hook(None, hook)
    opt = torch.optim.Adam(ddp.parameters())
    for _ in range(3):
        buckets.clear()
        opt.zero_grad(set_to_none=False)
        ddp(torch.randn(4, LAYERS[0][0])).sum().backward()
        opt.step()
    tensors = [p for p in model.parameters()] + [p.grad for p in model.parameters()]
    tensors += [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    storages.update(buckets)
    return {
        "total": sum(storages.values()),
        "params": sum(p.numel() for p in model.parameters()),
        "buckets": len(buckets),
    }


@pytest.mark.parametrize("bucket_cap_mb", [1, 25])
@pytest.mark.parametrize("view", [False, True])
def test_ddp_state_bytes_equal_the_recipe(view: bool, bucket_cap_mb: int) -> None:
    recipe = "ddp-bucket-view" if view else "ddp"
    for rank, got in enumerate(run_on_ranks_cached(_measure, 2, view, bucket_cap_mb)):
        assert got["buckets"] == (1 if bucket_cap_mb == 25 else 2), f"rank {rank}"
        assert got["total"] == bytes_per_parameter(recipe) * got["params"], f"rank {rank}"
