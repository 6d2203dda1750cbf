"""Lab 06 demo: run one interleaved 1F1B step and compare the executed order with infralens.

Run with torchrun (gloo on CPU, NCCL on GPUs)::

    python -m pip install -e ".[plan,demos]"    # once, from the repository root
    torchrun --nproc-per-node 4 labs_src/demos/lab06_pipeline.py --backend gloo

Every rank holds two chunks (v = 2) of a small stack of ``Linear`` layers and
runs one training step of PyTorch's ``ScheduleInterleaved1F1B`` with 8
microbatches. Each rank records the forwards and backwards its stages actually
execute and prints them next to ``infralens.pipeline_orders.schedule_order``'s
prediction, with the bubble fraction the package predicts for the step. The
script exits 1 on any rank whose executed order differs.
"""

from __future__ import annotations

from typing import Any

import torch
from _demo import finish, start
from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

from infralens.pipeline import bubble_fraction
from infralens.pipeline_orders import schedule_order

CHUNKS = 2
MICROBATCHES = 8
WIDTH = 4


def record(stage: PipelineStage, log: list[str]) -> None:
    """Wrap the stage's compute calls so that each one appends e.g. 'F3@1' to *log*."""
    forward, backward = stage.forward_one_chunk, stage.backward_one_chunk

    def forward_one_chunk(chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        log.append(f"F{chunk_id}@{stage.stage_index}")
        return forward(chunk_id, *args, **kwargs)

    def backward_one_chunk(chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        log.append(f"B{chunk_id}@{stage.stage_index}")
        return backward(chunk_id, *args, **kwargs)

    stage.forward_one_chunk = forward_one_chunk  # type: ignore[method-assign]
    stage.backward_one_chunk = backward_one_chunk  # type: ignore[method-assign]


def main() -> int:
    rank, world, device = start(__doc__.splitlines()[0])
    torch.manual_seed(0)
    total = world * CHUNKS
    log: list[str] = []
    stages = []
    for chunk in range(CHUNKS):  # virtual stage chunk * p + rank lives on this rank
        layer = torch.nn.Linear(WIDTH, WIDTH).to(device)
        stage = PipelineStage(layer, chunk * world + rank, total, device)
        record(stage, log)
        stages.append(stage)

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((output - target) ** 2).mean()

    schedule = ScheduleInterleaved1F1B(
        stages, n_microbatches=MICROBATCHES, loss_fn=loss_fn
    )
    x = torch.ones(MICROBATCHES, WIDTH, device=device)
    y = torch.zeros(MICROBATCHES, WIDTH, device=device)
    first, last = rank == 0, rank == (total - 1) % world
    if first:
        schedule.step(x, target=y if last else None)
    elif last:
        schedule.step(target=y)
    else:
        schedule.step()

    order = schedule_order(
        "interleaved",
        stages=world,
        microbatches=MICROBATCHES,
        chunks=CHUNKS,
        rules="torch",
    )[rank]
    predicted = [f"{kind}{mb}@{chunk * world + rank}" for kind, mb, chunk in order]
    bubble = bubble_fraction(stages=world, microbatches=MICROBATCHES, chunks=CHUNKS)
    tag = f"rank {rank}/{world}:"
    report = (
        f"{tag} executed={' '.join(log)}\n"
        f"{tag} predicted={' '.join(predicted)} match={log == predicted} bubble={bubble}"
    )
    return finish(report, log == predicted)


if __name__ == "__main__":
    raise SystemExit(main())
