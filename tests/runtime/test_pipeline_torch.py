"""infralens.pipeline_orders' interleaved order against PyTorch 2.13's ScheduleInterleaved1F1B.

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

from infralens.pipeline_orders import schedule_order  # noqa: E402

Row = list[tuple[str, int, int] | None]
# (stages p, chunks v) -> microbatch counts m; m = 6 and 10 on 4 stages are
# not multiples of p (PyTorch's rounds), m = 3 on 4 stages is fewer than p.
CASES: dict[tuple[int, int], tuple[int, ...]] = {
    (2, 2): (2, 4, 6),
    (2, 3): (4,),
    (4, 2): (3, 4, 6, 8, 10),
    (4, 3): (8,),
}


# Microbatch counts whose acceptance by PyTorch is compared with the package's rules.
PROBES = {2: (1, 3, 5), 4: (3, 5, 9, 11, 12)}
# Microbatch counts for ScheduleInterleavedZeroBubble with one stage per rank (ZB-H1).
ZB_COUNTS = {2: (2, 3, 4), 4: (4, 8, 12)}


def _orders(rank: int, world: int, chunks: int, counts: tuple[int, ...]) -> dict[str, object]:
    import torch
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleInterleaved1F1B,
        ScheduleInterleavedZeroBubble,
    )

    def stage(index: int, total: int) -> PipelineStage:
        return PipelineStage(torch.nn.Linear(2, 2), index, total, torch.device("cpu"))

    stages = [stage(c * world + rank, world * chunks) for c in range(chunks)]

    def table(schedule: ScheduleInterleaved1F1B | ScheduleInterleavedZeroBubble) -> dict[int, Row]:
        return {
            r: [
                None if a is None else (a.computation_type.value, a.microbatch_index, a.stage_index)
                for a in actions
            ]
            for r, actions in schedule.pipeline_order.items()
        }

    orders = {m: table(ScheduleInterleaved1F1B(stages, n_microbatches=m)) for m in counts}
    single = stage(rank, world)
    zero_bubble = {
        m: table(ScheduleInterleavedZeroBubble([single], n_microbatches=m))
        for m in ZB_COUNTS[world]
    }
    refused: dict[tuple[str, int], bool] = {}
    for m in PROBES[world]:
        for name, build in (
            ("interleaved", lambda m: ScheduleInterleaved1F1B(stages, n_microbatches=m)),
            ("1f1b", lambda m: Schedule1F1B(single, n_microbatches=m)),
        ):
            try:
                build(m)
                refused[(name, m)] = False
            except ValueError:
                refused[(name, m)] = True
    return {"orders": orders, "zero_bubble": zero_bubble, "refused": refused}


def torch_order(p: int, v: int, m: int) -> dict[int, Row]:
    per_rank = run_on_ranks_cached(_orders, p, v, CASES[(p, v)])
    assert all(r == per_rank[0] for r in per_rank), "ranks disagree on pipeline_order"
    return per_rank[0]["orders"][m]


PARAMS = [(p, v, m) for (p, v), counts in CASES.items() for m in counts]


@pytest.mark.parametrize(("p", "v", "m"), PARAMS)
def test_interleaved_1f1b_order_matches_pytorch(p: int, v: int, m: int) -> None:
    observed = torch_order(p, v, m)
    predicted = schedule_order("interleaved", stages=p, microbatches=m, chunks=v, rules="torch")
    for rank in range(p):
        compute = [a for a in observed[rank] if a is not None]
        assert compute == [(k, mb, c * p + rank) for k, mb, c in predicted[rank]], f"rank {rank}"


def package_refuses(name: str, p: int, m: int) -> bool:
    chunks = 2 if name == "interleaved" else 1
    try:
        schedule_order(name, stages=p, microbatches=m, chunks=chunks, rules="torch")
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("name", ["interleaved", "1f1b"])
@pytest.mark.parametrize(("p", "m"), [(p, m) for p, ms in PROBES.items() for m in ms])
def test_pytorch_refuses_the_microbatch_counts_the_package_refuses(
    name: str, p: int, m: int
) -> None:
    per_rank = run_on_ranks_cached(_orders, p, 2, CASES[(p, 2)])
    assert per_rank[0]["refused"][(name, m)] == package_refuses(name, p, m)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p, ms in ZB_COUNTS.items() for m in ms])
def test_zero_bubble_with_one_stage_per_rank_is_zb_h1(p: int, m: int) -> None:
    per_rank = run_on_ranks_cached(_orders, p, 2, CASES[(p, 2)])
    observed = per_rank[0]["zero_bubble"][m]
    predicted = schedule_order("zb-h1", stages=p, microbatches=m, rules="torch")
    rename = {"F": "F", "I": "B", "W": "W"}  # PyTorch calls the input-gradient backward "I"
    for rank in range(p):
        compute = [(rename[k], mb, s) for k, mb, s in (a for a in observed[rank] if a is not None)]
        assert compute == [(k, mb, rank) for k, mb, _ in predicted[rank]], f"rank {rank}"
