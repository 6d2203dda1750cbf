"""An illustrative backward pass for the Lab 02 figures (assumed numbers, not measurements)."""

from __future__ import annotations

from fractions import Fraction

LAYERS = 48
BACKWARD_S = [Fraction(2, 1000)] * LAYERS  # 2 ms of backward per layer
GRAD_BYTES = [5 * 10**6] * LAYERS  # 5 MB of gradients per layer
WORLD = 8
BANDWIDTH = 25 * 10**9  # bytes/s each rank sends at, assumed
