"""Start-up shared by the torchrun demos: parse --backend, join the group, pick the device."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist


def start(description: str) -> tuple[str, int, int, torch.device]:
    """Return (backend, rank, world size, device) after ``init_process_group``.

    gloo runs on the CPU; nccl uses the GPU named by ``LOCAL_RANK``.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    backend = parser.parse_args().backend
    dist.init_process_group(backend)
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    return backend, dist.get_rank(), dist.get_world_size(), device
