"""The "Verified against PyTorch" page lists exactly the runtime-agreement tests that exist.

Parsed with ast, so this runs without torch.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "handbook" / "reference" / "verification.md"
RUNTIME = ROOT / "tests" / "runtime"
NAMED = re.compile(r"`(test_[\w]+\.py)::(test_\w+)`")


def runtime_tests() -> set[str]:
    names = set()
    for path in sorted(RUNTIME.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(f"{path.name}::{node.name}")
    return names


def page_tests() -> set[str]:
    return {f"{m[1]}::{m[2]}" for m in NAMED.finditer(PAGE.read_text(encoding="utf-8"))}


def test_page_names_every_runtime_test() -> None:
    missing = sorted(runtime_tests() - page_tests())
    assert not missing, "add a row to handbook/reference/verification.md for:\n" + "\n".join(
        missing
    )


def test_page_names_no_test_that_does_not_exist() -> None:
    extra = sorted(page_tests() - runtime_tests())
    assert not extra, "verification.md names tests that do not exist:\n" + "\n".join(extra)


def test_page_states_the_pinned_torch_version() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pinned = re.search(r'"torch==([\d.]+)"', pyproject)
    assert pinned, "pyproject.toml must pin torch in the tests extra"
    assert f"PyTorch {pinned[1]}" in PAGE.read_text(encoding="utf-8")
