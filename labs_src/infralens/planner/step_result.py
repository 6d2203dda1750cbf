"""What :func:`infralens.planner.step.estimate` returns: one step's seconds by cause, and its rates.

:class:`Breakdown` holds the seconds each cause puts on the critical path; they add up
to the step. :class:`Estimate` adds what a reader compares: MFU and HFU, TFLOP/s and
tokens per second per GPU, the memory the step needs, and the recipe and precision it
was priced for. Both check what their numbers mean when they are made (every term
finite and >= 0; 0 < MFU <= HFU <= 1), so a result that breaks that is refused.

>>> b = Breakdown(compute=8.0, tp=1.5, cp=0.0, ep=0.0, pp_bubble=0.4, pp_p2p=0.1, dp=0.0,
...               optimizer=0.0)
>>> b.total, max(b.items(), key=lambda kv: kv[1])[0]
(10.0, 'compute')
>>> Breakdown(compute=-1.0, tp=0, cp=0, ep=0, pp_bubble=0, pp_p2p=0, dp=0, optimizer=0)
Traceback (most recent call last):
...
ValueError: compute must be >= 0, got -1.0
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from infralens._typecheck import check_fields
from infralens._validate import positive_int
from infralens.planner import _step_checks as checks

__all__ = ["Breakdown", "Estimate"]


@dataclass(frozen=True)
class Breakdown:
    """Seconds per step on the critical path, by cause; they add up to the step."""

    compute: float
    tp: float
    cp: float
    ep: float
    pp_bubble: float
    pp_p2p: float
    dp: float
    optimizer: float

    def __post_init__(self) -> None:
        check_fields(self)
        checks.check_terms(self.items())

    def items(self) -> list[tuple[str, float]]:
        """(name, seconds) pairs in field order."""
        return [(f.name, getattr(self, f.name)) for f in fields(self)]

    @property
    def total(self) -> float:
        """The step: the sum of every term."""
        return sum(v for _, v in self.items())


@dataclass(frozen=True)
class Estimate:
    """One predicted step: time, throughput, utilisation and where the time goes."""

    seconds: float
    mfu: float
    hfu: float
    tflops_per_gpu: float
    tokens_per_second_per_gpu: float
    microbatches: int
    breakdown: Breakdown
    memory_bytes: int

    def __post_init__(self) -> None:
        """Check what the quantities mean: 0 < MFU <= HFU <= 1, a positive finite step."""
        check_fields(self)
        rates = {"tflops_per_gpu": self.tflops_per_gpu,
                 "tokens_per_second_per_gpu": self.tokens_per_second_per_gpu}  # fmt: skip
        counts = {"microbatches": self.microbatches, "gpus": self.gpus}
        checks.check_step(self.seconds, self.mfu, self.hfu, rates, counts)

    @property
    def bottleneck(self) -> str:
        """The largest term of ``breakdown``."""
        return max(self.breakdown.items(), key=lambda kv: kv[1])[0]

    gpus: int
    recipe: str = ""
    precision: str = (
        "bf16"  # the GEMMs' precision, whose dense peak MFU and HFU divide by
    )

    def days(self, tokens: int) -> float:
        """Days to train on *tokens* tokens at this throughput on ``gpus`` GPUs.

        days = tokens / (tokens/s per GPU · GPUs) / 86,400
        """
        t = positive_int("tokens", tokens)
        return t / (self.tokens_per_second_per_gpu * self.gpus) / 86400
