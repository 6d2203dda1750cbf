"""infralens.planner.published_rank: where each published plan sits in `rank`'s list."""

from __future__ import annotations

from pathlib import Path

import pytest

from infralens.planner.published_rank import PublishedRank, published_rank, rank_table
from infralens.planner.ranking import rank_plans
from infralens.planner.step_validation import load_runs
from infralens.topology import Cluster

RUNS = {r.run_id: r for r in load_runs(Path("tests/data/training_runs.csv"), unpriced=True)}


def test_the_position_is_the_published_degrees_row_in_rank_plans() -> None:
    row = RUNS["narayanan-3.6b"]
    got = published_rank(row)
    cluster = Cluster.from_node_shape(f"{row.gpus // 8}_nodes_x_8_gpus", row.system)
    rows = rank_plans(row.config(), cluster, seq_len=row.seq_len,
                      global_batch_size=row.global_batch, micro_batch_size=row.micro_batch,
                      top=1000)  # fmt: skip
    at = [i for i, r in enumerate(rows, 1) if (r.plan.tp, r.plan.pp, r.plan.dp) == (2, 1, 32)]
    assert got.plan == "tp 2 cp 1 pp 1 dp 32" and [got.position] == at
    assert got.ranked == len(rows)
    slower = rows[at[0] - 1].estimate.seconds / rows[0].estimate.seconds - 1
    assert got.slower == pytest.approx(slower) and got.slower > 0


def test_a_plan_outside_the_search_says_why() -> None:
    got = published_rank(RUNS["vtrain-3.6b-tp16-pp1-dp4"])
    assert got.position is None and got.ranked > 0
    assert "NVLink domain" in got.why
    assert "not ranked (tp beyond" in rank_table([got])


def test_an_unpriced_run_is_refused() -> None:
    row = next(r for r in RUNS.values() if r.unpriced)
    with pytest.raises(ValueError, match="is not priced"):
        published_rank(row)


def test_the_table_prints_each_rank() -> None:
    text = rank_table([PublishedRank("a", "tp 1 cp 1 pp 1 dp 8", 1, 20, 0.0),
                       PublishedRank("b", "tp 16 cp 1 pp 1 dp 4", None, 60, why="x")])  # fmt: skip
    assert "| a | tp 1 cp 1 pp 1 dp 8 | 1 of 20 | +0.0 % |" in text
    assert "| b | tp 16 cp 1 pp 1 dp 4 | not ranked (x) | – |" in text
