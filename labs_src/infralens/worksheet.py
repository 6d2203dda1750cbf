"""The worksheet's records: the workload, the axis and communication rows, the filled sheet.

:func:`infralens.design.fill_worksheet` fills these; they hold no pricing
logic beyond resolving the workload's model.

>>> Workload(num_params=68_976_648_192, layers=80, hidden=8192, heads=64, seq_len=4096,
...          micro_batch_size=1, global_batch_size=512).config().kv_heads   # Llama 2 70B
8
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._step_checks import RECIPE
from infralens._typecheck import check_fields, typed
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
    "AxisRow",
    "CommRow",
    "Workload",
    "Worksheet",
    "worksheet_tables",
]

RECIPE_STAGE = {name: r.zero_stage for name, r in RECIPES.items() if name != "zero-paper"}
"""The ZeRO stage whose collectives each recipe runs; ``zero-paper`` takes any stage."""

REASONS = {
    "tp": "splits every layer's matrices; needs the fastest link",
    "cp": "splits the sequence of every layer; exchanges K/V per layer",
    "pp": "splits depth into stages; only neighbours talk",
    "dp": "replicas (sharded by ZeRO) over the rest; one sync per step",
    "zero": "shards optimizer state (ZeRO-1/2) or everything (ZeRO-3/FSDP) over the DP group",
}

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
    gpu: str = "h100-sxm5-80gb"
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
            shape = (preset.num_params(), preset.layers, preset.hidden, preset.heads)
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


LINK_WORDS = {"nvlink": "NVLink, inside a node", "network": "network, between nodes"}
"""How a tier name reads in the worksheet's tables."""


def _ranks(group: list[int]) -> str:
    """One group's ranks: a run as ``0–7``, else listed (at most four, then ``…``)."""
    if len(group) > 2 and group == list(range(group[0], group[-1] + 1)):
        return f"ranks {group[0]}–{group[-1]}"
    shown = ", ".join(str(r) for r in group[:4])
    return f"ranks {shown}{', …' if len(group) > 4 else ''}"


def _risk(sheet: Worksheet, e: Estimate, axis: str, link: str) -> str:
    """What the axis's traffic costs the step, in words: exposed seconds of its total, share."""
    exposed = e.breakdown.pp_p2p if axis == "pp" else getattr(e.breakdown, axis)
    total = float(sum(r.seconds_per_step for r in sheet.comms if r.axis == axis))
    share = f"{exposed:.2f} s of its {total:.2f} s exposed, {exposed / e.seconds:.1%} of the step"
    if axis == "pp":
        return f"a bubble of {float(sheet.bubble_fraction):.1%} of ideal compute; {share}"
    where = "crosses nodes" if link == "network" else "stays on NVLink"
    if axis in ("tp", "cp"):
        return f"runs between the GEMMs of every layer and {where}: {share}"
    return f"{where}, once per step rather than per micro-batch: {share}"


@typed
def worksheet_tables(sheet: Worksheet) -> str:
    """The filled worksheet as MyST: the axis table, the traffic table and the step's terms.

    Placement names one group's ranks and the slowest link it crosses; the
    traffic table gives each collective's bytes sent per GPU per step and its
    seconds per step before overlap (the row's own price), and its risk in
    words from the step estimate: what stays exposed, share = term / step.
    The step table lists every nonzero term; the largest bounds the step.

    >>> from infralens.design import fill_worksheet
    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> w = Workload(num_params=10**9, layers=16, hidden=2048, heads=16, seq_len=2048,
    ...              micro_batch_size=1, global_batch_size=16)
    >>> two_nodes = Cluster.from_node_shape("2_nodes_x_8_gpus")
    >>> text = worksheet_tables(fill_worksheet(ParallelPlan(tp=8, dp=2), two_nodes, w))
    >>> for row in text.splitlines():
    ...     if row.startswith(("| TP |", "| DP |")):
    ...         print(row.split(" | ")[:3])
    ['| TP', '8', 'NVLink, inside a node: ranks 0–7']
    ['| DP', '2', 'network, between nodes: ranks 0, 8']
    >>> worksheet_tables(None)
    Traceback (most recent call last):
    ...
    TypeError: sheet must be a Worksheet, got NoneType
    """
    label = {"zero": "FSDP/ZeRO"}
    out = ["```{table} Axes: degree, placement (one group's ranks) and reason",
           "| Axis | Degree | Placement | Reason |", "| --- | ---: | --- | --- |"]  # fmt: skip
    for a in sheet.axes:
        where = LINK_WORDS.get(a.placement, "no group: degree 1")
        if a.degree > 1:
            where += ": " + _ranks(sheet.plan.groups("dp" if a.axis == "zero" else a.axis)[0])
        out.append(f"| {label.get(a.axis, a.axis.upper())} | {a.degree} | {where} | {a.reason} |")
    out += ["```", "", "```{table} Communication: bytes and seconds per GPU per step",
            "| Communication | Frequency | Preferred link | GB sent | Seconds, before overlap "
            "| Risk |", "| --- | --- | --- | ---: | ---: | --- |"]  # fmt: skip
    seen: set[str] = set()
    for r in sheet.comms:
        if r.axis == "compute":
            continue
        risk = r.risk if sheet.step is None else _risk(sheet, sheet.step, r.axis, r.link)
        if r.axis in seen:
            risk = "as the row above (same axis)"
        seen.add(r.axis)
        op = f"{r.axis.upper()} {r.collective.replace('_', '/' if 'send' in r.collective else '-')}"
        link = LINK_WORDS.get(r.link, r.link)
        if r.axis in ("tp", "cp") and r.link != "nvlink":
            link += " (wants NVLink)"
        out.append(
            f"| {op} | {r.frequency} | {link} | "
            f"{float(r.bytes_per_step) / 1e9:,.2f} | {float(r.seconds_per_step):.3f} | {risk} |"
        )
    out += ["```"]
    if sheet.step is not None:
        e = sheet.step
        out += ["", "```{table} The step's terms: seconds on the critical path and share",
                "| Term | Seconds | Share of step |", "| --- | ---: | ---: |"]  # fmt: skip
        out += [
            f"| {STEP_TERMS[name]} | {sec:.2f} | {sec / e.seconds:.1%} |"
            for name, sec in e.breakdown.items()
            if sec > 0
        ]
        out += ["```", "", f"Predicted step {e.seconds:.2f} s, MFU {e.mfu:.1%}; the largest "
                f"term, which bounds the step: {STEP_TERMS[e.bottleneck]}."]  # fmt: skip
    over = sheet.shortfall_bytes / 1e9
    verdict = f"does not fit by {over:.1f} GB" if over > 0 else f"fits, {-over:.1f} GB spare"
    out += ["", f"Memory per GPU: {sheet.model_state_bytes / 1e9:.1f} GB model states + "
            f"{sheet.activation_bytes / 1e9:.1f} GB activations = {sheet.memory_bytes / 1e9:.1f}"
            f" GB of {sheet.capacity_bytes / 1e9:.0f} GB: {verdict}; {sheet.microbatches} "
            f"micro-batches per replica, bubble {float(sheet.bubble_fraction):.1%}."]  # fmt: skip
    return "\n".join(out) + "\n"
