"""Test-wide settings.

Hypothesis's default 200 ms deadline per example measures machine load as
much as code; CI machines here have 2 cores shared with spawned gloo ranks,
so the deadline is off. Speed goals live in benchmarks/, not in tests.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("infralens", deadline=None)
settings.load_profile("infralens")
