"""One layer's critical path: which communication hides behind which compute.

A layer runs two phases per micro-batch, forward then backward (a full recomputation's
forward runs inside backward). In each phase its collectives share one stream, so they
run one after another, and each hides only behind compute that runs while it does:

- a blocking collective (TP's forward gathers and reduce-scatters, the gradient
  all-gather of a row-parallel linear) sits between GEMMs: the next GEMM waits for it;
- a collective launched under one GEMM (Megatron-Core and Transformer Engine launch
  the re-gather of a column-parallel linear's saved input before its dgrad GEMM and the
  dgrad reduce-scatter before its wgrad GEMM) hides behind that GEMM only;
- the context-parallel ring hides behind attention only;
- FSDP's prefetched all-gather and its reduce-scatter hide behind any compute of the
  phase.

    own   = Σ max(0, x_i − g_i) + max(0, ring − A)      (past their own kernels)
    phase = blocking + max(C + own, Σ x_i + ring + fsdp)

so two collectives never hide behind the same compute, and no traffic hidden is longer
than the compute that hides it. The part of the stream longer than ``C + own`` is charged
to FSDP first (it joined last), then to the ring, then to TP.

Communication that runs beside compute slows the kernels it shares the SMs and HBM
with: :data:`OVERLAP_SLOWDOWN` of every second of compute that has a collective beside
it is added to compute.

>>> ph = Phase(compute=10.0, attention=4.0, blocking=1.0, ring=6.0, fsdp=5.0)
>>> e = phase_exposed(ph)
>>> e.cp, e.dp, e.tp    # ring: 2 s past attention; FSDP: the stream's 11 s in 12 s
(2.0, 0.0, 1.0)
>>> phase_exposed(Phase(compute=10.0, attention=4.0, ring=6.0, fsdp=9.0)).dp
3.0
"""

from __future__ import annotations

from dataclasses import dataclass

OVERLAP_SLOWDOWN = 0.189
"""Fraction by which compute slows while a collective runs beside it: the average
computational slowdown measured by overlapping the GEMMs and collectives of GPT and Llama
training on four A100, H100, MI250 and MI210 GPUs (Lee et al. 2025, arXiv 2507.03114,
abstract: 18.9 % on average, 40.0 % at most). One constant for every GPU, link and
collective: the measurement does not split it further."""


@dataclass(frozen=True)
class Phase:
    """One phase (forward or backward) of one layer and micro-batch, in seconds.

    *under_gemm* pairs each collective launched under a GEMM with that GEMM's time.
    """

    compute: float
    attention: float = 0.0
    blocking: float = 0.0
    under_gemm: tuple[tuple[float, float], ...] = ()
    ring: float = 0.0
    fsdp: float = 0.0


@dataclass(frozen=True)
class Exposed:
    """What a phase adds to compute, by axis, and the stream time it leaves free.

    *slowdown* is the compute slowed by collectives beside it; *free* the time the
    phase's compute runs with no collective on the stream, which the data-parallel
    gradient reduction can use; *open* the phase's time with no FSDP traffic, which a
    reduction over links the phase's TP and CP traffic never crosses can use instead.
    """

    tp: float = 0.0
    cp: float = 0.0
    dp: float = 0.0
    slowdown: float = 0.0
    free: float = 0.0
    open: float = 0.0

    def __add__(self, other: Exposed) -> Exposed:
        return Exposed(
            self.tp + other.tp,
            self.cp + other.cp,
            self.dp + other.dp,
            self.slowdown + other.slowdown,
            self.free + other.free,
            self.open + other.open,
        )

    def __mul__(self, times: float) -> Exposed:
        return Exposed(
            self.tp * times,
            self.cp * times,
            self.dp * times,
            self.slowdown * times,
            self.free * times,
            self.open * times,
        )


def phase_exposed(ph: Phase) -> Exposed:
    """The critical path of one phase, as the exposed seconds of each axis (module text)."""
    own_tp = sum(max(0.0, x - g) for x, g in ph.under_gemm)
    own_cp = max(0.0, ph.ring - ph.attention)
    window = ph.compute + own_tp + own_cp
    tp_cp = sum(x for x, _ in ph.under_gemm) + ph.ring
    stream = tp_cp + ph.fsdp
    late = max(0.0, tp_cp - window)  # TP and the ring alone outrun the phase
    extra = max(0.0, stream - window)
    beside = min(
        ph.compute, stream - own_tp - own_cp
    )  # compute with traffic beside it
    return Exposed(
        tp=ph.blocking + own_tp + (0.0 if ph.ring else late),
        cp=own_cp + (late if ph.ring else 0.0),
        dp=extra - late,
        slowdown=OVERLAP_SLOWDOWN * beside,
        free=max(0.0, window - stream),
        open=max(0.0, window - ph.fsdp),
    )


def forward_share(recompute: str) -> float:
    """The forward phase's share of a layer's compute: its GEMMs are 1 of 3 passes, or 1
    of 4 when a full recomputation runs the forward again inside backward."""
    return 0.25 if recompute == "full" else 1 / 3


def hidden(traffic: float, free: float, last: float) -> float:
    """Exposed seconds of *traffic* that may run in *free* stream time, all but its
    *last* fraction (the bucket that waits for the last gradients)."""
    return max(traffic - free, traffic * last)
