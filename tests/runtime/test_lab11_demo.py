"""Lab 11's torchrun demo prints, per rank, the split sizes infralens.expert_dispatch predicts."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.runtime.harness import SKIP_REASON, run_torchrun

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.expert_dispatch import rank_tokens, send_counts  # noqa: E402
from infralens.experts import route  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "labs_src" / "demos" / "lab11_moe.py"
LINE = re.compile(
    r"rank (?P<rank>\d+)/(?P<world>\d+): send_counts=(?P<send>\[[\d, ]*\]) "
    r"recv_counts=(?P<recv>\[[\d, ]*\]) received=(?P<received>\d+) "
    r"rank_tokens=(?P<load>\[[\d, ]*\]) match=(?P<match>True|False)"
)


def demo_module() -> ModuleType:
    """The demo's own routing, so the test cannot drift from it."""
    spec = importlib.util.spec_from_file_location("lab11_moe", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # The demo imports its sibling _demo.py, as it does when torchrun runs it.
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(DEMO.parent))
        spec.loader.exec_module(module)
    return module


def ints(text: str) -> list[int]:
    return [int(v) for v in text.strip("[]").split(",") if v.strip()]


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_rank_prints_the_predicted_split_sizes(nproc: int) -> None:
    done = run_torchrun(str(DEMO), nproc, "--backend", "gloo")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = list(LINE.finditer(done.stdout))
    assert sorted(int(m["rank"]) for m in lines) == list(range(nproc)), done.stdout
    demo = demo_module()
    experts = demo.EXPERTS_PER_RANK * nproc
    every = [demo.routes_of(r, experts) for r in range(nproc)]
    counts = send_counts(every, experts, nproc)
    load = rank_tokens(route([c for r in every for c in r], experts).load, nproc)
    for m in lines:
        rank = int(m["rank"])
        assert ints(m["send"]) == counts[rank]
        assert ints(m["recv"]) == [row[rank] for row in counts]
        assert int(m["received"]) == load[rank]
        assert ints(m["load"]) == load
        assert m["match"] == "True"
