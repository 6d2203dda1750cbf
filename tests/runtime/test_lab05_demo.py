"""Lab 05's torchrun demo prints, on every rank, the shapes and collectives infralens predicted."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.runtime.harness import SKIP_REASON, run_torchrun

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.tensor_parallel import mlp_shards  # noqa: E402
from infralens.tensor_parallel_comm import layer_collectives  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "labs_src" / "demos" / "lab05_tensor_parallel.py"
LINE = re.compile(
    r"rank (?P<rank>\d+)/(?P<world>\d+) sp=(?P<sp>True|False): "
    r"fc1=\((?P<fc1>[\d, ]+)\) fc2=\((?P<fc2>[\d, ]+)\) predicted=.*? "
    r"forward_comm=(?P<comm>[\w,]*) predicted_comm=\S+ "
    r"output_matches=(?P<out>True|False) match=(?P<match>True|False)"
)


def run_demo(nproc: int, sequence_parallel: bool) -> subprocess.CompletedProcess[str]:
    extra = ["--sequence-parallel"] if sequence_parallel else []
    return run_torchrun(DEMO, nproc, "--backend", "gloo", *extra)


def demo_sizes() -> tuple[int, int]:
    source = DEMO.read_text(encoding="utf-8")
    line = next(x for x in source.splitlines() if x.startswith("HIDDEN, FFN, BATCH, SEQ = "))
    hidden, ffn, _, _ = (int(v) for v in line.split("=")[1].split(","))
    return hidden, ffn  # the demo's own sizes, so the test cannot drift from it


@pytest.mark.parametrize("sequence_parallel", [False, True])
@pytest.mark.parametrize("nproc", [2, 4])
def test_every_rank_prints_the_predicted_shapes_and_collectives(
    nproc: int, sequence_parallel: bool
) -> None:
    done = run_demo(nproc, sequence_parallel)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = list(LINE.finditer(done.stdout))
    assert sorted(int(m["rank"]) for m in lines) == list(range(nproc)), done.stdout
    hidden, ffn = demo_sizes()
    forward = sorted(
        c.op
        for c in layer_collectives(sequence_parallel=sequence_parallel)
        if c.block == "mlp" and c.direction == "forward"
    )
    for m in lines:
        fc1, fc2 = mlp_shards(hidden=hidden, ffn_hidden=ffn, tp=nproc, rank=int(m["rank"]))
        assert int(m["world"]) == nproc
        assert m["sp"] == str(sequence_parallel)
        assert tuple(int(v) for v in m["fc1"].split(",")) == fc1.weight
        assert tuple(int(v) for v in m["fc2"].split(",")) == fc2.weight
        assert m["comm"].split(",") == forward
        assert m["out"] == m["match"] == "True"
