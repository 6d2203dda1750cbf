"""Lab 15 demo: time all_reduce and all_gather as nccl-tests does, and report algbw and busbw.

Run with torchrun (gloo on CPU, NCCL on GPUs)::

    python -m pip install -e ".[plan,demos]"    # once, from the repository root
    torchrun --nproc-per-node 4 labs_src/demos/lab15_busbw.py --backend gloo

Rank 0 prints one line per operation and size: the mean time of a few
iterations after a warm-up, the algorithm bandwidth (size / time) and the bus
bandwidth (algbw times ``infralens.collectives.bus_bandwidth_factor``), with
"size" meaning what nccl-tests means: the whole buffer (all_gather's output).
With ``INFRALENS_PRESET=dgx-h100`` (any key of ``infralens.hardware.SYSTEMS``)
in the environment it also prints what ``infralens.nccl`` predicts for the
same group on that hardware: compare it with what NCCL measured on GPUs. Every rank then checks that
the all-reduce summed correctly and prints one line; a wrong sum exits 1.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
from _demo import finish, start, stop

from infralens.collectives import bus_bandwidth_factor
from infralens.hardware import system
from infralens.nccl import predict
from infralens.topology import Cluster

SIZES = (2**16, 2**20)  # bytes, float32 buffers
ITERS = 5


def timed(op: str, nbytes: int, world: int, device: torch.device) -> float:
    """Mean seconds of one call, after one warm-up call, barriers around the timing."""
    if op == "all_reduce":
        buf = torch.ones(nbytes // 4, device=device)
        call = lambda: dist.all_reduce(buf)  # noqa: E731
    else:
        out = torch.empty(nbytes // 4, device=device)
        mine = torch.ones(nbytes // 4 // world, device=device)
        call = lambda: dist.all_gather_into_tensor(out, mine)  # noqa: E731
    call()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    begin = time.perf_counter()
    for _ in range(ITERS):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - begin) / ITERS


def main() -> int:
    preset = os.environ.get("INFRALENS_PRESET", "")
    rank, world, device = start(__doc__.splitlines()[0])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    cluster = None
    if preset:
        try:
            cluster = Cluster(world // local, local, system(preset))
        except ValueError as err:
            return stop(f"lab15_busbw: INFRALENS_PRESET: {err}")
    for op in ("all_reduce", "all_gather"):
        for nbytes in SIZES:
            seconds = timed(op, nbytes, world, device)
            algbw = nbytes / seconds / 1e9
            busbw = algbw * float(bus_bandwidth_factor(op, world))
            if rank == 0:
                line = (
                    f"{op} size={nbytes} time_us={seconds * 1e6:.1f} "
                    f"algbw={algbw:.6f} busbw={busbw:.6f}"
                )
                if cluster is not None:
                    p = predict(op, nbytes, cluster)
                    line += f" model={p.algorithm}/{p.protocol} model_busbw={p.bus_bandwidth:.1f}"
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
    check = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(check)
    ok = bool((check == world * (world + 1) / 2).all())
    return finish(f"rank {rank}/{world}: all_reduce sum correct={ok}", ok)


if __name__ == "__main__":
    sys.exit(main())
