"""A lab reads as an annotated code reading: piece, note, piece, note.

Each package block is a short piece included by name (markers or ``:pyobject:``),
captioned with its file, no wider than the code column, and followed at once by
the note that explains it; notes name the code rather than its line numbers. Each
lab ends with exercises whose worked answers are hidden and proved by a doctest,
and every command it prints runs as printed after the setup page's install.
These tests read the page sources; ``conf/infralens_labcode.py`` applies the
line-number and caption rules to the build as well, through the same function.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infralens.labs import LABS
from tests.test_lab_pages import Directive, directives, included_code

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
sys.path.insert(0, str(ROOT / "conf"))

from infralens_labcode import MAX_WIDTH, page_problems, prose_without_code  # noqa: E402

MAX_PIECE_LINES = 20  # "about 3-15 lines"; a docstring-free dataclass may run a little over
MIN_NOTE_WORDS = 12
SPEAKING_RATE = 150  # words a minute, as infralens.interview.speaking_seconds counts
SPOKEN_SECONDS = (45, 70)
FENCE = re.compile(r"^(`{3,}|:{3,})\{([a-z-]+)\}")


@pytest.fixture(params=LABS, ids=lambda item: item.label)
def lab_page(request: pytest.FixtureRequest) -> Path:
    return HANDBOOK / f"{request.param.page}.md"


def package_blocks(text: str) -> list[Directive]:
    return [
        d
        for d in directives(text)
        if d.name == "literalinclude" and "labs_src/infralens/" in d.argument
    ]


def shown_lines(directive: Directive, page: Path) -> list[str]:
    """The lines a package block shows, after its ``:dedent:``."""
    _, lines = included_code(directive, page)
    if "dedent" in directive.options:
        amount = directive.options["dedent"].strip()
        if amount:
            lines = [line[int(amount) :] for line in lines]
        else:
            lines = textwrap.dedent("\n".join(lines)).splitlines()
    return lines


def top_level_chunks(text: str) -> list[tuple[str, str]]:
    """The page as ("block", name) for each top-level directive and ("prose", text) runs."""
    chunks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    prose: list[str] = []
    while i < len(lines):
        match = FENCE.match(lines[i].strip())
        if not match:
            prose.append(lines[i])
            i += 1
            continue
        if "".join(prose).strip():
            chunks.append(("prose", "\n".join(prose)))
        prose = []
        fence = match[1]
        argument = lines[i].strip()[len(match[0]) :].strip()
        name = f"{match[2]} {argument}".strip()
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            i += 1
        chunks.append(("block", name))
        i += 1
    if "".join(prose).strip():
        chunks.append(("prose", "\n".join(prose)))
    return chunks


def words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", text))


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_build_rules_hold(lab_page: Path) -> None:
    # No note cites a line number; every package block names its file; none
    # highlights or selects lines by number (conf/infralens_labcode.py).
    problems = page_problems(lab_page.read_text(encoding="utf-8"))
    assert not problems, f"{lab_page.name}: {problems}"


def test_every_shown_line_fits_the_code_column(lab_page: Path) -> None:
    for directive in package_blocks(lab_page.read_text(encoding="utf-8")):
        for line in shown_lines(directive, lab_page):
            assert len(line) <= MAX_WIDTH, (
                f"{lab_page.name}: {directive.options.get('caption')} shows a "
                f"{len(line)}-character line: {line.strip()[:50]}"
            )


def test_every_piece_is_short(lab_page: Path) -> None:
    for directive in package_blocks(lab_page.read_text(encoding="utf-8")):
        lines = shown_lines(directive, lab_page)
        assert len(lines) <= MAX_PIECE_LINES, (
            f"{lab_page.name}: a {len(lines)}-line piece "
            f"({directive.options.get('start-after') or directive.options.get('pyobject')})"
        )


def test_every_package_block_is_followed_at_once_by_its_note(lab_page: Path) -> None:
    chunks = top_level_chunks(lab_page.read_text(encoding="utf-8"))
    for i, (kind, name) in enumerate(chunks):
        if kind != "block" or not name.startswith("literalinclude") or "infralens/" not in name:
            continue
        after = chunks[i + 1] if i + 1 < len(chunks) else ("end", "")
        assert after[0] == "prose", f"{lab_page.name}: {name} is followed by {after[1]}"
        note = re.sub(r"^#+ .*$", "", after[1], flags=re.M)
        assert words(note) >= MIN_NOTE_WORDS, (
            f"{lab_page.name}: the note under {name} has {words(note)} words"
        )


def test_every_lab_has_exercises_with_hidden_proved_answers(lab_page: Path) -> None:
    text = lab_page.read_text(encoding="utf-8")
    assert "\n## Exercises\n" in text, f"{lab_page.name} has no Exercises section"
    assert text.index("\n## Interview explanation\n") < text.index("\n## Exercises\n")
    assert text.index("\n## Exercises\n") < text.index("\n## Run it (optional)\n")
    exercises = section(text, "Exercises")
    answers = [
        d
        for d in directives(exercises)
        if d.name == "dropdown" and "answer" in d.options.get("class-container", "")
    ]
    assert len(answers) >= 2, f"{lab_page.name}: {len(answers)} hidden answers"
    for answer in answers:
        assert "open" not in answer.options, f"{lab_page.name}: an answer opens by itself"
        assert ">>>" in answer.body, f"{lab_page.name}: '{answer.argument}' proves nothing"
    questions = re.findall(r"^\*\*Exercise \d+", exercises, re.M)
    assert len(questions) == len(answers), f"{lab_page.name}: {questions} against answers"


def test_the_spoken_explanation_fits_its_time(lab_page: Path) -> None:
    text = lab_page.read_text(encoding="utf-8")
    spoken = prose_without_code(section(text, "Interview explanation"))
    quoted = " ".join(re.findall(r"[\"“](.+?)[\"”]", spoken, re.S))
    seconds = 60 * words(quoted) / SPEAKING_RATE
    low, high = SPOKEN_SECONDS
    assert low <= seconds <= high, f"{lab_page.name}: {seconds:.0f} s spoken"


def test_run_it_links_the_setup_page(lab_page: Path) -> None:
    run_it = section(lab_page.read_text(encoding="utf-8"), "Run it (optional)")
    assert "{ref}`setup`" in run_it or "<setup>`" in run_it, lab_page.name


def printed_commands(page: Path) -> list[str]:
    """The ``$ `` commands of a page's console blocks, continuation lines joined."""
    found = []
    text = page.read_text(encoding="utf-8")
    for block in re.findall(r"^```console\n(.*?)^```", text, re.M | re.S):
        command = ""
        for line in block.splitlines():
            if line.startswith("$ "):
                command = line[2:]
            elif command:
                command += " " + line.strip()
            else:
                continue
            if command.endswith("\\"):
                command = command[:-1].rstrip()
                continue
            found.append(command)
            command = ""
    return found


COMMANDS = [
    pytest.param(page, command, id=f"{page.stem[:6]}:{command[:60]}")
    for page in sorted((HANDBOOK / "labs").glob("lab-*.md"))
    for command in printed_commands(page)
]


def test_every_lab_prints_a_command() -> None:
    pages = {p.values[0].stem for p in COMMANDS}
    assert pages == {Path(item.page).name for item in LABS}


@pytest.mark.runtime
@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_a_printed_command_runs_as_printed(page: Path, command: str, tmp_path: Path) -> None:
    # After the setup page's install (this suite's environment has the package
    # and PyYAML, and torch for the demos), from the repository's top folder.
    argv = shlex.split(command)
    if "torchrun" in argv[:3]:
        pytest.importorskip("torch")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    if shutil.which("python", path=bin_dir) is None:  # a bare interpreter: give it the name
        (tmp_path / "python").symlink_to(sys.executable)
        env["PATH"] = f"{tmp_path}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{page.name}: {command}\n{result.stderr[-2000:]}"
