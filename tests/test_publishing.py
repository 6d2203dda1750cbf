"""Publishing metadata agrees with itself, and every page stands on cited sources."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
BIB = HANDBOOK / "reference" / "references.bib"
CONTENT_DIRS = ("handbook", "labs", "interview")


def pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def bib_entries() -> dict[str, str]:
    text = BIB.read_text(encoding="utf-8")
    starts = list(re.finditer(r"^@(\w+)\{([^,]+),", text, flags=re.M))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return {m[2]: text[m.start() : end] for m, end in zip(starts, ends, strict=True)}


def content_pages() -> list[Path]:
    return sorted(p for d in CONTENT_DIRS for p in (HANDBOOK / d).glob("*.md"))


def test_citation_cff_and_changelog_carry_the_pyproject_version() -> None:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == pyproject_version()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    latest = re.search(r"^## (\S+)", changelog, flags=re.M)
    assert latest and latest[1] == pyproject_version()


def test_bibliography_is_large_enough_and_every_entry_is_traceable() -> None:
    entries = bib_entries()
    assert len(entries) >= 20
    traceable = re.compile(r"\b(doi|eprint|url)\s*=")
    untraceable = [key for key, body in entries.items() if not traceable.search(body)]
    assert not untraceable, f"entries without doi, eprint or url: {untraceable}"


def test_every_cited_key_exists() -> None:
    keys = set(bib_entries())
    cited: set[str] = set()
    for page in HANDBOOK.rglob("*.md"):
        for group in re.findall(r"\{cite:\w+\}`([^`]+)`", page.read_text(encoding="utf-8")):
            cited |= {k.strip() for k in group.split(",")}
    assert cited <= keys, sorted(cited - keys)


@pytest.mark.parametrize("page", content_pages(), ids=lambda p: p.relative_to(HANDBOOK).as_posix())
def test_every_content_page_cites_a_source(page: Path) -> None:
    assert re.search(r"\{cite:\w+\}`", page.read_text(encoding="utf-8")), f"{page} cites nothing"


def glossary_entries() -> list[list[str]]:
    """Each entry's names: consecutive unindented lines are aliases of one entry."""
    text = (HANDBOOK / "reference" / "glossary.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    entries: list[list[str]] = []
    previous_was_term = False
    for line in block.splitlines():
        is_term = bool(line) and not line.startswith((" ", ":"))
        if is_term and previous_was_term:
            entries[-1].append(line)
        elif is_term:
            entries.append([line])
        previous_was_term = is_term
    return entries


def test_every_glossary_term_is_used_somewhere() -> None:
    used: set[str] = set()
    for page in HANDBOOK.rglob("*.md"):
        for ref in re.findall(r"\{term\}`([^`]+)`", page.read_text(encoding="utf-8")):
            used.add(" ".join(ref.split("<")[-1].rstrip(">").split()).lower())
    unused = [names for names in glossary_entries() if not {n.lower() for n in names} & used]
    assert not unused, f"glossary terms no page links with {{term}}: {unused}"
