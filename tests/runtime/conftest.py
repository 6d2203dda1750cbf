"""Runtime-agreement tests need torch.

Each test module starts with ``torch = pytest.importorskip("torch", reason=SKIP_REASON)``,
so a plain ``pytest`` without torch skips them with one line. ``nox -s tests`` sets
INFRALENS_REQUIRE_TORCH=1, and then a missing torch is an error, never a skip.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

from tests.runtime.harness import close_pools

if os.environ.get("INFRALENS_REQUIRE_TORCH") == "1" and importlib.util.find_spec("torch") is None:
    raise RuntimeError("INFRALENS_REQUIRE_TORCH=1 but torch is not installed")


@pytest.fixture(scope="session", autouse=True)
def _pooled_groups() -> Iterator[None]:
    """Stop the pooled process groups (tests/runtime/harness.py) when the session ends."""
    yield
    close_pools()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/runtime/" in item.nodeid:
            item.add_marker(pytest.mark.runtime)
