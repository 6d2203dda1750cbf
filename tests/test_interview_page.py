"""The interview page: every card has a computed follow-up; the checklist lists every card."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "handbook" / "interview" / "practice.md"
CARD = re.compile(r"^### (\d+)\. ", re.M)
# Cards still waiting for a computed follow-up (none today).
FOLLOW_UP_PENDING: set[int] = set()


def cards() -> dict[int, str]:
    text = PAGE.read_text(encoding="utf-8")
    text = text[: text.index("## Review checklist")]
    starts = [(int(m.group(1)), m.start()) for m in CARD.finditer(text)]
    ends = [s for _, s in starts[1:]] + [len(text)]
    return {n: text[s:e] for (n, s), e in zip(starts, ends, strict=True)}


def test_cards_are_numbered_in_order() -> None:
    assert list(cards()) == list(range(1, len(cards()) + 1))


def test_every_card_has_a_follow_up_with_a_doctest() -> None:
    for number, body in cards().items():
        if number in FOLLOW_UP_PENDING:
            continue
        assert "**Follow-up.**" in body, f"card {number} has no follow-up"
        follow = body[body.index("**Follow-up.**") :]
        assert "```{doctest}" in follow, f"card {number}'s follow-up computes nothing"


def test_checklist_lists_every_card() -> None:
    text = PAGE.read_text(encoding="utf-8")
    checklist = text[text.index("## Review checklist") : text.index("## Sources")]
    items = [int(n) for n in re.findall(r"^(\d+)\. ", checklist, re.M)]
    assert items == list(cards())


def test_question_map_names_every_card() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## Question map") : text.index("## Cards")]
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]
    named = {int(n) for row in rows for n in re.findall(r"\b(\d+)\b", row.split("|")[2])}
    assert named == set(cards())
