"""infralens.buckets against PyTorch's bucket assignment and a real DDP reducer on gloo."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)
import torch.distributed as dist  # noqa: E402

from infralens.buckets import (  # noqa: E402
    assign_buckets,
    ddp_initial_buckets,
    ddp_rebuilt_buckets,
)

DTYPES = {"f32": torch.float32, "f16": torch.float16, "f64": torch.float64, "i8": torch.int8}


def random_case(seed: int) -> tuple[list[int], list[str], list[int]]:
    rng = random.Random(seed)
    count = rng.randint(1, 25)
    kinds = [rng.choice(list(DTYPES)) for _ in range(count)]
    numels = [rng.randint(0, 400) for _ in range(count)]
    limits = [rng.randint(1, 1500) for _ in range(rng.randint(1, 4))]
    return numels, kinds, limits


@pytest.mark.parametrize("seed", range(40))
def test_assign_buckets_matches_torch(seed: int) -> None:
    numels, kinds, limits = random_case(seed)
    tensors = [torch.empty(n, dtype=DTYPES[k]) for n, k in zip(numels, kinds, strict=True)]
    sizes = [t.numel() * t.element_size() for t in tensors]
    expected, _ = dist._compute_bucket_assignment_by_size(tensors, limits, [False] * len(tensors))
    assert assign_buckets(sizes, limits, dtypes=kinds) == expected


@pytest.mark.parametrize("seed", range(20))
def test_rebuild_walk_matches_torch_with_tensor_indices(seed: int) -> None:
    # DDP's rebuild passes the parameters in gradient-ready order plus their indices.
    numels, _, _ = random_case(seed)
    order = list(range(len(numels)))
    random.Random(seed).shuffle(order)
    limits = [1 << 20, 25 << 20]  # DDP's default rebuild limits
    scaled = [4 * 4096 * n for n in numels]  # fp32 tensors of up to 6.25 MiB
    tensors = [torch.empty(4096 * numels[i], dtype=torch.float32) for i in order]
    expected, _ = dist._compute_bucket_assignment_by_size(
        tensors, limits, [False] * len(tensors), order
    )
    assert ddp_rebuilt_buckets(scaled, order) == expected


LAYERS = ((512, 512), (512, 256), (256, 512), (512, 128))  # fp32 weights of 1 MiB, 0.5 MiB, ...


def _ddp(rank: int, world: int, find_unused: bool = False) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(i, o) for i, o in LAYERS))
    params = list(model.parameters())
    index = {id(p): i for i, p in enumerate(params)}
    ready: list[int] = []
    for p in params:
        p.register_post_accumulate_grad_hook(lambda q: ready.append(index[id(q)]))
    # bucket_cap_mb unset: 1 MiB first bucket
    ddp = DistributedDataParallel(model, find_unused_parameters=find_unused)
    seen: list[list[tuple[int, list[int]]]] = []

    # Unannotated on purpose: DDP rejects a hook whose annotations are not
    # dist.GradBucket, and this module's annotations are strings.
    def record(state, bucket):  # type: ignore[no-untyped-def]
        seen[-1].append((bucket.index(), sorted(index[id(p)] for p in bucket.parameters())))
        return (
            dist.all_reduce(bucket.buffer(), async_op=True)
            .get_future()
            .then(lambda fut: fut.value()[0])
        )

    ddp.register_comm_hook(None, record)
    for _ in range(3):
        seen.append([])
        ddp(torch.ones(4, LAYERS[0][0])).sum().backward()
    return {
        "sizes": [p.numel() * p.element_size() for p in params],
        "ready": ready[: len(params)],
        "iterations": [sorted(s) for s in seen],
    }


def test_ddp_first_iteration_uses_one_bucket() -> None:
    for result in run_on_ranks_cached(_ddp, 2):
        first = [members for _, members in result["iterations"][0]]
        assert first == [sorted(b) for b in ddp_initial_buckets(result["sizes"])]


def test_ddp_with_find_unused_parameters_buckets_the_first_iteration_by_size() -> None:
    for result in run_on_ranks_cached(_ddp, 2, True):
        first = sorted(members for _, members in result["iterations"][0])
        predicted = ddp_initial_buckets(result["sizes"], find_unused_parameters=True)
        assert len(predicted) > 1
        assert first == sorted(sorted(b) for b in predicted)


def test_ddp_rebuilds_buckets_in_gradient_ready_order() -> None:
    for result in run_on_ranks_cached(_ddp, 2):
        predicted = ddp_rebuilt_buckets(result["sizes"], result["ready"])
        assert len(predicted) > 1  # the 1 MiB first bucket splits this model
        for later in result["iterations"][1:]:
            assert [members for _, members in later] == [sorted(b) for b in predicted]
