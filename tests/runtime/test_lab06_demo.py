"""Lab 06's torchrun demo: the order PyTorch executes is the order infralens predicted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.runtime.harness import SKIP_REASON, run_torchrun

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.pipeline_orders import schedule_order  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "labs_src" / "demos" / "lab06_pipeline.py"
EXECUTED = re.compile(r"rank (?P<rank>\d+)/(?P<world>\d+): executed=(?P<ops>.*)")
PREDICTED = re.compile(r"rank (?P<rank>\d+)/(?P<world>\d+): predicted=.* match=(?P<match>\w+)")


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_rank_executes_the_predicted_interleaved_order(nproc: int) -> None:
    done = run_torchrun(DEMO, nproc, "--backend", "gloo")
    assert done.returncode == 0, done.stderr[-2000:]
    executed = {int(m["rank"]): m["ops"].split() for m in EXECUTED.finditer(done.stdout)}
    matches = {int(m["rank"]): m["match"] for m in PREDICTED.finditer(done.stdout)}
    assert sorted(executed) == sorted(matches) == list(range(nproc)), done.stdout
    assert set(matches.values()) == {"True"}
    # Check the executed order here too, independently of the demo's own comparison.
    order = schedule_order("interleaved", stages=nproc, microbatches=8, chunks=2, rules="torch")
    for rank in range(nproc):
        expected = [f"{k}{mb}@{c * nproc + rank}" for k, mb, c in order[rank]]
        assert executed[rank] == expected, f"rank {rank}"
