"""infralens.pipeline's interleaved order against PyTorch 2.13's ScheduleInterleaved1F1B.

Each rank builds its v ``PipelineStage`` objects (tiny ``Linear`` chunks on
CPU, gloo group of p ranks) and constructs ``ScheduleInterleaved1F1B``; the
schedule computes ``pipeline_order`` (every rank's compute actions, ``None``
for an idle slot) in its constructor, without communicating. Each rank
returns that table for several microbatch counts; the comparisons run on the
cached result.
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.pipeline import schedule_order  # noqa: E402

Row = list[tuple[str, int, int] | None]
# (stages p, chunks v) -> microbatch counts m; m = 6 and 10 on 4 stages are
# not multiples of p (PyTorch's rounds), m = 3 on 4 stages is fewer than p.
CASES: dict[tuple[int, int], tuple[int, ...]] = {
    (2, 2): (2, 4, 6),
    (2, 3): (4,),
    (4, 2): (3, 4, 6, 8, 10),
    (4, 3): (8,),
}


def _orders(
    rank: int, world: int, chunks: int, counts: tuple[int, ...]
) -> dict[int, dict[int, Row]]:
    import torch
    from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

    stages = [
        PipelineStage(torch.nn.Linear(2, 2), c * world + rank, world * chunks, torch.device("cpu"))
        for c in range(chunks)
    ]
    out: dict[int, dict[int, Row]] = {}
    for m in counts:
        schedule = ScheduleInterleaved1F1B(stages, n_microbatches=m)
        out[m] = {
            r: [
                None if a is None else (a.computation_type.value, a.microbatch_index, a.stage_index)
                for a in actions
            ]
            for r, actions in schedule.pipeline_order.items()
        }
    return out


def torch_order(p: int, v: int, m: int) -> dict[int, Row]:
    per_rank = run_on_ranks_cached(_orders, p, v, CASES[(p, v)])
    assert all(r == per_rank[0] for r in per_rank), "ranks disagree on pipeline_order"
    return per_rank[0][m]


PARAMS = [(p, v, m) for (p, v), counts in CASES.items() for m in counts]


@pytest.mark.parametrize(("p", "v", "m"), PARAMS)
def test_interleaved_1f1b_order_matches_pytorch(p: int, v: int, m: int) -> None:
    observed = torch_order(p, v, m)
    predicted = schedule_order("interleaved", stages=p, microbatches=m, chunks=v, rounds="torch")
    for rank in range(p):
        compute = [a for a in observed[rank] if a is not None]
        assert compute == [(k, mb, c * p + rank) for k, mb, c in predicted[rank]], f"rank {rank}"
