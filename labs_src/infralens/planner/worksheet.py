"""The worksheet's records: the axis and communication rows and the filled sheet.

:func:`infralens.planner.design.fill_worksheet` fills these for a
:class:`~infralens.planner.job.Job` and
:func:`infralens.planner.worksheet_tables.worksheet_tables` writes them out as tables;
they hold no pricing logic.

>>> AxisRow("tp", 8, "nvlink", REASONS["tp"]).placement
'nvlink'
>>> AxisRow("tp", 8.0, "nvlink", "")
Traceback (most recent call last):
...
TypeError: degree must be an int, got float
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields
from infralens.plan import ParallelPlan
from infralens.planner.fit import HBM_BYTES
from infralens.planner.step_result import Estimate
from infralens.precision import RECIPES

__all__ = [
    "REASONS",
    "RECIPE_STAGE",
    "STEP_TERMS",
    "TRACES",
    "AxisRow",
    "CommRow",
    "Worksheet",
]

RECIPE_STAGE = {
    name: r.zero_stage for name, r in RECIPES.items() if name != "zero-paper"
}
"""The ZeRO stage whose collectives each recipe runs; ``zero-paper`` takes any stage."""

REASONS = {
    "tp": "splits every layer's matrices; needs the fastest link",
    "cp": "splits the sequence of every layer; exchanges K/V per layer",
    "pp": "splits depth into stages; only neighbours talk",
    "dp": "replicas (sharded by ZeRO) over the rest; one sync per step",
    "zero": "shards optimizer state (ZeRO-1/2) or everything (ZeRO-3/FSDP) over dp·cp",
}

TRACES = {
    "compute": "GEMM and attention kernels on the compute stream; measure their "
    "summed time per step in torch.profiler or Nsight Systems",
    "tp": "NCCL {op} kernels between every layer's GEMMs, which wait for them; "
    "measure their summed time per step and their bus bandwidth",
    "tp-under": "NCCL {op} kernels on a second stream beside the {when} GEMM they are "
    "launched before; measure how long each runs past that GEMM",
    "cp": "NCCL send/recv kernels of the K/V ring beside each attention kernel; "
    "measure the time attention's kernels leave them uncovered",
    "pp": "send/recv kernels at the stage boundaries and idle gaps on the first "
    "and last stages at the start and end of the step; measure stage 0's idle time",
    "dp": "one {op} a step on a second NCCL stream, {when}; measure the idle "
    "gap it leaves on the compute stream there",
    "zero3": "{op} kernels on a second NCCL stream, {when}; measure how long the "
    "compute stream waits for them",
    "amax": "many short all-reduces, each a round trip; measure their count and "
    "each one's latency per step",
}
"""What each row's traffic looks like in a profiler trace and how to measure it."""

STEP_TERMS = {
    "compute": "compute (GEMMs and attention)",
    "tp": "exposed TP communication",
    "cp": "exposed CP communication",
    "ep": "exposed EP communication",
    "pp_bubble": "pipeline bubble",
    "pp_p2p": "pipeline send/recv",
    "dp": "exposed DP/FSDP communication",
    "optimizer": "optimizer step",
}
"""How each term of :class:`infralens.planner.step_result.Breakdown` is named on the worksheet."""


@dataclass(frozen=True)
class AxisRow:
    """One row of the axis table: *group* is the one its collectives wait for, the
    slowest of the axis's groups (empty at degree 1)."""

    axis: str
    degree: int
    placement: str
    reason: str
    group: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)


def group_ranks(group: tuple[int, ...]) -> str:
    """One group's ranks: a run as ``0–7``, else listed (at most four, then ``…``).

    >>> group_ranks((8, 9, 10, 11)), group_ranks((0, 8, 16, 24, 32))
    ('ranks 8–11', 'ranks 0, 8, 16, 24, …')
    """
    if len(group) > 2 and group == tuple(range(group[0], group[-1] + 1)):
        return f"ranks {group[0]}–{group[-1]}"
    shown = ", ".join(str(r) for r in group[:4])
    return f"ranks {shown}{', …' if len(group) > 4 else ''}"


@dataclass(frozen=True)
class CommRow:
    """One row of the communication table; bytes and seconds are per GPU per step."""

    axis: str
    collective: str
    frequency: str
    link: str
    bytes_per_step: Fraction
    seconds_per_step: Fraction
    risk: str

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class Worksheet:
    """The filled worksheet for one plan."""

    plan: ParallelPlan
    axes: tuple[AxisRow, ...]
    comms: tuple[CommRow, ...]
    model_state_bytes: int
    activation_bytes: int
    microbatches: int
    bubble_fraction: Fraction
    bottleneck: str
    recipe: str = ""
    capacity_bytes: int = HBM_BYTES["h100-sxm5-80gb"]
    step: Estimate | None = None
    token_budget: int | None = None

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def memory_bytes(self) -> int:
        """Model states plus activations per GPU (no CUDA context, NCCL or fragmentation)."""
        return self.model_state_bytes + self.activation_bytes

    @property
    def shortfall_bytes(self) -> int:
        """Bytes by which :attr:`memory_bytes` exceeds the GPU's HBM; negative when it fits."""
        return self.memory_bytes - self.capacity_bytes
