"""A real hang on gloo ranks: what PyTorch 2.13 records, and whether the package names the culprit.

Four ranks run three all-reduces on a group with a 3-second timeout; then
every rank but rank 2 starts a fourth, which times out because rank 2 never
joins. What gloo gives a reader afterwards, in PyTorch 2.13.0:

- the flight recorder (``torch._C._distributed_c10d._dump_fr_trace_json``):
  its ring buffer (``TORCH_FR_BUFFER_SIZE``, 2000 entries by default) holds
  one entry per collective with ``collective_seq_id``, ``profiling_name`` and
  ``input_sizes``, and ``pg_status`` holds the last sequence number each rank
  enqueued. gloo leaves every entry's ``state`` at ``"scheduled"`` (start and
  completion events are recorded only by ProcessGroupNCCL), so the test reads
  sequence numbers and presence only;
- ``dist.monitored_barrier`` (gloo only), whose error on rank 0 names the
  ranks that did not arrive;
- ``TORCH_DISTRIBUTED_DEBUG=DETAIL``, which compares collective fingerprints
  before each collective and names the ranks whose op or shape differs.
"""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.operations import CollectiveRecord, find_hang, hang_culprits  # noqa: E402

WORLD = 4
CULPRIT = 2
TIMEOUT = timedelta(seconds=3)


def _error(call: Any) -> str | None:
    try:
        call()
    except Exception as e:  # the timeout or mismatch PyTorch raises
        return str(e)
    return None


def _hang(rank: int, world: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    out: dict[str, Any] = {}
    # 1. one rank skips a collective; dump the flight recorder on every rank
    group = dist.new_group(list(range(world)), timeout=TIMEOUT)
    for _ in range(3):
        dist.all_reduce(torch.ones(4), group=group)
    if rank != CULPRIT:
        out["error"] = _error(lambda: dist.all_reduce(torch.ones(8), group=group))
    dump = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(True, False))
    out["entries"] = [e for e in dump["entries"] if e["process_group"][0] == group.group_name]
    out["status"] = dump["pg_status"][group.group_name]
    dist.barrier()  # the default group (long timeout) waits for the others' timeouts
    # 2. monitored_barrier: rank 0 reports the ranks that never arrived
    group = dist.new_group(list(range(world)), timeout=TIMEOUT)
    if rank != CULPRIT:
        out["barrier"] = _error(
            lambda: dist.monitored_barrier(group=group, timeout=TIMEOUT, wait_all_ranks=True)
        )
    else:
        time.sleep(TIMEOUT.total_seconds() + 1)
    dist.barrier()
    # 3. desync detection: the culprit calls the collective with another shape
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    group = dist.new_group(list(range(world)), timeout=TIMEOUT)
    numel = 4 if rank == CULPRIT else 8
    out["desync"] = _error(lambda: dist.all_reduce(torch.ones(numel), group=group))
    dist.set_debug_level(dist.DebugLevel.OFF)
    dist.barrier()
    return out


def _results() -> list[dict[str, Any]]:
    # A group of its own: collectives here time out on purpose and the debug level
    # changes, which would leave a shared (pooled) group unusable.
    return run_on_ranks_cached(_hang, WORLD, fresh=True)


def test_flight_recorder_sequence_numbers_name_the_culprit() -> None:
    results = _results()
    last = {r: int(res["status"]["last_enqueued_collective"]) for r, res in enumerate(results)}
    assert last == {r: 3 if r == CULPRIT else 4 for r in range(WORLD)}
    assert hang_culprits(last) == [CULPRIT]
    # the victims are the ranks that reported the timeout
    assert [r for r, res in enumerate(results) if res.get("error")] == [0, 1, 3]


def test_flight_recorder_entries_give_the_missing_rank_op_and_size() -> None:
    records = {
        r: [
            CollectiveRecord(
                e["collective_seq_id"],
                e["profiling_name"].split(":")[-1],
                torch.Size(e["input_sizes"][0]).numel() * 4,  # float32 inputs
                completed=True,  # gloo records no completion state; presence is what counts
            )
            for e in res["entries"]
        ]
        for r, res in enumerate(_results())
    }
    assert all(e["state"] == "scheduled" for res in _results() for e in res["entries"])
    hang = find_hang(records)
    assert hang is not None
    assert (hang.seq, hang.op, hang.nbytes, hang.missing) == (4, "all_reduce", 32, (CULPRIT,))


def test_monitored_barrier_names_the_missing_rank() -> None:
    message = _results()[0]["barrier"]
    found = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", message or "")
    assert found is not None, message
    assert [int(r) for r in found.group(1).split(",")] == [CULPRIT]


def test_detail_debug_names_the_rank_with_another_shape() -> None:
    named, records = set(), {}
    for rank, res in enumerate(_results()):
        own = re.search(
            rf"Rank {rank} is running collective: .*?TensorShape=\[(\d+)\]", res["desync"]
        )
        assert own is not None, res["desync"]
        # each rank's own fingerprint, as a one-entry record (float32 elements)
        records[rank] = [CollectiveRecord(1, "all_reduce", int(own.group(1)) * 4)]
        other = re.search(r"but Rank (\d+) is running collective", res["desync"])
        assert other is not None
        if rank != CULPRIT:
            named.add(int(other.group(1)))
    hang = find_hang(records)
    assert hang is not None and hang.mismatched and hang.missing == ()
    odd = [r for r, (e,) in records.items() if e.nbytes != records[0][0].nbytes]
    assert named == set(odd) == {CULPRIT}
