"""Each plan file is judged against its own GPU's HBM, the one `rank` checked it on.

A row `rank` writes with `--write-plan` names its cluster; `plan` and `memory` read the
file and must compare the same GB with the same capacity: the cluster's GPU, or the
preset a `training.gpu` key names in its place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infralens.cli import main

ARGS = ("--model", "llama3-8b", "--gpus", "8", "--seq-len", "16384", "--global-batch", "64")


def _written_row(
    cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, float]:
    """Row 1 of `rank` on *cluster*, written as a plan file, and the GB rank printed."""
    path = tmp_path / f"{cluster}.yaml"
    assert main(["rank", *ARGS, "--cluster", cluster, "--write-plan", "1", str(path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| 1 |"))  # fmt: skip
    return path, float(row.split(" | ")[13])


def _verdicts(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The total line of `memory` and the memory line of `plan` for *path*."""
    assert main(["memory", "--plan", str(path)]) == 0
    memory = next(x for x in capsys.readouterr().out.splitlines() if "total" in x)
    assert main(["plan", str(path)]) == 0
    plan = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Memory per"))
    return memory, plan


@pytest.mark.parametrize(
    ("cluster", "gpu", "hbm"),
    [("dgx-h200", "h200-sxm-141gb", 141), ("grand-teton-h100-hbm2e", "h100-hbm2e-96gb", 96)],
)
def test_a_written_rank_row_fits_in_plan_and_memory_as_in_rank(
    cluster: str, gpu: str, hbm: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, ranked_gb = _written_row(cluster, tmp_path, capsys)
    assert 80 < ranked_gb < hbm  # over an 80 GB H100's HBM, under this GPU's
    memory, plan = _verdicts(path, capsys)
    assert f"{ranked_gb:.1f}" == f"{float(memory.split()[1]):.1f}"
    assert f"of {hbm:.2f} GB ({gpu}): fits" in memory
    assert f"= {ranked_gb:.1f} GB of {hbm} GB HBM: fits" in plan


@pytest.mark.parametrize(
    ("cluster", "gpu", "hbm", "verdict"),
    [("dgx-h200", "h100-sxm5-80gb", 80, "does not fit"),
     ("dgx-h100", "h200-sxm-141gb", 141, "fits")],
)  # fmt: skip
def test_training_gpu_replaces_the_clusters_hbm_in_plan_and_memory(
    cluster: str, gpu: str, hbm: int, verdict: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path, _ = _written_row("dgx-h200", tmp_path, capsys)
    text = re.sub(r"cluster: \S+", f"cluster: {cluster}", path.read_text("utf-8"))
    path.write_text(text + f"  gpu: {gpu}\n", encoding="utf-8")
    memory, plan = _verdicts(path, capsys)
    assert f"of {hbm:.2f} GB ({gpu}): {verdict}" in memory
    assert f"of {hbm} GB HBM: {verdict}" in plan


def test_the_memory_commands_gpu_and_hbm_gb_override_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _written_row("dgx-h200", tmp_path, capsys)
    assert main(["memory", "--plan", str(path), "--gpu", "h100-sxm5-80gb"]) == 0
    assert "of 80.00 GB (h100-sxm5-80gb): does not fit" in capsys.readouterr().out
    assert main(["memory", "--plan", str(path), "--hbm-gb", "200"]) == 0
    assert "of 200.00 GB (--hbm-gb): fits" in capsys.readouterr().out
