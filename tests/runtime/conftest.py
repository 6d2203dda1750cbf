"""Runtime-agreement tests need torch.

Each test module starts with ``torch = pytest.importorskip("torch", reason=SKIP_REASON)``,
so a plain ``pytest`` without torch skips them with one line. ``nox -s tests`` sets
INFRALENS_REQUIRE_TORCH=1, and then a missing torch is an error, never a skip.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

if os.environ.get("INFRALENS_REQUIRE_TORCH") == "1" and importlib.util.find_spec("torch") is None:
    raise RuntimeError("INFRALENS_REQUIRE_TORCH=1 but torch is not installed")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/runtime/" in item.nodeid:
            item.add_marker(pytest.mark.runtime)
