"""infralens.checkpoint against torch.distributed.checkpoint: save on 4 gloo ranks, load on 2.

The save side compares DCP's metadata (one chunk per rank, offsets and
sizes) with ``save_layout``; the load side records the ReadItems that DCP's
default load planner makes on each of 2 ranks and compares them with
``reshard_reads``, then checks the loaded values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.checkpoint import reshard_reads, save_layout  # noqa: E402

SHAPES = {"w": (10, 3), "b": (6,), "e": (3, 2)}


def full(name: str) -> Any:
    import torch

    shape = SHAPES[name]
    numel = 1
    for d in shape:
        numel *= d
    return torch.arange(numel, dtype=torch.float32).reshape(shape) + 1000 * list(SHAPES).index(name)


def _save(rank: int, world: int, path: str) -> dict[str, list[tuple[int, int]]]:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    state = {name: distribute_tensor(full(name), mesh, [Shard(0)]) for name in SHAPES}
    dcp.save(state, checkpoint_id=path)
    metadata = dcp.FileSystemReader(path).read_metadata()
    return {
        name: sorted((c.offsets[0], c.sizes[0]) for c in metadata.state_dict_metadata[name].chunks)
        for name in SHAPES
    }


def _load(rank: int, world: int, path: str) -> dict[str, Any]:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    reads: list[tuple[str, int, int, int, int]] = []

    class Recording(DefaultLoadPlanner):  # type: ignore[misc]
        def create_local_plan(self) -> Any:
            plan = super().create_local_plan()
            for item in plan.items:
                reads.append(
                    (
                        item.dest_index.fqn,
                        item.storage_index.offset[0],
                        item.storage_offsets[0],
                        item.dest_offsets[0],
                        item.lengths[0],
                    )
                )
            return plan

    mesh = init_device_mesh("cpu", (world,))
    state = {
        name: distribute_tensor(torch.zeros(SHAPES[name]), mesh, [Shard(0)]) for name in SHAPES
    }
    dcp.load(state, checkpoint_id=path, planner=Recording())
    correct = all(torch.equal(state[name].full_tensor(), full(name)) for name in SHAPES)
    return {"reads": sorted(reads), "values_match": correct}


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dcp")


def test_dcp_save_writes_the_predicted_chunks(checkpoint_dir: Path) -> None:
    chunks = run_on_ranks_cached(_save, 4, str(checkpoint_dir))[0]
    layout = save_layout(SHAPES, 4)
    assert chunks == {n: [(c.offset, c.length) for c in layout[n]] for n in SHAPES}


def test_dcp_load_on_two_ranks_reads_what_the_resharding_plan_predicts(
    checkpoint_dir: Path,
) -> None:
    run_on_ranks_cached(_save, 4, str(checkpoint_dir))
    results = run_on_ranks_cached(_load, 2, str(checkpoint_dir))
    predicted = reshard_reads(save_layout(SHAPES, 4), 2)
    for rank, result in enumerate(results):
        expected = sorted(
            (r.tensor, r.saved_offset, r.row_in_chunk, r.row_in_dest, r.rows)
            for r in predicted[rank]
        )
        assert result["reads"] == expected, f"rank {rank}"
        assert result["values_match"], f"rank {rank}"
