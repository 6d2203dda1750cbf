"""What a GPU sustains inside a training step, beside what its kernels reach alone.

The step model prices a layer's GEMMs at the GPU's measured matmul ceiling
(:func:`infralens.hardware.matmul_ceiling`: large square GEMMs timed alone) and
attention at its kernel's published rate. Inside a real step two things that
neither the datasheet nor those isolated measurements give change that:

- the clocks a board holds under a long stream of tensor-core work, the SMs and HBM
  bandwidth that NCCL's kernels take while they overlap, and the L2 they share: the
  *share* of the isolated rates (GEMMs and attention) that a step sustains. No source
  gives it, so it is *calibrated*: fitted by :func:`infralens.planner.calibration.fit`
  on the shipped published runs (``tests/data/training_runs.csv``) and shipped here,
  and a test refits it and requires the same values. There are two, one per
  generation of board in the data (:func:`chip`): ``ampere`` (A100 at 400 W) and
  ``hopper`` (H100 and H200, BF16 and FP8 alike). Blackwell has no run in the data and
  takes Hopper's;
- a board held below its rated power (:data:`POWER_LIMITED`) holds lower clocks
  under load. Its share is Hopper's times :func:`clock_share`, the cube root of the
  power ratio: derived from the power limit the source states, not fitted;
- the CPU's launch gap: PyTorch with no CUDA graphs issues one kernel every
  ``kernel_seconds``, so a layer whose kernels run shorter than that
  waits on its launches. The gap is measured (:data:`LAUNCH_GAP_SECONDS`), not fitted.

A measured calibration file (``labs_src/demos/calibrate_gpu.py``) replaces the
published ceilings and the launch gap with what one GPU measured for one plan
(:func:`from_file`)::

    GEMM seconds = FLOPs / (ceiling · share[chip(gpu)] · clock_share(gpu))
    layer        = max(GEMMs + attention + element-wise, kernels · kernel_seconds)

>>> chip("a100-sxm4-80gb"), chip("h100-hbm2e-96gb"), chip("h200-sxm-141gb")
('ampere', 'hopper', 'hopper')
>>> round(clock_share("h100-hbm2e-96gb"), 3), clock_share("h100-sxm5-80gb")
(0.894, 1.0)
>>> kernels_per_layer("fused", "none"), kernels_per_layer("eager", "full")
(33, 124)
>>> Sustained(ampere=1.5, hopper=0.5, kernel_seconds=0.0)
Traceback (most recent call last):
...
ValueError: ampere must be in (0, 1], got 1.5
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from infralens._files import read_text
from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, describe
from infralens.hardware import GPUS

__all__ = [
    "CHIPS",
    "FITTED",
    "FORWARD_KERNELS",
    "IDEAL",
    "LAUNCH_GAP_SECONDS",
    "POWER_LIMITED",
    "Sustained",
    "chip",
    "clock_share",
    "from_file",
    "kernels_per_layer",
]

CHIPS = ("ampere", "hopper")
"""The kinds of board a share is fitted for: :class:`Sustained`'s share fields."""

POWER_LIMITED: dict[str, tuple[int, int]] = {"h100-hbm2e-96gb": (500, 700)}
"""Board power in watts, held and rated, of the presets whose published runs held them
below their rating: torchtitan's H100 benchmarks ran their HBM2e H100s at the default
500 W limit (benchmarks/llama3_h100_202412_torchtitan.md at b5bcd76), not the SXM
part's 700 W."""


@typed
def chip(gpu: str) -> str:
    """Which share applies to preset *gpu*: ``"ampere"``, else ``"hopper"`` (Blackwell
    included, for want of runs)."""
    key = check_choice("gpu", gpu, tuple(GPUS))
    return "ampere" if GPUS[key].arch == "ampere" else "hopper"


@typed
def clock_share(gpu: str) -> float:
    """The share of its rated clock preset *gpu* holds under load at its power limit.

    clock_share = (held watts / rated watts) ** (1/3)

    Dynamic power grows as f·V², and the voltage follows the clock, so power grows
    about as the cube of the clock: an assumption, not a measurement. A board not in
    :data:`POWER_LIMITED` holds its rated clock, 1.0.
    """
    key = check_choice("gpu", gpu, tuple(GPUS))
    held, rated = POWER_LIMITED.get(key, (1, 1))
    return float((held / rated) ** (1 / 3))


FORWARD_KERNELS: dict[str, int] = {
    # Megatron-Core's fused layer: two fused norms, QKV, fused rotary, attention, the
    # projection, bias-dropout-add, fc1, the fused activation, fc2, bias-dropout-add.
    "fused": 11,
    # torchtitan's Llama block run eagerly, one kernel per ATen operator of the
    # operator list behind infralens.elementwise.EAGER_BYTES: RMSNorm's seven operators
    # twice, six for the rotary embedding, two for repeat_kv, SiLU and its product, two
    # residual adds, and the four matmuls and the attention kernel.
    "eager": 31,
}
"""Kernels one layer launches forward, by how its element-wise operators run."""


@dataclass(frozen=True)
class Sustained:
    """The rates a step sustains: the shares *ampere* and *hopper* of the isolated rates
    (:func:`chip` says which applies), *kernel_seconds* between
    launches, and optionally GEMM rates in FLOP/s measured on the *gpu* preset, which
    replace its published BF16 and FP8 ceilings (a step on another GPU refuses them)."""

    ampere: float
    hopper: float
    kernel_seconds: float
    bf16_flops: float | None = None
    fp8_flops: float | None = None
    gpu: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        check_fields(self)
        for name in CHIPS:
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {describe(v)}")
        for name in ("kernel_seconds", "bf16_flops", "fp8_flops"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name} must be finite, got {describe(v)}")
        if self.gpu is not None:
            check_choice("gpu", self.gpu, tuple(GPUS))
        if (self.bf16_flops or self.fp8_flops) and self.gpu is None:
            raise ValueError(
                "gpu must name the preset the measured rates were taken on"
            )

    def share(self, gpu: str) -> float:
        """The share of the isolated rates that work on preset *gpu* sustains: its
        generation's share times :func:`clock_share`."""
        return float(getattr(self, chip(gpu))) * clock_share(gpu)


LAUNCH_GAP_SECONDS = 9.7e-6
"""Seconds between back-to-back kernel launches from eager PyTorch: the median of the six
runs of ``labs_src/demos/calibrate_gpu.py`` on an NVIDIA H200 (driver 580.159.04,
CUDA 13.0, torch 2.11.0+cu130) whose files ``tests/data/gpu/`` ships (7.1 to 10.1 µs)."""

IDEAL = Sustained(1.0, 1.0, kernel_seconds=0.0, source="isolated kernel rates")
"""Kernels at their isolated rates, launched for free: the model before calibration."""

FITTED = Sustained(
    ampere=0.72,
    hopper=0.70,
    kernel_seconds=LAUNCH_GAP_SECONDS,
    source="shares fitted on tests/data/training_runs.csv by "
    "infralens.planner.calibration.fit; launch gap measured",
)
"""The two sustained shares fitted on every shipped published run, and the measured
launch gap (see the module text)."""


@typed
def kernels_per_layer(elementwise: str, recompute: str) -> int:
    """Kernels one layer launches per micro-batch: forward, two per forward kernel
    backward, and the forward again under full recomputation.

    kernels = FORWARD_KERNELS[elementwise] · (3 + [recompute == "full"])
    """
    forward = FORWARD_KERNELS[
        check_choice("elementwise", elementwise, tuple(FORWARD_KERNELS))
    ]
    mode = check_choice("recompute", recompute, ("none", "selective", "full"))
    return forward * (4 if mode == "full" else 3)


@typed
def from_file(path: str | Path) -> Sustained:
    """The :class:`Sustained` a ``calibrate_gpu.py`` JSON file measured.

    Its plan's GEMM rates replace the published ceiling and shape efficiency; its
    launch gap replaces :data:`LAUNCH_GAP_SECONDS`; the shares stay fitted,
    since a kernel timed alone cannot see what it loses beside the rest of a step.
    Raises ``ValueError`` naming the file for one it cannot read or a missing or
    malformed field.
    """
    text = read_text(path, "calibration file", 1_000_000)
    p = Path(path)
    try:
        data = json.loads(text)
        rates = data["plan_gemm_flops_per_s"]
        v = data["versions"]
        return Sustained(
            FITTED.ampere, FITTED.hopper,
            kernel_seconds=float(data["launch_seconds"]),
            bf16_flops=float(rates["bf16"]),
            fp8_flops=float(rates["fp8"]) if "fp8" in rates else None,
            gpu=str(data["gpu_preset"]),
            source=f"measured: {v['gpu']}, driver {v.get('driver', '?')}, "
            f"CUDA {v['cuda']}, torch {v['torch']} ({p.name})",
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"path {p.name[:80]!r} is not a calibration file: {str(exc)[:200]}"
        ) from None
