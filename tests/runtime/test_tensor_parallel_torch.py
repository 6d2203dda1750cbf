"""infralens.tensor_parallel(_comm) against parallelize_module on a gloo CPU DeviceMesh.

One process group per world size (2 and 4) builds three small blocks, each
once unsharded and once parallelized with PyTorch 2.13's styles:

* an MLP, ``fc1`` ``ColwiseParallel`` and ``fc2`` ``RowwiseParallel`` (plain TP);
* the same MLP behind a LayerNorm with ``SequenceParallel`` and the matching
  layouts (``fc1`` takes ``Shard(1)`` input, ``fc2`` returns ``Shard(1)``);
* grouped-query attention with ``q``, ``k``, ``v`` colwise and ``o`` rowwise.

Each rank records its local weight shapes, whether its forward output and
its gradients equal the unsharded module's on the same seeded input, and
the collectives ``CommDebugMode`` counted in forward and in backward.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.tensor_parallel import attention_shards, mlp_shards  # noqa: E402
from infralens.tensor_parallel_comm import layer_collectives  # noqa: E402

WORLD_SIZES = (2, 4)
HIDDEN, BATCH, SEQ = 8, 2, 8
# ffn 10 splits 3, 3, 3, 1 on 4 ranks and 5, 5 on 2: the uneven case.
FFN_SIZES = (16, 10)
HEADS, KV_HEADS, HEAD_DIM = 8, 4, 2


def _mlp(torch: Any, ffn: int, norm: bool) -> Any:
    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(HIDDEN) if norm else torch.nn.Identity()
            self.fc1 = torch.nn.Linear(HIDDEN, ffn)
            self.fc2 = torch.nn.Linear(ffn, HIDDEN)

        def forward(self, x: Any) -> Any:
            return self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))

    return MLP()


def _attention(torch: Any) -> Any:
    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = torch.nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
            self.k = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
            self.v = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
            self.o = torch.nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            # -1 heads: the local head count, which is all a TP rank sees.
            q = self.q(x).view(b, s, -1, HEAD_DIM).transpose(1, 2)
            k = self.k(x).view(b, s, -1, HEAD_DIM).transpose(1, 2)
            v = self.v(x).view(b, s, -1, HEAD_DIM).transpose(1, 2)
            rep = HEADS // KV_HEADS
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y.transpose(1, 2).reshape(b, s, -1))

    return Attention()


def _run_case(world: int, rank: int, mesh: Any, name: str, build: Any, plan: Any) -> dict[str, Any]:
    import torch
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import parallelize_module

    torch.manual_seed(0)
    reference = build()
    torch.manual_seed(0)
    sharded = parallelize_module(build(), mesh, plan)
    torch.manual_seed(1)
    x = torch.randn(BATCH, SEQ, HIDDEN, dtype=torch.float32)

    x_ref = x.clone().requires_grad_(True)
    out_ref = reference(x_ref)
    out_ref.sum().backward()

    sequence_parallel = name.startswith("sp")
    x_in = x.chunk(world, dim=1)[rank] if sequence_parallel else x
    x_in = x_in.clone().requires_grad_(True)
    with CommDebugMode() as forward_comm:
        out = sharded(x_in)
    local_out = out.to_local() if isinstance(out, DTensor) else out
    with CommDebugMode() as backward_comm:
        local_out.sum().backward()

    expected_out = out_ref.chunk(world, dim=1)[rank] if sequence_parallel else out_ref
    expected_x_grad = x_ref.grad.chunk(world, dim=1)[rank] if sequence_parallel else x_ref.grad
    shapes, grads_match = {}, True
    for pname, param in sharded.named_parameters():
        shapes[pname] = tuple(param.to_local().shape)
        full_grad = param.grad.full_tensor()
        ref_grad = dict(reference.named_parameters())[pname].grad
        grads_match = grads_match and torch.allclose(full_grad, ref_grad, atol=1e-5)

    def counts(mode: Any) -> dict[str, int]:
        return {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}

    return {
        "shapes": shapes,
        "out": torch.allclose(local_out, expected_out, atol=1e-5),
        "x_grad": torch.allclose(x_in.grad, expected_x_grad, atol=1e-5),
        "param_grads": grads_match,
        "forward": counts(forward_comm),
        "backward": counts(backward_comm),
    }


def _record(rank: int, world: int) -> dict[str, Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
    )

    mesh = init_device_mesh("cpu", (world,))
    out: dict[str, Any] = {}
    for ffn in FFN_SIZES:
        out[f"tp_mlp_{ffn}"] = _run_case(
            world,
            rank,
            mesh,
            f"tp_mlp_{ffn}",
            lambda ffn=ffn: _mlp(torch, ffn, norm=False),
            # An uneven fc1 output must stay a DTensor: with the default
            # use_local_output=True, RowwiseParallel rebuilds the global shape
            # as local * world (12 for 3, 3, 3, 1) and the matmul fails.
            {"fc1": ColwiseParallel(use_local_output=ffn % world == 0), "fc2": RowwiseParallel()},
        )
    out["sp_mlp"] = _run_case(
        world,
        rank,
        mesh,
        "sp_mlp",
        lambda: _mlp(torch, FFN_SIZES[0], norm=True),
        {
            "norm": SequenceParallel(),
            "fc1": ColwiseParallel(input_layouts=Shard(1)),
            "fc2": RowwiseParallel(output_layouts=Shard(1)),
        },
    )
    out["tp_attention"] = _run_case(
        world,
        rank,
        mesh,
        "tp_attention",
        lambda: _attention(torch),
        {
            "q": ColwiseParallel(),
            "k": ColwiseParallel(),
            "v": ColwiseParallel(),
            "o": RowwiseParallel(),
        },
    )
    return out


def recorded(world: int) -> list[dict[str, Any]]:
    return run_on_ranks_cached(_record, world)


@pytest.mark.parametrize("case", ["tp_mlp_16", "tp_mlp_10", "sp_mlp"])
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_mlp_local_weight_shapes_match_the_prediction(world: int, case: str) -> None:
    ffn = FFN_SIZES[1] if case == "tp_mlp_10" else FFN_SIZES[0]
    for rank, per_rank in enumerate(recorded(world)):
        fc1, fc2 = mlp_shards(hidden=HIDDEN, ffn_hidden=ffn, tp=world, rank=rank)
        expected = {
            "fc1.weight": fc1.weight,
            "fc1.bias": fc1.bias,
            "fc2.weight": fc2.weight,
            "fc2.bias": fc2.bias,
        }
        if case == "sp_mlp":  # SequenceParallel replicates the LayerNorm's parameters
            expected |= {"norm.weight": (HIDDEN,), "norm.bias": (HIDDEN,)}
        assert per_rank[case]["shapes"] == expected, f"rank {rank}"


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_attention_local_weight_shapes_match_the_prediction(world: int) -> None:
    for rank, per_rank in enumerate(recorded(world)):
        predicted = attention_shards(
            hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, tp=world, rank=rank
        )
        expected = {f"{lin.name}.weight": lin.weight for lin in predicted}
        assert per_rank["tp_attention"]["shapes"] == expected, f"rank {rank}"


CASES = ("tp_mlp_16", "tp_mlp_10", "sp_mlp", "tp_attention")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_sharded_forward_and_gradients_equal_the_unsharded_module(world: int, case: str) -> None:
    for rank, per_rank in enumerate(recorded(world)):
        result = per_rank[case]
        assert result["out"], f"rank {rank}: forward output differs"
        assert result["x_grad"], f"rank {rank}: input gradient differs (f's backward)"
        assert result["param_grads"], f"rank {rank}: a parameter gradient differs"


@pytest.mark.parametrize("sequence_parallel", [False, True])
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_block_collectives_match_f_and_g(world: int, sequence_parallel: bool) -> None:
    # One block (the MLP) is half of layer_collectives: its f and its g.
    predicted = layer_collectives(sequence_parallel=sequence_parallel)
    forward = sorted(c.op for c in predicted if c.block == "mlp" and c.direction == "forward")
    backward = sorted(c.op for c in predicted if c.block == "mlp" and c.direction == "backward")
    case = "sp_mlp" if sequence_parallel else "tp_mlp_16"
    for rank, per_rank in enumerate(recorded(world)):
        observed = per_rank[case]
        assert sorted(_expand(observed["forward"])) == forward, f"rank {rank}"
        activation_ops = _expand(observed["backward"])
        assert sorted(activation_ops) == backward, f"rank {rank}: {observed['backward']}"


def _expand(counts: dict[str, int]) -> list[str]:
    names = {
        "all_reduce": "all_reduce",
        "all_gather_into_tensor": "all_gather",
        "reduce_scatter_tensor": "reduce_scatter",
    }
    return [names.get(op, op) for op, n in counts.items() for _ in range(n)]


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_unfused_qkv_all_reduces_the_input_gradient_once_per_projection(world: int) -> None:
    # Megatron fuses Q, K and V into one column-parallel GEMM, so f's backward
    # is one all-reduce per block (layer_collectives). Three separate
    # ColwiseParallel modules each wrap their input, so each all-reduces it.
    g_forward = [
        c.op
        for c in layer_collectives(sequence_parallel=False)
        if c.block == "attention" and c.direction == "forward"
    ]
    for rank, per_rank in enumerate(recorded(world)):
        observed = per_rank["tp_attention"]
        assert _expand(observed["forward"]) == g_forward, f"rank {rank}"
        assert _expand(observed["backward"]) == ["all_reduce"] * 3, f"rank {rank}"
