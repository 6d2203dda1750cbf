"""Lab 15's torchrun demo reports nccl-tests' algbw and busbw, and the model's prediction."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from tests.runtime.harness import SKIP_REASON, run_torchrun

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.collectives import bus_bandwidth_factor  # noqa: E402
from infralens.hardware import SYSTEMS  # noqa: E402
from infralens.nccl import predict  # noqa: E402
from infralens.topology import Cluster  # noqa: E402

DEMO = Path(__file__).resolve().parents[2] / "labs_src" / "demos" / "lab15_busbw.py"
LINE = re.compile(
    r"(?P<op>all_reduce|all_gather) size=(?P<size>\d+) time_us=(?P<us>[\d.]+) "
    r"algbw=(?P<algbw>[\d.]+) busbw=(?P<busbw>[\d.]+) "
    r"model=(?P<algo>\w+)/(?P<proto>\w+) model_busbw=(?P<model>[\d.]+)"
)


def test_rank_zero_reports_busbw_as_nccl_tests_defines_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFRALENS_PRESET", "dgx-h100")
    done = run_torchrun(DEMO, 4, "--backend", "gloo")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(LINE.finditer(done.stdout))
    assert [(m["op"], int(m["size"])) for m in rows] == [
        (op, size) for op in ("all_reduce", "all_gather") for size in (2**16, 2**20)
    ], done.stdout
    four = Cluster(1, 4, SYSTEMS["dgx-h100"])
    for m in rows:
        factor = bus_bandwidth_factor(m["op"], 4)  # 3/2 and 3/4 on four ranks
        # both are printed to 6 decimals: each carries up to 5e-7 of rounding, which on a
        # slow gloo run (0.009 GB/s) is more than 1e-4 of the value
        expected = float(m["algbw"]) * float(factor)
        assert float(m["busbw"]) == pytest.approx(expected, rel=1e-4, abs=5e-7 * (1 + factor))
        assert float(m["algbw"]) == pytest.approx(int(m["size"]) / float(m["us"]) / 1e3, rel=0.01)
        p = predict(m["op"], int(m["size"]), four)
        assert (m["algo"], m["proto"]) == (p.algorithm, p.protocol)
        assert float(m["model"]) == pytest.approx(p.bus_bandwidth, abs=0.05)
    assert factor == Fraction(3, 4)
    assert done.stdout.count("all_reduce sum correct=True") == 4
