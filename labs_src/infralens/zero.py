"""ZeRO stages 1-3: what each data-parallel rank stores, and what it sends.

Notation of Rajbhandari et al. (2020): Ψ parameters trained with mixed
precision Adam keep 2Ψ bytes of fp16 parameters, 2Ψ bytes of fp16 gradients
and KΨ bytes of optimizer state (K = 12: fp32 master weights, momentum and
variance). N_d is the data-parallel degree. Stage 1 shards the optimizer
state over the N_d ranks, stage 2 also the gradients, stage 3 also the
parameters; stage 0 is plain data parallelism.

>>> psi = 7_500_000_000
>>> [model_state_bytes(psi, dp_size=64, stage=s) / 10**9 for s in STAGES]
[120.0, 31.40625, 16.640625, 1.875]

Those are the paper's 120 GB, 31.4 GB, 16.6 GB and 1.9 GB (Figure 1), which
the paper rounds to one decimal; its GB is 10**9 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import describe, nonnegative_int, positive_int
from infralens.collectives import ring_bytes_sent
from infralens.sharding import padded_shard_size

__all__ = [
    "STAGES",
    "ModelStates",
    "accumulation_bytes_per_rank",
    "communication_bytes_per_rank",
    "communication_elements",
    "model_state_bytes",
    "model_states",
    "step_collectives",
]

STAGES = (0, 1, 2, 3)
"""ZeRO stages: 0 is plain data parallelism; 1, 2, 3 shard ever more state."""

PARAM_BYTES = 2  # fp16/bf16 parameters
GRAD_BYTES = 2  # fp16/bf16 gradients


def _stage(stage: object) -> int:
    if isinstance(stage, bool) or not isinstance(stage, int) or stage not in STAGES:
        raise ValueError(f"stage must be one of 0, 1, 2, 3; got {describe(stage)}")
    return stage


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model state one rank holds, by component."""

    parameters: int
    gradients: int
    optimizer: int

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def total(self) -> int:
        """Sum of the three components, in bytes.

        >>> ModelStates(parameters=2, gradients=2, optimizer=12).total
        16
        """
        return self.parameters + self.gradients + self.optimizer


def model_states(
    num_params: int, *, dp_size: int, stage: int, optimizer_multiplier: int = 12
) -> ModelStates:
    """Per-rank bytes of parameters, gradients and optimizer state under a ZeRO stage.

    A replicated component costs its full size; a sharded one costs one
    rank's shard, ``ceil(Ψ / N_d)`` elements (the padded shard every rank
    allocates, see :func:`infralens.sharding.padded_shard_size`):

    - stage 0: 2Ψ + 2Ψ + KΨ
    - stage 1: 2Ψ + 2Ψ + K·⌈Ψ/N_d⌉
    - stage 2: 2Ψ + 2·⌈Ψ/N_d⌉ + K·⌈Ψ/N_d⌉
    - stage 3: 2·⌈Ψ/N_d⌉ + 2·⌈Ψ/N_d⌉ + K·⌈Ψ/N_d⌉

    >>> model_states(1000, dp_size=4, stage=2)
    ModelStates(parameters=2000, gradients=500, optimizer=3000)
    >>> model_states(10, dp_size=4, stage=3)        # 10 over 4 ranks pads to 3 each
    ModelStates(parameters=6, gradients=6, optimizer=36)

    Raises ``ValueError`` if *stage* is not 0-3, *dp_size* or
    *optimizer_multiplier* is below 1, or *num_params* is negative.
    """
    # [start:shard-size]
    psi = nonnegative_int("num_params", num_params)
    shard = padded_shard_size(psi, positive_int("dp_size", dp_size))
    k = positive_int("optimizer_multiplier", optimizer_multiplier)
    s = _stage(stage)
    # [end:shard-size]
    # [start:stage-terms]
    # sharded from stage 1: optimizer; from 2: gradients; from 3: parameters
    return ModelStates(
        parameters=PARAM_BYTES * (shard if s >= 3 else psi),
        gradients=GRAD_BYTES * (shard if s >= 2 else psi),
        optimizer=k * (shard if s >= 1 else psi),
    )
    # [end:stage-terms]


def model_state_bytes(
    num_params: int, *, dp_size: int, stage: int, optimizer_multiplier: int = 12
) -> int:
    """Bytes of parameters, gradients and optimizer state per rank: ``model_states(...).total``.

    >>> model_state_bytes(10**9, dp_size=8, stage=0)       # 16 bytes per parameter
    16000000000
    >>> model_state_bytes(10**9, dp_size=8, stage=3)
    2000000000
    >>> model_state_bytes(10**9, dp_size=1, stage=3)       # one rank: nothing to shard
    16000000000
    >>> model_state_bytes(10**9, dp_size=8, stage=4)
    Traceback (most recent call last):
    ...
    ValueError: stage must be one of 0, 1, 2, 3; got 4

    Raises ``ValueError`` as :func:`model_states` does.
    """
    return model_states(
        num_params,
        dp_size=dp_size,
        stage=stage,
        optimizer_multiplier=optimizer_multiplier,
    ).total


def step_collectives(stage: int) -> tuple[tuple[str, str], ...]:
    """The collectives one training step runs over the data-parallel group, in order.

    Each entry is ``(collective, what it moves)``; each moves Ψ elements.

    >>> step_collectives(0)
    (('reduce_scatter', 'gradients'), ('all_gather', 'summed gradients'))
    >>> [op for op, _ in step_collectives(3)]
    ['all_gather', 'all_gather', 'reduce_scatter']

    Stage 0's all-reduce is written as its two ring passes. Raises
    ``ValueError`` if *stage* is not 0-3.
    """
    # [start:stage-passes]
    # one ring pass per entry, each over Ψ elements of the data-parallel group
    s = _stage(stage)
    if s == 0:
        return (("reduce_scatter", "gradients"), ("all_gather", "summed gradients"))
    if s in (1, 2):
        return (
            ("reduce_scatter", "gradients"),
            ("all_gather", "updated parameters"),
        )
    return (
        ("all_gather", "parameters for forward"),
        ("all_gather", "parameters for backward"),
        ("reduce_scatter", "gradients"),
    )
    # [end:stage-passes]


def communication_elements(num_params: int, *, stage: int) -> int:
    """Elements moved per step, as the ZeRO paper counts them: 2Ψ for stages 0-2, 3Ψ for stage 3.

    >>> communication_elements(100, stage=2)
    200
    >>> communication_elements(100, stage=3)
    300
    >>> communication_elements(0, stage=1)
    0

    Raises ``ValueError`` if *stage* is not 0-3 or *num_params* is negative.
    """
    return len(step_collectives(stage)) * nonnegative_int("num_params", num_params)


def communication_bytes_per_rank(
    num_params: int, *, dp_size: int, stage: int, bytes_per_element: int = 2
) -> Fraction:
    """Bytes each rank sends per step in ring collectives: ``(N_d − 1)/N_d`` of the paper's volume.

    ``sum(ring_bytes_sent(op, Ψ · bytes_per_element, N_d))`` over
    :func:`step_collectives`.

    >>> communication_bytes_per_rank(10**9, dp_size=64, stage=2) / 10**9
    Fraction(63, 16)
    >>> stage3 = communication_bytes_per_rank(10**9, dp_size=64, stage=3)
    >>> stage3 / communication_bytes_per_rank(10**9, dp_size=64, stage=0)
    Fraction(3, 2)
    >>> communication_bytes_per_rank(10**9, dp_size=1, stage=3)
    Fraction(0, 1)

    Raises ``ValueError`` for a bad stage, size or degree.
    """
    # [start:price-passes]
    nbytes = nonnegative_int("num_params", num_params) * positive_int(
        "bytes_per_element", bytes_per_element
    )
    dp = positive_int("dp_size", dp_size)
    return sum(
        (ring_bytes_sent(op, nbytes, dp) for op, _ in step_collectives(stage)),
        start=Fraction(0),
    )
    # [end:price-passes]


@typed
def accumulation_bytes_per_rank(
    num_params: int,
    *,
    dp_size: int,
    stage: int,
    microbatches: int,
    bytes_per_element: int = 2,
) -> Fraction:
    """Bytes each rank sends per step when the step accumulates *microbatches* gradients.

    Stages 0-1 reduce the accumulated gradients once per step. Stage 2 keeps only its
    gradient shard, so it reduce-scatters after every micro-batch's backward; stage 3
    also gathers the parameters for every micro-batch's forward and backward. This is
    the rule behind pairing pipelines, which need many micro-batches, with stage 1:
    stage 2 multiplies the gradient traffic by m, stage 3 the whole step's by m.

    >>> one = communication_bytes_per_rank(10**9, dp_size=8, stage=1)
    >>> [accumulation_bytes_per_rank(10**9, dp_size=8, stage=s, microbatches=16) / one
    ...  for s in (1, 2, 3)]
    [Fraction(1, 1), Fraction(17, 2), Fraction(24, 1)]
    >>> accumulation_bytes_per_rank(10**9, dp_size=8, stage=2, microbatches=0)
    Traceback (most recent call last):
    ...
    ValueError: microbatches must be >= 1, got 0

    Raises ``ValueError`` for a bad stage, size or degree.
    """
    m = positive_int("microbatches", microbatches)
    per_pass = communication_bytes_per_rank(
        num_params,
        dp_size=dp_size,
        stage=_stage(stage),
        bytes_per_element=bytes_per_element,
    )
    if stage <= 1:
        return per_pass
    # stage 2: m reduce-scatters, one all-gather of the updated parameters; stage 3: m x all
    return per_pass * m if stage == 3 else per_pass / 2 * (m + 1)
