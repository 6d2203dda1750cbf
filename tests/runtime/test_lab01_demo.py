"""Lab 01's torchrun demo prints, on every rank, what infralens.ddp predicted."""

from __future__ import annotations

import re
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from tests.runtime.harness import SKIP_REASON, run_torchrun

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.ddp import ddp_gradients, mean_squared_error_grad, split_batch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "labs_src" / "demos" / "lab01_ddp.py"
LINE = re.compile(
    r"rank (?P<rank>\d+)/(?P<world>\d+): local_grad=(?P<local>-?[\d/]+) "
    r"synced_grad=(?P<synced>-?[\d/]+) predicted=(?P<predicted>-?[\d/]+) "
    r"match=(?P<match>True|False)"
)


def run_demo(nproc: int) -> subprocess.CompletedProcess[str]:
    return run_torchrun(DEMO, nproc, "--backend", "gloo")


def load_batch() -> list[tuple[int, int]]:
    namespace: dict[str, object] = {}
    source = DEMO.read_text(encoding="utf-8")
    batch_line = next(line for line in source.splitlines() if line.startswith("BATCH = "))
    exec(batch_line, namespace)  # the demo's own batch, so the test cannot drift from it
    batch = namespace["BATCH"]
    assert isinstance(batch, list)
    return batch


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_rank_prints_the_predicted_gradient(nproc: int) -> None:
    done = run_demo(nproc)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = list(LINE.finditer(done.stdout))
    assert sorted(int(m["rank"]) for m in lines) == list(range(nproc)), done.stdout
    per_rank = split_batch(load_batch(), nproc)
    predicted = ddp_gradients(1, per_rank)
    for m in lines:
        rank = int(m["rank"])
        assert int(m["world"]) == nproc
        assert Fraction(m["local"]) == mean_squared_error_grad(1, per_rank[rank])
        assert Fraction(m["synced"]) == predicted[rank]
        assert Fraction(m["predicted"]) == predicted[rank]
        assert m["match"] == "True"


def test_a_world_size_that_does_not_divide_the_batch_fails_cleanly() -> None:
    done = run_demo(3)
    assert done.returncode != 0
    assert re.search(r"exitcode\s*:\s*2", done.stderr), done.stderr[-2000:]  # the demo's own 2
    messages = [line for line in done.stderr.splitlines() if line.startswith("lab01_ddp:")]
    assert len(messages) == 1, done.stderr[-2000:]
    assert "8 % 3 = 2" in messages[0]
    # torchrun's own agent reports the failed child with a traceback of its own;
    # the demo must not add one: no frame of the script appears.
    assert 'lab01_ddp.py", line' not in done.stderr
