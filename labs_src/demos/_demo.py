"""What every torchrun demo does the same way: start, stop cleanly, report one line per rank."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

import torch
import torch.distributed as dist


def start(description: str) -> tuple[int, int, torch.device]:
    """Parse ``--backend``, join the process group; return (rank, world size, device)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    args = parser.parse_args()
    dist.init_process_group(args.backend)
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    return dist.get_rank(), dist.get_world_size(), device


def stop(message: str) -> NoReturn:
    """Rank 0 writes *message* to stderr; every rank waits for that, then exits with 2."""
    if dist.get_rank() == 0:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    # No rank exits before rank 0 has written: torchrun kills the others
    # as soon as one child fails.
    dist.barrier()
    dist.destroy_process_group()
    _leave(2)


def finish(line: str, ok: bool) -> NoReturn:
    """Write this rank's result line, leave the group and exit: 0 if *ok*, else 1."""
    # One write per line: ranks share torchrun's stdout, and print() writes the
    # text and the newline separately, which lets lines from ranks interleave.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    # Leave together, so no rank tears its group down while a peer is still
    # inside a collective with it.
    dist.barrier()
    dist.destroy_process_group()
    _leave(0 if ok else 1)


def _leave(code: int) -> NoReturn:
    """Exit now, skipping C++ static destructors.

    With PyTorch 2.13 and gloo, a process can still abort ("terminate called
    without an active exception") in static destruction at interpreter exit,
    after every rank has printed, synchronised and destroyed its group. There
    is nothing left to clean up by then, so the demo flushes and leaves.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
