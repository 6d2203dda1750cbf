"""The worksheet's records: the workload, the axis and communication rows, the filled sheet.

:func:`infralens.design.fill_worksheet` fills these and
:func:`infralens.worksheet_tables.worksheet_tables` writes them out as tables; they
hold no pricing logic beyond resolving the workload's model.

>>> Workload(num_params=68_976_648_192, layers=80, hidden=8192, heads=64, seq_len=4096,
...          micro_batch_size=1, global_batch_size=512).config().kv_heads   # Llama 2 70B
8
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._step_checks import RECIPE
from infralens._typecheck import check_fields
from infralens._validate import check_choice, describe, positive_int
from infralens.fit import HBM_BYTES
from infralens.memory import RECOMPUTE
from infralens.model import PRESETS, TransformerConfig
from infralens.plan import ParallelPlan
from infralens.precision import RECIPES
from infralens.recipe import Recipe
from infralens.step_result import Estimate
from infralens.zero import STAGES

__all__ = [
    "REASONS",
    "RECIPE_STAGE",
    "STEP_TERMS",
    "TRACES",
    "AxisRow",
    "CommRow",
    "Workload",
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
    "zero": "shards optimizer state (ZeRO-1/2) or everything (ZeRO-3/FSDP) over the DP group",
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
"""How each term of :class:`infralens.step_result.Breakdown` is named on the worksheet."""


@dataclass(frozen=True)
class Workload:
    """A dense transformer training job: model shape, batch and memory options."""

    num_params: int
    layers: int
    hidden: int
    heads: int
    seq_len: int
    micro_batch_size: int
    global_batch_size: int
    zero_stage: int = 1
    recompute: str = "selective"
    sequence_parallel: bool = True
    bytes_per_element: int = 2
    recipe: str = ""
    gpu: str = ""
    model: str = ""
    schedule: str = "1f1b"
    chunks: int = 1
    token_budget: int | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False

    def resolved_recipe(self) -> Recipe:
        """The recipe memory and the step are counted for: ``recipe``, ``zero-paper`` at
        ``zero_stage`` (``zero-paper-1`` …), or, left empty, the one ``zero_stage`` stands
        for in :func:`infralens.step.estimate` (stage 1: the default recipe)."""
        if self.recipe == "zero-paper" and self.zero_stage:
            return RECIPES[f"zero-paper-{self.zero_stage}"]
        return RECIPES[self.recipe or RECIPE[self.zero_stage]]

    def config(self) -> TransformerConfig:
        """The model the step is priced for: the ``model`` field's preset, else the preset whose
        size and shape match, else a GPT-shaped stand-in (4h MLP, kv heads = heads) whose
        vocabulary makes up the parameter count."""
        if self.model:
            return PRESETS[check_choice("model", self.model, tuple(PRESETS))]
        for preset in PRESETS.values():
            shape = (
                preset.num_params(),
                preset.layers,
                preset.hidden,
                preset.heads,
            )
            if shape == (self.num_params, self.layers, self.hidden, self.heads):
                return preset
        h = self.hidden
        body = self.layers * (12 * h * h + 4 * h) + h
        vocab = max(1, (self.num_params - body) // (2 * h))
        return TransformerConfig(layers=self.layers, hidden=h, heads=self.heads,
                                 kv_heads=self.heads, ffn_hidden=4 * h, vocab_size=vocab,
                                 seq_len=self.seq_len, norm="rmsnorm")  # fmt: skip

    def __post_init__(self) -> None:
        for name in (
            "num_params",
            "layers",
            "hidden",
            "heads",
            "seq_len",
            "micro_batch_size",
            "global_batch_size",
            "bytes_per_element",
            "chunks",
        ):
            positive_int(name, getattr(self, name))
        for name in ("token_budget", "first_stage_layers", "last_stage_layers"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        if type(self.zero_stage) is not int or self.zero_stage not in STAGES:
            raise ValueError(
                f"zero_stage must be one of 0, 1, 2, 3; got {describe(self.zero_stage)}"
            )
        check_choice("recompute", self.recompute, RECOMPUTE)
        if self.gpu:  # left empty: the cluster's own GPU (infralens.fit.hbm_for)
            check_choice("gpu", self.gpu, tuple(HBM_BYTES))
        if self.recipe:
            check_choice("recipe", self.recipe, tuple(RECIPES))
        # The step is priced for config(): its parameter count must be this one (1 %).
        counted = self.config().num_params()
        if abs(counted - self.num_params) > self.num_params // 100:
            raise ValueError(
                f"num_params must match the shape: {self.layers} layers of hidden {self.hidden} "
                f"({describe(self.model or 'GPT-shaped')}) hold {counted}, got {self.num_params}"
            )
        stage = RECIPE_STAGE.get(self.recipe)
        if stage is not None and stage != self.zero_stage:
            raise ValueError(
                f"recipe {self.recipe!r} shards like ZeRO stage {stage}; set zero_stage to {stage}"
            )
        check_fields(self)


@dataclass(frozen=True)
class AxisRow:
    """One row of the axis table."""

    axis: str
    degree: int
    placement: str
    reason: str

    def __post_init__(self) -> None:
        check_fields(self)


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
