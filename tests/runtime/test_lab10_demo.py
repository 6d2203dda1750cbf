"""Lab 10's torchrun demo: every rank's ring attention matches infralens.ring_attention."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.runtime.harness import SKIP_REASON, run_torchrun

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.context_parallel import causal_work  # noqa: E402
from infralens.ring_attention import ring_kv_block_bytes, ring_schedule  # noqa: E402

DEMO = Path(__file__).resolve().parents[2] / "labs_src" / "demos" / "lab10_ring_attention.py"
LINE = re.compile(
    r"rank (?P<rank>\d+)/(?P<world>\d+): kv_from=\[(?P<seen>[\d, ]+)\] predicted=\[[\d, ]+\] "
    r"pairs=(?P<pairs>\d+) predicted=\d+ bytes=(?P<bytes>\d+) predicted=\d+ "
    r"max_error=(?P<error>\S+) match=(?P<match>True|False)"
)


def demo_sizes() -> tuple[int, int, int]:
    """The demo's own sizes, so this test cannot drift from it."""
    source = DEMO.read_text(encoding="utf-8")
    found = re.search(r"^SEQ_LEN, HEADS, HEAD_DIM = (\d+), (\d+), (\d+)$", source, re.M)
    assert found is not None
    seq_len, heads, head_dim = (int(x) for x in found.groups())
    return seq_len, heads, head_dim


SEQ_LEN, HEADS, HEAD_DIM = demo_sizes()


def run_demo(nproc: int) -> subprocess.CompletedProcess[str]:
    return run_torchrun(DEMO, nproc, "--backend", "gloo")


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_rank_prints_the_predicted_ring_order_work_and_bytes(nproc: int) -> None:
    done = run_demo(nproc)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = list(LINE.finditer(done.stdout))
    assert sorted(int(m["rank"]) for m in lines) == list(range(nproc)), done.stdout
    block = ring_kv_block_bytes(SEQ_LEN, nproc, HEADS, HEAD_DIM, bytes_per_element=8)
    for m in lines:
        rank = int(m["rank"])
        assert int(m["world"]) == nproc
        assert [int(x) for x in m["seen"].split(",")] == list(ring_schedule(nproc)[rank])
        assert int(m["pairs"]) == causal_work(SEQ_LEN, nproc, "load_balanced")[rank]
        assert int(m["bytes"]) == (nproc - 1) * block
        assert float(m["error"]) < 1e-12
        assert m["match"] == "True"


def test_a_world_size_that_does_not_split_the_sequence_fails_cleanly() -> None:
    done = run_demo(3)
    assert re.search(r"exitcode\s*:\s*2", done.stderr), done.stderr[-2000:]
    messages = [line for line in done.stderr.splitlines() if line.startswith("lab10_ring")]
    assert len(messages) == 1, done.stderr[-2000:]
    assert f"{SEQ_LEN} % 6 = {SEQ_LEN % 6}" in messages[0]
