"""infralens.diagnosis on the shipped traces, its error paths, and the failure checklists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infralens.diagnosis import (
    STARTER_TRACES,
    RankStep,
    Trace,
    classify,
    load_trace,
    scaling_efficiency,
)
from infralens.failure_checklist import COLLECT_FIRST, FAILURE_CHECKLIST


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("compute_bound", "compute-bound"),
        ("communication_bound", "communication-bound"),
        ("straggler", "straggler"),
        ("input_stall", "input-pipeline stall"),
    ],
)
def test_each_shipped_trace_gets_its_verdict(name: str, kind: str) -> None:
    assert classify(load_trace(STARTER_TRACES / f"{name}.json")).kind == kind


def test_a_slow_rank_without_waiting_peers_is_not_called_a_straggler() -> None:
    records = [RankStep(0, r, 1.0 if r == 0 else 0.5, 0.0, 0.0) for r in range(4)]
    assert classify(Trace(4, tuple(records))).kind == "compute-bound"


def test_scaling_efficiency_is_one_at_the_base() -> None:
    assert scaling_efficiency({4: 2.0})[4] == 1.0


def test_checklist_covers_the_failures() -> None:
    assert [row[0] for row in FAILURE_CHECKLIST] == [
        "hang or NCCL timeout", "GPU fault", "launch mismatch", "one rank out of memory",
        "slow step or straggler", "checkpoint corruption",
    ]  # fmt: skip


def test_the_checklist_never_sends_the_reader_to_the_first_rank_that_reported() -> None:
    # that rank is usually a victim waiting in the collective the culprit never started
    for _, first, _ in FAILURE_CHECKLIST:
        assert "first rank" not in first and "rank 0" not in first
    assert [what for what, _ in COLLECT_FIRST] == [
        "flight-recorder dumps from every rank", "NCCL_DEBUG=INFO output from every rank",
        "GPU error logs from every node", "per-rank step times",
    ]  # fmt: skip


def test_trace_with_missing_ranks_is_rejected(tmp_path: Path) -> None:
    data = json.loads((STARTER_TRACES / "straggler.json").read_text())
    data["records"] = [r for r in data["records"] if not (r["step"] == 1 and r["rank"] == 3)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"at step 1 .* missing \[3\]"):
        load_trace(path)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Trace(2, ()), "at least one record"),
        (lambda: Trace(0, (RankStep(0, 0, 1, 0, 0),)), "world_size must be >= 1"),
        (lambda: Trace(1, (RankStep(0, 0, -1, 0, 0),)), "compute_s must be >= 0"),
        (
            lambda: Trace(1, (RankStep(0, 0, 1, 0, 0), RankStep(0, 1, 1, 0, 0))),
            "unexpected \\[1\\]",
        ),
        (lambda: scaling_efficiency({}), "at least one world size"),
        (lambda: scaling_efficiency({8: 0.0}), "must be > 0"),
    ],
)
def test_bad_input(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_malformed_trace_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"world_size": 1, "records": [{"rank": 0}]}))
    with pytest.raises(ValueError, match="every record"):
        load_trace(path)
    path.write_text("[]")
    with pytest.raises(ValueError, match="must be a JSON object"):
        load_trace(path)
