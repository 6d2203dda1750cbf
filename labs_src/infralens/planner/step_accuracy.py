"""How close the step model comes to published runs, in sample and out of sample.

Every row of ``tests/data/training_runs.csv`` is compared as tokens per second
per GPU (:func:`infralens.planner.step_validation.check_run`). Two figures
describe the comparison, BF16 and FP8 apart:

- **in sample**: each row predicted with whatever constants were fitted on all
  the rows;
- **out of sample** (leave one source out): each source's rows predicted with
  the constants fitted on the *other* sources only, so that a source never
  grades a constant it helped choose.

A *calibration* is a function that takes the checks it may learn from and
returns the error it assigns to any check. The step model's two sustained shares
(:mod:`infralens.sustained`) are fitted to these runs, so the honest one is
:func:`infralens.planner.calibration.refit`, which fits them again on whatever it
is given; :func:`uncalibrated` keeps every row's own error, the model with the
shares fitted on all the rows, so its out-of-sample figure is its in-sample one.

>>> from infralens.planner.calibration import refit
>>> from infralens.planner.step_validation import check_run, load_runs
>>> checks = [check_run(r) for r in load_runs("tests/data/training_runs.csv")]
>>> inside = accuracy(checks, refit, precision="bf16", held_out=False)
>>> outside = accuracy(checks, refit, precision="bf16", held_out=True)
>>> round(inside.within, 2), round(outside.within, 2)        # share within ±15 %
(0.82, 0.82)
>>> round(inside.median_abs, 3), round(outside.median_abs, 3)
(0.067, 0.07)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice
from infralens.planner.step_validation import RunCheck

__all__ = [
    "TOLERANCE",
    "Accuracy",
    "accuracy",
    "accuracy_table",
    "family_table",
    "held_out_errors",
    "share_of_median",
    "uncalibrated",
]

TOLERANCE = 0.15
"""A prediction within ±15 % of the published tokens per second counts as a hit."""

Calibration = Callable[[Sequence[RunCheck]], Callable[[RunCheck], float]]
# A calibration: the checks to learn from -> the error the calibrated model makes on any check.


@typed
def uncalibrated(train: Sequence[RunCheck]) -> Callable[[RunCheck], float]:
    """The model as it is: nothing learnt from *train*, each row keeps its own error.

    >>> from infralens.planner.step_validation import check_run, load_runs
    >>> c = check_run(load_runs("tests/data/training_runs.csv")[0])
    >>> uncalibrated([])(c) == c.error
    True
    """
    return lambda c: c.error


@typed
def share_of_median(train: Sequence[RunCheck]) -> Callable[[RunCheck], float]:
    """Divide every prediction by the median predicted/published ratio of *train*.

    A whole-step factor, shown for what one shared constant could and could not
    do; it names no physical quantity, and the model does not apply it.

    >>> from infralens.planner.step_validation import check_run, load_runs
    >>> checks = [check_run(r) for r in load_runs("tests/data/training_runs.csv")]
    >>> round(sorted(share_of_median(checks)(c) for c in checks)[len(checks) // 2], 2)
    0.0
    >>> share_of_median([])
    Traceback (most recent call last):
    ...
    ValueError: train must hold at least one run

    Raises ``ValueError`` for no checks to learn from.
    """
    if not train:
        raise ValueError("train must hold at least one run")
    shared = median(1 + c.error for c in train)
    return lambda c: (1 + c.error) / shared - 1


@typed
def held_out_errors(
    checks: Sequence[RunCheck], fit: Calibration
) -> dict[str, float]:
    """Each run's error with *fit* learnt from every source but the run's own.

    A source is the run's :attr:`~infralens.planner.step_validation.TrainingRun.family`.
    """
    out: dict[str, float] = {}
    for family in sorted({c.row.family for c in checks}):
        model = fit([c for c in checks if c.row.family != family])
        out.update(
            {c.row.run_id: model(c) for c in checks if c.row.family == family}
        )
    return out


@dataclass(frozen=True)
class Accuracy:
    """How one set of runs fares: the share within :data:`TOLERANCE`, the median
    absolute error, and the worst run with its signed error."""

    precision: str
    held_out: bool
    runs: int
    within: float
    median_abs: float
    worst: str
    worst_error: float

    def __post_init__(self) -> None:
        check_fields(self, signed=("worst_error",))


@typed
def accuracy(
    checks: Sequence[RunCheck], fit: Calibration, *, precision: str, held_out: bool
) -> Accuracy:
    """In-sample or leave-one-source-out accuracy of the runs priced in *precision*.

    >>> from infralens.planner.step_validation import check_run, load_runs
    >>> checks = [check_run(r) for r in load_runs("tests/data/training_runs.csv")]
    >>> a = accuracy(checks, uncalibrated, precision="fp8", held_out=True)
    >>> a.runs, round(a.within, 2)
    (10, 0.9)
    >>> accuracy(checks, uncalibrated, precision="fp4", held_out=True)
    Traceback (most recent call last):
    ...
    ValueError: precision must be one of 'bf16', 'fp8'; got 'fp4'

    Raises ``ValueError`` for an unknown *precision* or when no run has it.
    """
    check_choice("precision", precision, ("bf16", "fp8"))
    if held_out:
        errors = held_out_errors(checks, fit)
    else:
        model = fit(checks)
        errors = {c.row.run_id: model(c) for c in checks}
    mine = {c.row.run_id: errors[c.row.run_id] for c in checks
            if c.row.precision == precision}  # fmt: skip
    if not mine:
        raise ValueError(f"no {precision} run among the checks")
    worst = max(mine, key=lambda k: abs(mine[k]))
    return Accuracy(
        precision, held_out, len(mine),
        sum(abs(e) <= TOLERANCE for e in mine.values()) / len(mine),
        median(abs(e) for e in mine.values()), worst, mine[worst],
    )  # fmt: skip


@typed
def accuracy_table(checks: Sequence[RunCheck], fit: Calibration) -> str:
    """Markdown: BF16 and FP8, in sample and out of sample, one line each."""
    lines = [
        "| precision | sample | runs | within ±15 % | median abs. error | worst run | its error |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for precision in ("bf16", "fp8"):
        for held_out in (False, True):
            a = accuracy(checks, fit, precision=precision, held_out=held_out)
            lines.append(
                f"| {precision.upper()} | {'out' if held_out else 'in'} | {a.runs} | "
                f"{100 * a.within:.0f} % | {100 * a.median_abs:.1f} % | {a.worst} | "
                f"{100 * a.worst_error:+.0f} % |"
            )
    return "\n".join(lines) + "\n"


@typed
def family_table(checks: Sequence[RunCheck], fit: Calibration) -> str:
    """Markdown: each source's runs, their median and range of held-out error."""
    errors = held_out_errors(checks, fit)
    lines = [
        "| source | runs | BF16 / FP8 | median error | from | to |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for family in sorted({c.row.family for c in checks}):
        mine = [c for c in checks if c.row.family == family]
        e = sorted(errors[c.row.run_id] for c in mine)
        fp8 = sum(c.row.precision == "fp8" for c in mine)
        lines.append(
            f"| {family} | {len(mine)} | {len(mine) - fp8} / {fp8} | "
            f"{100 * median(e):+.0f} % | {100 * e[0]:+.0f} % | {100 * e[-1]:+.0f} % |"
        )
    return "\n".join(lines) + "\n"
