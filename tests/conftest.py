"""Test-wide settings.

Hypothesis's default 200 ms deadline per example measures machine load as
much as code; CI machines here have 2 cores shared with spawned gloo ranks,
so the deadline is off. Speed goals live in benchmarks/, not in tests.
The browser session installs no Hypothesis, so the profile is optional.
"""

from __future__ import annotations

try:
    from hypothesis import settings
except ImportError:  # nox -s browser runs only tests/browser
    pass
else:
    settings.register_profile("infralens", deadline=None)
    settings.load_profile("infralens")
