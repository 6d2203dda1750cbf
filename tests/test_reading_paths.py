"""Reading paths hold: every term is explained before a path leans on it.

Each term of ``infralens.labs.TERM_HOMES`` has a home section that explains
it and a glossary entry. Any other page that uses the term links it to the
glossary at its first use in prose, so a reader who arrives from any path
can look it up; and within a reading path, a page that uses a term before
the path reaches its home section must be one of those linking pages. The
interview path stays short enough to read in an evening or two.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infralens.labs import READING_PATHS, TERM_HOMES

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
GLOSSARY = HANDBOOK / "reference" / "glossary.md"
WORDS_PER_MINUTE = 200  # MyST's default reading rate (myst_words_per_minute)
PAGES = sorted(
    {
        p.relative_to(HANDBOOK).with_suffix("").as_posix()
        for d in ("handbook", "labs", "interview")
        for p in (HANDBOOK / d).glob("*.md")
    }
)
ROLE = re.compile(r"\{([a-z:]+)\}`([^`]*)`")
LINKED = "\x00"  # marks a term role in the prose stream


def term_pattern(term: str) -> re.Pattern[str]:
    """Whole-word matches of *term*: acronyms as written, phrases in any case, plurals too."""
    words = r"\s+".join(re.escape(w) for w in term.split())
    if term.isupper() or any(c.isdigit() for c in term) or term in {"ZeRO", "MoE"}:
        return re.compile(rf"(?<![\w-]){words}(?![\w])")
    return re.compile(rf"(?<![\w-]){words}s?(?![\w])", re.I)


def prose(text: str) -> str:
    """A page's prose: no code, math, headings, labels or directive lines; term roles kept.

    A ``{term}`` role becomes ``LINKED + target`` so a test can tell a linked use
    from a plain one; every other role (ref, doc, cite, py) is dropped.
    """
    out: list[str] = []
    fence: list[tuple[str, bool]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if fence and stripped == fence[-1][0]:
            fence.pop()
            continue
        opening = re.match(r"^(`{3,}|:{3,})(\{[a-z-]+\}|[a-z]*)", stripped)
        if opening:
            kind = opening[2]
            code = opening[1][0] == "`" and kind not in {"{note}", "{tip}", "{admonition}"}
            fence.append((opening[1], code or any(c for _, c in fence)))
            continue
        in_code = bool(fence) and fence[-1][1]
        if in_code or stripped.startswith("#") or re.match(r"^\(.+\)=$|^:[a-z-]+:", stripped):
            continue
        out.append(line)
    body = "\n".join(out)
    body = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", body, flags=re.S)

    def role(m: re.Match[str]) -> str:
        if m[1] != "term":
            return " "
        target = re.search(r"<([^>]+)>$", m[2])
        return f" {LINKED}{target[1] if target else m[2]}{LINKED} "

    body = ROLE.sub(role, body)
    body = re.sub(r"`[^`]*`", " ", body)
    return re.sub(r"\]\([^)]*\)", "]", body)


def first_uses(text: str) -> dict[str, bool]:
    """For each term a page uses: whether its first use is a glossary link."""
    body = prose(text)
    linked_spans = [
        (m.start(), m.group(1)) for m in re.finditer(rf"{LINKED}([^{LINKED}]+){LINKED}", body)
    ]
    plain_body = re.sub(rf"{LINKED}[^{LINKED}]+{LINKED}", lambda m: " " * len(m[0]), body)
    found: dict[str, bool] = {}
    for term in TERM_HOMES:
        plain = term_pattern(term).search(plain_body)
        link = next((pos for pos, target in linked_spans if target == term), None)
        if plain is None and link is None:
            continue
        found[term] = link is not None and (plain is None or link < plain.start())
    return found


def page_text(page: str) -> str:
    return (HANDBOOK / f"{page}.md").read_text(encoding="utf-8")


def test_every_term_has_a_glossary_entry_and_a_home_that_uses_it() -> None:
    glossary = GLOSSARY.read_text(encoding="utf-8")
    entries = set(re.findall(r"^(\S[^\n]*)$", glossary.split("```{glossary}", 1)[1], re.M))
    for term, home in TERM_HOMES.items():
        assert term in entries, f"{term} has no glossary entry"
        assert term in first_uses(page_text(home)), f"{home} never uses {term}"


@pytest.mark.parametrize("page", PAGES)
def test_a_term_is_linked_to_the_glossary_at_its_first_use(page: str) -> None:
    unlinked = [
        term
        for term, linked in first_uses(page_text(page)).items()
        if not linked and TERM_HOMES[term] != page
    ]
    assert not unlinked, f"{page}: first use not linked to the glossary: {unlinked}"


@pytest.mark.parametrize("path", sorted(READING_PATHS))
def test_no_path_leans_on_a_term_before_its_home(path: str) -> None:
    pages = READING_PATHS[path]
    for k, page in enumerate(pages):
        for term, linked in first_uses(page_text(page)).items():
            home = TERM_HOMES[term]
            explained = home in pages[: k + 1]
            assert explained or linked, f"{path}: {page} uses {term} before {home}"


def test_the_interview_path_is_an_evening_or_two() -> None:
    from tests.test_lab_pages import prose_words

    pages = READING_PATHS["interview in a week"]
    assert len(pages) <= 12
    minutes = sum(prose_words(page_text(p)) for p in pages) / WORDS_PER_MINUTE
    assert minutes <= 3 * 60, minutes


def test_the_size_and_place_path_reads_what_the_planner_assumes() -> None:
    pages = READING_PATHS["size and place a real job"]
    # Lab 12 and the ranker choose ZeRO stages, sequence parallelism,
    # 1F1B and interleaving, and selective recomputation.
    for needed in (
        "handbook/03-zero",
        "handbook/05-tensor-parallel",
        "handbook/06-pipeline-parallel",
    ):
        assert needed in pages
        assert pages.index(needed) < pages.index("labs/lab-12-cluster-design")


def test_the_prose_reader_tells_links_from_plain_uses() -> None:
    text = (
        "# MFU heading\n\nThe {term}`MFU` rises; MFU again.\n\n```{doctest}\n>>> MFU\n```\n\n"
        "A {term}`bubbles <bubble>` then a bubble, and `TP` in code and $TP$ in math.\n"
    )
    assert first_uses(text) == {"MFU": True, "bubble": True}
    assert first_uses("TP first, then {term}`TP`.") == {"TP": False}
    assert first_uses("ZeRO-3 shards parameters; see {term}`ZeRO`.") == {"ZeRO": False}
    assert first_uses("An XTP and a TPx are not TP.") == {"TP": False}
    assert first_uses("An XTP and a TPx.") == {}
