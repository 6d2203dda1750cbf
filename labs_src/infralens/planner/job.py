"""One training job: the model, the plan, the cluster, the batch and the options that price it.

A :class:`Job` is the planner's one description of a job. A plan file loads into
one (:func:`infralens.planner.plan_file.parse_plan`),
:func:`~infralens.planner.ranking.rank_plans` yields one per row and
``rank --write-plan`` writes it back (:func:`~infralens.planner.plan_writer.plan_yaml`),
and :func:`~infralens.planner.step.estimate`, :func:`~infralens.planner.fit.gpu_memory`,
the worksheet (:func:`~infralens.planner.design.fill_worksheet`) and every command take
it, so none of them can describe the same job differently.

micro-batches per step m = global_batch_size / (micro_batch_size · dp)

>>> from infralens.plan import ParallelPlan
>>> from infralens.topology import Cluster
>>> job = Job("llama3-8b", ParallelPlan(dp=8), Cluster.from_node_shape("1_node_x_8_gpus"),
...           seq_len=8192, global_batch_size=16)
>>> job.microbatches, job.gpu_key, job.resolved_recipe().name
(2, 'h100-sxm5-80gb', 'megatron-bf16-distopt')
>>> Job("llama3-8b", ParallelPlan(dp=4), Cluster.from_node_shape("1_node_x_8_gpus"),
...     seq_len=8192, global_batch_size=16)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: plan must fill the cluster: tp * cp * pp * dp must ... = 4 != 8
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields
from infralens._validate import check_choice, positive_int
from infralens.attention_kernels import ATTENTION_KERNELS
from infralens.batch import grad_accum_steps_for
from infralens.compute import RECOMPUTE_MODES
from infralens.elementwise import ELEMENTWISE_KERNELS
from infralens.hardware import GPUS, preset_key
from infralens.memory import _model
from infralens.model import PRESETS, TransformerConfig
from infralens.plan import ParallelPlan
from infralens.precision import RECIPES
from infralens.recipe import Recipe
from infralens.sustained import Sustained
from infralens.topology import Cluster

__all__ = ["SCHEDULES", "Job"]

SCHEDULES = ("1f1b", "interleaved")
"""Megatron-Core's pipeline schedules: one chunk per stage, or ``chunks`` chunks (v)."""


@dataclass(frozen=True)
class Job:
    """A dense transformer training job as the planner prices it.

    *model* is a :class:`~infralens.model.TransformerConfig` or a preset name (kept as
    the config). *recipe* (a :data:`~infralens.precision.RECIPES` name or a
    :class:`~infralens.recipe.Recipe`) or a bare *zero_stage* picks the precision and
    sharding recipe (``zero-paper`` with *zero_stage*: the ZeRO paper's count at that
    stage); with neither, the default. *gpu* is the :data:`~infralens.hardware.GPUS`
    preset memory is judged against, by default the cluster's own GPU. The options
    after *recipe* are :func:`~infralens.planner.step.estimate`'s: recomputation,
    sequence parallelism, the schedule and its chunks, the attention and
    element-wise kernels, the overlap and reduction options, and Megatron-Core's
    uneven first and last stages. *token_budget* gives the days a run takes.
    *sustained* sets the rates the GPU sustains inside the step
    (:class:`~infralens.sustained.Sustained`: by default the fitted
    :data:`~infralens.sustained.FITTED`; :func:`~infralens.sustained.from_file` reads a
    measured one).

    Raises ``TypeError`` naming the field whose value has the wrong type, and
    ``ValueError`` naming it for a size below 1, an unknown model, recipe,
    recomputation, schedule, attention or element-wise kernel or GPU, a *zero_stage*
    that contradicts the recipe, or a plan that does not fill the cluster. Whether the
    layers, heads, sequence and batch divide is the step's and the memory count's to
    say (:func:`~infralens.planner.step.estimate` names the one that does not).
    """

    model: TransformerConfig | str
    plan: ParallelPlan
    cluster: Cluster
    seq_len: int
    global_batch_size: int
    micro_batch_size: int = 1
    recipe: str | Recipe | None = None
    zero_stage: int | None = None
    recompute: str = "selective"
    sequence_parallel: bool = True
    schedule: str = "1f1b"
    chunks: int = 1
    attention: str = "flash2"
    elementwise: str | None = None
    overlap_grad_reduce: bool = True
    grad_reduce_in_fp32: bool | None = None
    scatter_gather_p2p: bool = False
    tp_comm_overlap: bool = False
    uneven_stages: bool = False
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False
    gpu: str | None = None
    token_budget: int | None = None
    sustained: Sustained | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if isinstance(self.model, str):  # a preset name: hold its config
            object.__setattr__(self, "model", _model(self.model))
        for name in ("seq_len", "global_batch_size", "micro_batch_size", "chunks"):
            positive_int(name, getattr(self, name))
        for name in ("first_stage_layers", "last_stage_layers", "token_budget"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        try:
            self.plan.check_world_size(self.cluster.world_size)
        except ValueError as err:
            raise ValueError(f"plan must fill the cluster: {err}") from None
        check_choice("recompute", self.recompute, RECOMPUTE_MODES)
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("attention", self.attention, ATTENTION_KERNELS)
        if self.elementwise is not None:
            check_choice("elementwise", self.elementwise, ELEMENTWISE_KERNELS)
        if self.gpu is not None:
            check_choice("gpu", self.gpu, tuple(GPUS))
        self.resolved_recipe()  # an unknown recipe or a contradicting stage stops here

    @property
    def config(self) -> TransformerConfig:
        """The model as a :class:`~infralens.model.TransformerConfig`."""
        return _model(self.model)

    @property
    def model_name(self) -> str | None:
        """The :data:`~infralens.model.PRESETS` name of the model, or None for a shape."""
        return next((k for k, v in PRESETS.items() if v == self.model), None)

    @property
    def gpu_key(self) -> str:
        """The :data:`~infralens.hardware.GPUS` key memory is judged against."""
        return self.gpu or preset_key(self.cluster.system.gpu)

    @property
    def hbm_bytes(self) -> int:
        """HBM of :attr:`gpu_key`, in bytes (datasheet GB, 10**9 bytes)."""
        return GPUS[self.gpu_key].hbm_bytes

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica per step; ``ValueError`` if the batch does not split."""
        return grad_accum_steps_for(
            global_batch_size=self.global_batch_size,
            micro_batch_size=self.micro_batch_size,
            dp_size=self.plan.dp,
        )

    def resolved_recipe(self) -> Recipe:
        """The recipe memory and the step are counted for (see the class text)."""
        from infralens.planner._step_checks import resolve_recipe

        if self.recipe == "zero-paper" and self.zero_stage:
            return RECIPES[f"zero-paper-{self.zero_stage}"]
        return resolve_recipe(self.recipe, self.zero_stage)[0]
