"""Lab 01 demo: DDP's gradient all-reduce on a one-weight model, checked against infralens.

Run with torchrun (gloo on CPU, NCCL on GPUs)::

    python -m pip install -e ".[plan,demos]"    # once, from the repository root
    torchrun --nproc-per-node 4 labs_src/demos/lab01_ddp.py --backend gloo

Each rank prints one line: its local gradient, the gradient DDP left on it,
and what ``infralens.ddp.ddp_gradients`` predicted. The script exits 1 on any
rank whose synchronised gradient differs from the prediction.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import torch
from _demo import finish, start, stop
from torch.nn.parallel import DistributedDataParallel

from infralens.ddp import ddp_gradients, mean_squared_error_grad, split_batch

BATCH = [(1, 2), (2, 2), (3, 5), (4, 3), (5, 4), (6, 7), (7, 6), (8, 9)]
WEIGHT = 1


def main() -> int:
    rank, world, device = start(__doc__.splitlines()[0])
    try:
        per_rank = split_batch(BATCH, world)
    except ValueError as err:
        return stop(
            f"lab01_ddp: {err} (use a world size that divides {len(BATCH)})"
        )

    model = torch.nn.Linear(1, 1, bias=False).to(device=device, dtype=torch.float64)
    with torch.no_grad():
        model.weight.fill_(WEIGHT)
    ddp = DistributedDataParallel(model)

    mine = per_rank[rank]
    x = torch.tensor(
        [[float(s[0])] for s in mine], dtype=torch.float64, device=device
    )
    y = torch.tensor(
        [[float(s[1])] for s in mine], dtype=torch.float64, device=device
    )
    loss = ((ddp(x) - y) ** 2 / 2).mean()
    loss.backward()  # DDP's hooks all-reduce and average the gradient here

    synced = Fraction(float(model.weight.grad.item())).limit_denominator(10**6)
    local = mean_squared_error_grad(WEIGHT, mine)
    predicted = ddp_gradients(WEIGHT, per_rank)[rank]
    ok = synced == predicted
    return finish(
        f"rank {rank}/{world}: local_grad={local} synced_grad={synced} "
        f"predicted={predicted} match={ok}",
        ok,
    )


if __name__ == "__main__":
    sys.exit(main())
