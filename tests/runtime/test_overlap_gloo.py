"""An async collective is in flight while the caller computes: what infralens.overlap assumes.

``infralens.overlap.exposed`` charges a step only the part of a collective that
outlasts the compute beside it, which presumes that issuing the collective
does not block the caller. Here rank 0 issues ``all_reduce(async_op=True)``,
checks that the work is not complete (rank 1 has not joined yet, so it
cannot be), computes, and only then lets rank 1 join through a file. A
blocking call would never return on rank 0, and the group would time out.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.collectives import all_reduce  # noqa: E402

N = 6


def _rank_input(rank: int) -> list[int]:
    return [100 * (rank + 1) + i for i in range(N)]


def _in_flight(rank: int, world: int, signal: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    x = torch.tensor(_rank_input(rank), dtype=torch.float64)
    flag = Path(signal)
    if rank == 0:
        work = dist.all_reduce(x, async_op=True)
        done_at_issue = work.is_completed()  # rank 1 has not joined: cannot be done
        a = torch.arange(16.0).reshape(4, 4)
        product = (a @ a).sum().item()  # compute while the collective is outstanding
        done_after_compute = work.is_completed()
        flag.write_text("issued")
        work.wait()
        return {"done": (done_at_issue, done_after_compute), "x": x.tolist(), "mm": product}
    deadline = time.monotonic() + 60  # only a failure waits this long
    while not flag.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("rank 0 never signalled: its async all_reduce blocked")
        time.sleep(0.01)
    dist.all_reduce(x)
    return {"x": x.tolist()}


def test_async_all_reduce_leaves_the_caller_free_to_compute(tmp_path: Path) -> None:
    signal = str(tmp_path / "issued")
    results = run_on_ranks_cached(_in_flight, 2, signal, fresh=True)
    assert results[0]["done"] == (False, False)
    a = torch.arange(16.0).reshape(4, 4)
    assert results[0]["mm"] == (a @ a).sum().item()
    expected = all_reduce([_rank_input(r) for r in range(2)])
    assert [r["x"] for r in results] == [[float(v) for v in row] for row in expected]
