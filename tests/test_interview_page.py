"""The interview page is built for rehearsal.

Every card shows its question and follow-up before any answer, then a closed
list of points to hit, a closed answer (a short answer a candidate can say in under
a minute, without code, then the deeper explanation, the common mistake and
cited sources), the follow-up's answer in its own dropdown, and the doctests
behind its numbers in a separate one. The map and the checklist link every
card.
"""

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


def dropdown(body: str, title: str) -> str:
    """The text of the dropdown called *title* in a card ('' if there is none)."""
    match = re.search(rf"^(:{{3,}})\{{dropdown\}} {re.escape(title)}\n(.*?)^\1$", body, re.M | re.S)
    return match.group(2) if match else ""


def test_every_card_shows_its_question_and_keeps_the_points_closed() -> None:
    # The reader answers aloud first: the follow-up is visible, the points to hit
    # are the first dropdown, closed, and nothing of the answer shows before it.
    for number, body in cards().items():
        first_dropdown = body.index("{dropdown}")
        visible = body[:first_dropdown]
        assert re.search(r"^\*\*Follow-up\.\*\* \*.+\?\*$", visible, re.M | re.S), number
        assert not re.search(r"^- ", visible, re.M), f"card {number} shows points"
        assert body[first_dropdown:].startswith("{dropdown} Points to hit\n"), number
        points = dropdown(body, "Points to hit")
        assert 3 <= len(re.findall(r"^- ", points, re.M)) <= 5, f"card {number}"
        assert ":open:" not in points, f"card {number}"


def test_every_answer_is_short_code_free_and_sourced() -> None:
    for number, body in cards().items():
        answer = dropdown(body, "Answer")
        assert answer, f"card {number} has no Answer dropdown"
        short = answer[answer.index("**Short answer.**") :].split("\n\n**", 1)[0]
        words = re.findall(r"[A-Za-z0-9][\w'’.,-]*", short.removeprefix("**Short answer.**"))
        assert len(words) <= 120, f"card {number}: short answer of {len(words)} words"
        assert "`" not in short and ">>>" not in short, f"card {number}: code in the short answer"
        for part in ("**Deeper.**", "**Common mistake.**", "**Sources.**"):
            assert part in answer, f"card {number} lacks {part}"
        assert "{cite:p}`" in answer[answer.index("**Sources.**") :], number


def test_every_follow_up_has_its_answer_and_every_number_its_doctest() -> None:
    for number, body in cards().items():
        if number in FOLLOW_UP_PENDING:
            continue
        assert dropdown(body, "Follow-up answer").strip(), f"card {number}"
        check = dropdown(body, "Check the numbers")
        assert "*For the follow-up:*" in check, f"card {number}'s follow-up computes nothing"
        follow = check[check.index("*For the follow-up:*") :]
        assert "```{doctest}" in follow, number
        outside = body.replace(check, "")
        assert "```{doctest}" not in outside, f"card {number}: a doctest outside Check the numbers"


def test_checklist_lists_every_card() -> None:
    text = PAGE.read_text(encoding="utf-8")
    checklist = text[text.index("## Review checklist") : text.index("## Sources")]
    items = [int(n) for n in re.findall(r"^(\d+)\. ", checklist, re.M)]
    assert items == list(cards())
    linked = [int(n) for n in re.findall(r"<card-(\d+)>`\)$", checklist, re.M)]
    assert linked == items


def test_question_map_names_every_card() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## Question map") : text.index("## Cards")]
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]
    named = {int(n) for row in rows for n in re.findall(r"<card-(\d+)>", row.split("|")[2])}
    assert named == set(cards())


def test_every_card_has_a_label_the_map_links() -> None:
    text = PAGE.read_text(encoding="utf-8")
    pairs = re.findall(r"^\(card-(\d+)\)=\n### (\d+)\. ", text, re.M)
    assert [(int(a), int(b)) for a, b in pairs] == [(n, n) for n in cards()]


NUMBER_WORDS = {
    17: "seventeen",
    18: "eighteen",
    19: "nineteen",
    20: "twenty",
    21: "twenty-one",
    22: "twenty-two",
    23: "twenty-three",
    24: "twenty-four",
    25: "twenty-five",
    26: "twenty-six",
    27: "twenty-seven",
}


def test_pages_that_count_the_cards_count_them_right() -> None:
    count = len(cards())
    for page in ("handbook/09-interview-scenarios.md", "interview/practice.md"):
        text = (PAGE.parents[1] / page).read_text(encoding="utf-8").lower()
        for n, word in NUMBER_WORDS.items():
            if re.search(rf"\b{word} (questions|cards)\b", text):
                assert n == count, f"{page} says {word} questions; there are {count}"
