"""The in-page runtime's Python side, run here with CPython: the runner the browser's
Pyodide loads, the exercise checks the lab pages declare, the wheel and the notebooks.

`tests/browser/test_runtime.py` drives the same code in Chromium; these tests pin
what it computes without a browser.
"""

from __future__ import annotations

import doctest
import hashlib
import importlib.util
import io
import json
import re
import sys
import zipfile
from base64 import urlsafe_b64encode
from contextlib import redirect_stdout, suppress
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest

from infralens.cli import main

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
LABS = sorted((ROOT / "handbook" / "labs").glob("lab-*.md"))
CHECK = re.compile(r"^```\{exercise-check\}\n(.*?)^```\n", re.M | re.S)
FENCE = re.compile(r"^([ \t]*)```\{doctest\}[^\n]*\n(.*?)^\1```", re.M | re.S)


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


runner = _load("infralens_page_runner", CONF / "runtime_static" / "runner.py")
sys.path.insert(0, str(CONF))
import infralens_runtime_files as files  # noqa: E402


def test_runner_docstring_examples() -> None:
    result = doctest.testmod(runner, raise_on_error=False)
    assert result.attempted >= 4 and result.failed == 0


def test_a_block_prints_what_its_doctest_expects() -> None:
    block = (
        ">>> from infralens.collectives import bus_bandwidth_factor\n"
        ">>> bus_bandwidth_factor('all_reduce', 6)\nFraction(5, 3)\n"
        ">>> for n in (2, 4):\n...     print(n, bus_bandwidth_factor('all_gather', n))\n"
        "2 1/2\n4 3/4\n"
    )
    out = json.loads(runner.run_block(block, "", "page-a", []))
    want = "".join(ex.want for ex in doctest.DocTestParser().get_examples(block))
    assert out == {"output": want, "ok": True}


def test_an_edited_block_without_prompts_runs_as_the_prompt_would() -> None:
    out = json.loads(runner.run_block("x = 6\nx * 7\nprint('done')", "", "page-b", []))
    assert out["output"] == "42\ndone\n"


def test_an_exception_prints_as_python_prints_it() -> None:
    out = json.loads(runner.run_block(">>> 1 / 0\n", "", "page-c", []))
    assert not out["ok"]
    assert out["output"] == (
        "Traceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        "ZeroDivisionError: division by zero\n"
    )


def test_a_docstring_block_sees_its_module_and_a_page_block_its_earlier_blocks() -> None:
    out = json.loads(runner.run_block(">>> rank_report.__name__\n", "infralens.cli.main", "p", []))
    assert out["output"] == "'rank_report'\n"
    out = json.loads(runner.run_block(">>> y + 1\n", "", "page-d", [">>> y = 41\n"]))
    assert out["output"] == "42\n"


def _cli(argv: list[str]) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_the_planner_prints_the_commands_table_and_memory(tmp_path: Path) -> None:
    args = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
            "--seq-len", "8192", "--global-batch", "64"]  # fmt: skip
    got = json.loads(runner.plan_job(args))
    plan = tmp_path / "plan.yaml"
    printed = _cli(["rank", *args, "--write-plan", "1", str(plan)])
    assert got["table"] == printed.split("\nwrote row")[0]
    assert got["plan"] == plan.read_text(encoding="utf-8")
    details = json.loads(runner.plan_details("llama3-8b", "h100-sxm5-80gb"))
    assert details["memory"] == _cli(["memory", "--model", "llama3-8b", "--plan", str(plan)])
    worksheet = _cli(["plan", str(plan), "--format", "markdown"])
    assert details["worksheet"] == worksheet and "Worksheet" in worksheet


def test_the_planner_shows_the_commands_one_line_error() -> None:
    bad = ["--model", "llama3-70b", "--gpus", "60", "--seq-len", "4096", "--global-batch", "8"]
    got = json.loads(runner.plan_job(bad))
    assert got == {
        "error": "infralens rank: gpus must be a multiple of the 8 GPUs of a DGX H100 node, got 60"
    }


def _checks(page: Path) -> list[tuple[dict[str, str], int]]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in CHECK.finditer(text):
        opts = dict(
            re.match(r":([a-z]+): (.*)", line).groups()  # type: ignore[union-attr]
            for line in match[1].splitlines()
        )
        found.append((opts, match.end()))
    return found


@pytest.mark.parametrize("page", LABS, ids=lambda p: p.stem[:6])
def test_every_lab_declares_a_checked_exercise(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    checks = _checks(page)
    assert checks, f"{page.name} has no exercise-check"
    for opts, end in checks:
        before = text[: text.index("```{exercise-check}", end - len(opts["expect"]) - 600)]
        question = before.rstrip().split("\n\n")[-1]
        number = re.match(r"\*\*Exercise (\d+):", question)
        assert number, f"an exercise-check follows an exercise's paragraph: {question[:60]}"
        after = text[end:].lstrip("\n")
        assert after.startswith(f":::{{dropdown}} Answer to exercise {number[1]}\n"
                                ":class-container: answer"), after[:80]  # fmt: skip


@pytest.mark.parametrize("page", LABS, ids=lambda p: p.stem[:6])
def test_each_check_accepts_the_packages_answer_and_refuses_another(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page's blocks run in order in one namespace, as Sphinx's doctest runs them,
    # up to the end of the worked answer; then :expect: gives the answer.
    monkeypatch.chdir(ROOT)
    text = page.read_text(encoding="utf-8")
    for opts, end in _checks(page):
        dropdown_end = text.index("\n:::\n", end)
        namespace: dict[str, object] = {"Fraction": Fraction}
        for block in FENCE.finditer(text[:dropdown_end]):
            body = "\n".join(line[len(block[1]) :] for line in block[2].splitlines())
            for ex in doctest.DocTestParser().get_examples(body):
                with suppress(Exception):  # an example that shows an error
                    exec(compile(ex.source, "<doctest>", "single"), namespace)
        with redirect_stdout(io.StringIO()):
            expected = eval(opts["expect"], namespace)
        tolerance = float(opts.get("tolerance", "0.01"))
        if opts["kind"] == "choice":
            choices = [c.strip() for c in opts["choices"].split("|")]
            assert str(expected) in choices
            wrong = next(c for c in choices if c != str(expected))
            assert runner.check_answer(str(expected), expected, "choice", 0)[0]
            assert not runner.check_answer(wrong, expected, "choice", 0)[0]
        else:
            assert isinstance(expected, int | float | Fraction) and not isinstance(expected, bool)
            shown = f"{float(expected):.4g}"
            assert runner.check_answer(shown, expected, "number", tolerance) == (True, "right")
            off = float(expected) * 1.5 + 1
            assert runner.check_answer(str(off), expected, "number", tolerance)[0] is False


def test_the_wheel_is_reproducible_and_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:  # fmt: skip
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    one = files.write_wheel(tmp_path / "a").read_bytes()
    two = files.write_wheel(tmp_path / "b").read_bytes()
    assert one == two
    with zipfile.ZipFile(tmp_path / "a" / files.wheel_name()) as wheel:
        names = set(wheel.namelist())
        modules = {f"infralens/{p.name}" for p in (ROOT / "labs_src" / "infralens").glob("*.py")}
        assert modules <= names
        record = wheel.read(f"infralens-{files.version()}.dist-info/RECORD").decode()
        for line in record.splitlines()[:-1]:
            name, digest, size = line.split(",")
            data = wheel.read(name)
            sha = urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={sha}" and int(size) == len(data)
    with zipfile.ZipFile(files.write_page_files(tmp_path)) as page_files:
        assert "tests/data/nccl_tests.csv" in page_files.namelist()
        assert "labs_src/starters/parallelism_plan.yaml" in page_files.namelist()


def test_pyyaml_ships_as_pure_python(tmp_path: Path) -> None:
    # The plan files `plan` and `memory` read need PyYAML; the page gets its .py files.
    pytest.importorskip("yaml")
    made = files.write_pyyaml(tmp_path)
    assert made is not None
    with zipfile.ZipFile(made) as archive:
        names = archive.namelist()
    assert "yaml/__init__.py" in names and "yaml/LICENSE" in names
    assert not [n for n in names if not n.endswith((".py", "LICENSE"))]


def test_each_lab_notebook_holds_its_examples() -> None:
    for page in LABS:
        book = json.loads(files.notebook(page))
        assert book["nbformat"] == 4
        code = "\n".join("".join(c["source"]) for c in book["cells"] if c["cell_type"] == "code")
        assert ">>>" not in code
        sources = [
            ex.source.rstrip("\n")
            for block in FENCE.finditer(page.read_text(encoding="utf-8"))
            for ex in doctest.DocTestParser().get_examples(
                "\n".join(line[len(block[1]) :] for line in block[2].splitlines())
            )
        ]
        assert sources and code.endswith(sources[-1]), page.name
        at = 0
        for source in sources:  # every example, in page order
            at = code.index(source, at) + len(source)


def test_a_shown_piece_runs_its_objects_examples() -> None:
    dotted = "infralens.ddp.DataParallelStep.global_batch_size"
    text = json.loads(runner.examples_of(dotted))["text"]
    examples = doctest.DocTestParser().get_examples(text)
    assert examples and "DataParallelStep(" in examples[0].source
    out = json.loads(runner.run_block(text, dotted, "p", []))
    assert out == {"output": "".join(ex.want for ex in examples), "ok": True}
