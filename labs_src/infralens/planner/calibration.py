"""Fit the step model's two calibrated constants, the sustained shares, from published runs.

:class:`infralens.sustained.Sustained` holds the quantities no datasheet or isolated
kernel measurement gives: the share of the isolated tensor-core rates (the measured
matmul ceiling, the attention kernels' rates) that a training step sustains, one for
each generation of board in the data (:func:`infralens.sustained.chip`: A100 and
Hopper; a board held below its rated power keeps its derived
:func:`~infralens.sustained.clock_share` of Hopper's). :func:`fit` chooses each on the
runs of its generation alone,
so that the model's tokens per second per GPU match theirs in the least absolute log
error::

    share = argmin over f of  Σ |log(predicted_i(f) / published_i)|

BF16 and FP8 runs share their board's value: a separate FP8 share, fitted on the two
sources that publish FP8 runs, would be graded on one source while fitted on the
other. Each row's prediction is the whole step model
(:func:`infralens.planner.step_validation.check_run`), so a share moves only the
GEMMs and attention; communication, bubbles, element-wise kernels and the optimizer
keep their own prices, and the launch gap stays the measured one. The absolute
error, unlike the squared, lets no single run with a mechanism the model lacks pull
a constant. Each share is one value for every run of its board, never a factor per
run or per source; :func:`refit` is the same fit as a
calibration for :mod:`infralens.planner.step_accuracy`, so that leave-one-source-out
accuracy refits on the other sources only. A generation with no run among those given
takes Hopper's share.

>>> from infralens.planner.step_validation import load_runs
>>> rows = load_runs("tests/data/training_runs.csv")
>>> s = fit(rows)                          # what infralens.sustained.FITTED ships
>>> s.ampere, s.hopper
(0.72, 0.7)
>>> fit(rows[:1])
Traceback (most recent call last):
...
ValueError: rows must hold at least two runs, got 1
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

from infralens._typecheck import typed
from infralens.hardware import SYSTEMS, preset_key
from infralens.planner.step_validation import RunCheck, TrainingRun, check_run
from infralens.sustained import CHIPS, LAUNCH_GAP_SECONDS, Sustained, chip

__all__ = ["fit", "folds_table", "measurement_table", "refit"]

_LOW, _HIGH = 0.30, 1.00  # each share is searched in this range
_STEP = 0.005
_GOLDEN = (math.sqrt(5) - 1) / 2


def _loss(rows: tuple[TrainingRun, ...], shares: Sustained) -> float:
    return sum(abs(math.log1p(check_run(r, shares).error)) for r in rows)


def _search(
    rows: tuple[TrainingRun, ...], make: Callable[[float], Sustained]
) -> float:
    """The share in [_LOW, _HIGH], to 0.005, that minimises the loss of *rows*."""
    lo, hi = _LOW, _HIGH
    while hi - lo > 0.01:  # golden section, then the grid points around its bracket
        a, b = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
        if _loss(rows, make(a)) <= _loss(rows, make(b)):
            hi = b
        else:
            lo = a
    grid = sorted({min(max(round(round(lo / _STEP) * _STEP + i * _STEP, 3), _LOW), _HIGH)
                   for i in range(-2, 5)})  # fmt: skip
    return min(grid, key=lambda f: _loss(rows, make(f)))


@lru_cache(maxsize=64)
def _fit(rows: tuple[TrainingRun, ...]) -> tuple[float, ...]:
    kinds = {name: tuple(r for r in rows if chip(preset_key(SYSTEMS[r.system].gpu)) == name)
             for name in CHIPS}  # fmt: skip

    def only(
        value: float,
    ) -> Sustained:  # every board's share the same: each row sees one
        return Sustained(value, value, kernel_seconds=LAUNCH_GAP_SECONDS)

    found = {name: _search(mine, only) for name, mine in kinds.items() if mine}
    # A board with no run takes Hopper's share, or any fitted one.
    fallback = found.get("hopper", next(iter(found.values()), 1.0))
    return tuple(found.get(name, fallback) for name in CHIPS)


@typed
def fit(rows: Sequence[TrainingRun]) -> Sustained:
    """The :class:`~infralens.sustained.Sustained` whose shares best fit *rows* (module
    text), to 0.005, with the measured launch gap.

    Raises ``ValueError`` for fewer than two runs.
    """
    if len(rows) < 2:
        raise ValueError(f"rows must hold at least two runs, got {len(rows)}")
    ampere, hopper = _fit(tuple(rows))
    return Sustained(
        ampere, hopper, kernel_seconds=LAUNCH_GAP_SECONDS,
        source=f"shares fitted on {len(rows)} published runs",
    )  # fmt: skip


@typed
def refit(train: Sequence[RunCheck]) -> Callable[[RunCheck], float]:
    """:func:`fit` on *train*'s runs, as a calibration: the error it leaves on any check.

    Raises ``ValueError`` for fewer than two checks.
    """
    if len(train) < 2:
        raise ValueError(f"train must hold at least two runs, got {len(train)}")
    s = fit([c.row for c in train])
    return lambda c: check_run(c.row, s).error


@typed
def folds_table(rows: Sequence[TrainingRun]) -> str:
    """Markdown: the shares fitted on every run, and on every source but one."""
    lines = [
        "| fitted on | runs: A100, Hopper | A100 | Hopper |",
        "| --- | --- | ---: | ---: |",
    ]

    def line(name: str, subset: Sequence[TrainingRun]) -> str:
        s = fit(subset)
        kinds = [chip(preset_key(SYSTEMS[r.system].gpu)) for r in subset]
        counts = ", ".join(str(kinds.count(k)) for k in CHIPS)
        return f"| {name} | {counts} | {s.ampere:.3f} | {s.hopper:.3f} |"

    lines.append(line("every source (shipped)", rows))
    for family in sorted({r.family for r in rows}):
        lines.append(
            line(f"all but {family}", [r for r in rows if r.family != family])
        )
    return "\n".join(lines) + "\n"


@typed
def measurement_table(paths: Sequence[Path]) -> str:
    """Markdown: what ``calibrate_gpu.py`` measured in each file, one plan a row, and the
    GPU, driver, CUDA and torch it ran on.

    GEMM rates are the plan's forward, dgrad and wgrad GEMMs together, timed in CUDA
    graphs (the GPU's time) and one launch at a time (eager); attention is causal,
    forward and backward.
    """
    lines = [
        "| plan | GEMMs BF16 (graphs) | eager | FP8 (graphs) | square BF16 | attention fwd "
        "| attention bwd | launch gap |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    seen = set()
    for path in paths:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        p, a = d["plan"], d["attention"]
        flops = sum(2 * g["m"] * g["n"] * g["k"] for g in d["gemms"])
        eager = flops / sum(g["bf16_eager_seconds"] for g in d["gemms"])
        rates = d["plan_gemm_flops_per_s"]
        fp8 = f"{rates['fp8'] / 1e12:,.0f}" if "fp8" in rates else "–"
        # a shape spec is named by its file: cal-gpt3.6b-... -> gpt3.6b
        model = (
            p["model"] if "=" not in p["model"] else Path(path).stem.split("-")[1]
        )
        lines.append(
            f"| {model}, {p['micro_batch']} × {p['seq_len']}, tp {p['tp']} "
            f"| {rates['bf16'] / 1e12:,.0f} | {eager / 1e12:,.0f} | {fp8} "
            f"| {d['square_gemm']['bf16_flops_per_s'] / 1e12:,.0f} "
            f"| {a['forward_flops_per_s'] / 1e12:,.0f} | {a['backward_flops_per_s'] / 1e12:,.0f} "
            f"| {d['launch_seconds'] * 1e6:.1f} µs |"
        )
        v = d["versions"]
        seen.add(f"{v['gpu']} ({v['sms']} SMs; driver, power limit, top SM clock: "
                 f"{v['driver']}), CUDA {v['cuda']}, torch {v['torch']}")  # fmt: skip
    lines.append("")
    lines.append("Rates in TFLOP/s. Measured on " + "; ".join(sorted(seen)) + ".")
    return "\n".join(lines) + "\n"
