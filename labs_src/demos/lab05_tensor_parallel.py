"""Lab 05 demo: a Megatron MLP under parallelize_module, checked against infralens.

Run with torchrun (gloo on CPU, NCCL on GPUs)::

    python -m pip install -e ".[plan,demos]"    # once, from the repository root
    torchrun --nproc-per-node 4 labs_src/demos/lab05_tensor_parallel.py --backend gloo
    torchrun --nproc-per-node 4 labs_src/demos/lab05_tensor_parallel.py --sequence-parallel

Each rank prints one line: its local fc1 and fc2 weight shapes next to
``infralens.tensor_parallel.mlp_shards``'s prediction, the collectives
counted in forward next to f and g from
``infralens.tensor_parallel_comm.layer_collectives``, and whether its output
equals the unsharded MLP's. The script exits 1 on any rank where
one of them differs.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from _demo import finish
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from infralens.tensor_parallel import mlp_shards
from infralens.tensor_parallel_comm import layer_collectives

HIDDEN, FFN, BATCH, SEQ = 16, 48, 2, 8
COMM_NAMES = {
    "all_reduce": "all_reduce",
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
}


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.fc1 = torch.nn.Linear(HIDDEN, FFN)
        self.fc2 = torch.nn.Linear(FFN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--sequence-parallel", action="store_true")
    args = parser.parse_args()
    sp = bool(args.sequence_parallel)

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device_type = "cuda" if args.backend == "nccl" else "cpu"
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    mesh = init_device_mesh(device_type, (world,))

    torch.manual_seed(0)
    reference = MLP().to(device_type)
    torch.manual_seed(0)
    if sp:
        plan = {
            "norm": SequenceParallel(),
            "fc1": ColwiseParallel(input_layouts=Shard(1)),
            "fc2": RowwiseParallel(output_layouts=Shard(1)),
        }
    else:
        plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    sharded = parallelize_module(MLP().to(device_type), mesh, plan)

    torch.manual_seed(1)
    x = torch.randn(BATCH, SEQ, HIDDEN, device=device_type)
    with torch.no_grad():
        expected = reference(x)
        with CommDebugMode() as comm:
            out = sharded(x.chunk(world, dim=1)[rank] if sp else x)
    if sp:
        expected = expected.chunk(world, dim=1)[rank]
        out = out.to_local() if hasattr(out, "to_local") else out

    shapes = [
        tuple(sharded.fc1.weight.to_local().shape),
        tuple(sharded.fc2.weight.to_local().shape),
    ]
    predicted_shapes = [
        s.weight
        for s in mlp_shards(hidden=HIDDEN, ffn_hidden=FFN, tp=world, rank=rank)
    ]
    counted = sorted(
        COMM_NAMES.get(str(op).split(".")[-1], str(op))
        for op, n in comm.get_comm_counts().items()
        for _ in range(n)
    )
    predicted_comm = sorted(
        c.op
        for c in layer_collectives(sequence_parallel=sp)
        if c.block == "mlp" and c.direction == "forward"
    )
    same_output = bool(torch.allclose(out, expected, atol=1e-5))
    ok = shapes == predicted_shapes and counted == predicted_comm and same_output
    return finish(
        f"rank {rank}/{world} sp={sp}: fc1={shapes[0]} fc2={shapes[1]} "
        f"predicted={predicted_shapes[0]},{predicted_shapes[1]} "
        f"forward_comm={','.join(counted)} predicted_comm={','.join(predicted_comm)} "
        f"output_matches={same_output} match={ok}",
        ok,
    )


if __name__ == "__main__":
    sys.exit(main())
