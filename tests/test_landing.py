"""The lab list in infralens.labs matches the pages, and every page gets a provenance line.

The landing page, its map figure and the provenance lines under each title are
generated from infralens.labs and the test files (conf/infralens_pages.py);
these tests keep that data true to the files on disk.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from infralens.labs import AXES, LABS, READING_PATHS, SECTIONS

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
sys.path.insert(0, str(ROOT / "conf"))
import infralens_pages  # noqa: E402


def page(docname: str) -> Path:
    return HANDBOOK / f"{docname}.md"


def test_every_lab_page_on_disk_is_in_the_list_and_back() -> None:
    on_disk = {
        p.relative_to(HANDBOOK).with_suffix("").as_posix() for p in HANDBOOK.glob("labs/lab-*.md")
    }
    assert on_disk == {item.page for item in LABS}


def test_every_section_on_disk_is_in_the_list_and_back() -> None:
    on_disk = {
        p.relative_to(HANDBOOK).with_suffix("").as_posix() for p in HANDBOOK.glob("handbook/*.md")
    }
    assert on_disk == set(SECTIONS)


@pytest.mark.parametrize("item", LABS, ids=lambda item: item.label)
def test_lab_pages_carry_their_labels_numbers_and_modules(item: object) -> None:
    lab_text = page(item.page).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert lab_text.startswith(f"({item.label})=\n# Lab {item.number:02d}:")  # type: ignore[attr-defined]
    assert f"{{ref}}`{item.section}`" in lab_text  # type: ignore[attr-defined]
    section_text = page(item.section_page).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert section_text.startswith(f"({item.section})=\n# ")  # type: ignore[attr-defined]
    for module in item.modules:  # type: ignore[attr-defined]
        importlib.import_module(module)
        assert re.search(rf"(automodule:: |py:mod\}}`){re.escape(module)}\b", lab_text), module


def test_every_axis_has_a_lab_and_every_lab_an_axis() -> None:
    assert {item.axis for item in LABS} == set(AXES)


def test_reading_paths_name_existing_pages_without_repeats() -> None:
    assert set(READING_PATHS) == {
        "learn it all",
        "interview in a week",
        "size and place a real job",
    }
    for name, pages in READING_PATHS.items():
        missing = [p for p in pages if not page(p).exists()]
        assert not missing, (name, missing)
        assert len(pages) == len(set(pages)), name
    everything = set(SECTIONS) | {item.page for item in LABS}
    assert set(READING_PATHS["learn it all"]) == everything


def test_provenance_covers_every_lab_and_section_page() -> None:
    records = infralens_pages.provenance()
    pages = {
        p.relative_to(HANDBOOK).with_suffix("").as_posix()
        for d in ("labs", "handbook")
        for p in (HANDBOOK / d).glob("*.md")
    }
    assert set(records) == pages
    for name, record in records.items():
        assert record.unit_tests > 0 or record.runtime_tests, (
            f"{name}: no test exercises its modules"
        )
        assert record.torch_version == infralens_pages.torch_version()


def test_provenance_finds_the_known_runtime_and_measurement_checks() -> None:
    # Independent anchors: these test files exist and import these modules.
    records = infralens_pages.provenance()
    assert any(
        t.startswith("test_fsdp_torch.py::") for t in records["labs/lab-04-fsdp"].runtime_tests
    )
    assert "nccl_tests.csv" in records["labs/lab-15-nccl"].data_files
    assert records["labs/lab-15-nccl"] == records["handbook/15-nccl"]


def test_landing_lists_every_lab_once_with_its_module_summary() -> None:
    text = infralens_pages.landing_markdown()
    for item in LABS:
        line = next(
            row for row in text.splitlines() if row.startswith(f"- {{ref}}`Lab {item.number:02d} <")
        )
        doc = importlib.import_module(item.modules[0]).__doc__ or ""
        assert line.endswith(doc.strip().splitlines()[0])
