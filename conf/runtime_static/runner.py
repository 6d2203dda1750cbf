"""Run a page's examples the way the Python prompt does, inside the page's Web Worker.

The worker loads this file into Pyodide after it has unpacked the package wheel
under ``labs_src/`` and the page files (``tests/data``, ``labs_src/starters``) at
their repository paths, so the examples' relative paths resolve as they do when
the doctests run from the repository root. Only ``infralens.cli`` and the text
of the examples are used, so the runtime does not depend on the planner's API.

The functions return JSON text; the worker hands it to the page unchanged.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib
import inspect
import io
import json
import sys
import traceback
from fractions import Fraction
from typing import Any

_PAGES: dict[str, dict[str, Any]] = {}


def _page_namespace(page: str) -> dict[str, Any]:
    if page not in _PAGES:
        # Sphinx's doctest_global_setup for the pages' {doctest} blocks.
        _PAGES[page] = {"__name__": "__main__", "Fraction": Fraction}
    return _PAGES[page]


def _module_namespace(dotted: str) -> dict[str, Any]:
    """A copy of the globals of the longest importable prefix of *dotted*, as pytest's
    ``--doctest-modules`` gives each docstring."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        return dict(vars(module))
    return {"__name__": "__main__"}


def _sources(text: str) -> list[str]:
    """The statements of a block: its ``>>>`` examples, or each top-level statement of
    plain code (a block whose prompts the reader deleted)."""
    if any(line.lstrip().startswith(">>>") for line in text.splitlines()):
        return [ex.source for ex in doctest.DocTestParser().get_examples(text)]
    tree = ast.parse(text)
    return [ast.get_source_segment(text, node) or "" for node in tree.body]


def _run(source: str, namespace: dict[str, Any], out: io.StringIO) -> bool:
    """Run one statement as the prompt would: an expression's value is printed, an
    exception prints its traceback without this runner's own frame."""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = compile(source, "<stdin>", "single")
            exec(code, namespace)
        except BaseException as err:  # the reader's code may raise anything
            tb = err.__traceback__
            if not isinstance(err, SyntaxError) and tb is not None:
                tb = tb.tb_next
            text = "".join(traceback.format_exception(type(err), err, tb))
            out.write(text)
            return False
    return True


def run_block(text: str, module: str, page: str, prime: list[str]) -> str:
    """Run *text* (one code block as the reader sees it); return ``{"output": ...}``.

    A docstring's block runs in a copy of its module's globals; a page's block in the
    page's one namespace, after the page's earlier blocks listed in *prime* have run
    silently, as Sphinx's doctest runs a page's blocks in order.
    """
    try:
        sources = _sources(text)
    except (SyntaxError, ValueError) as err:
        return json.dumps({"output": f"{type(err).__name__}: {err}\n", "ok": False})
    if module:
        namespace = _module_namespace(module)
    else:
        namespace = _page_namespace(page)
        for earlier in prime:
            with contextlib.suppress(SyntaxError, ValueError):
                for source in _sources(earlier):
                    _run(source, namespace, io.StringIO())
    out = io.StringIO()
    ok = True
    for source in sources:
        if not source.strip():
            continue
        ok = _run(source, namespace, out) and ok
    return json.dumps({"output": out.getvalue(), "ok": ok})


def examples_of(dotted: str) -> str:
    """The docstring examples of the object *dotted* names (``infralens.ddp.ddp_gradients``),
    as the prompt shows them; an object without examples gives its class's, then its
    module's. Returns ``{"text": ...}``."""
    parts = dotted.split(".")
    found: list[object] = []
    for end in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        found.append(obj)
        for name in parts[end:]:
            obj = getattr(obj, name, None)
            if obj is None:
                break
            found.append(obj)
        break
    for obj in reversed(found):
        doc = inspect.getdoc(obj) or ""
        examples = doctest.DocTestParser().get_examples(doc)
        if examples:
            lines = []
            for ex in examples:
                source = ex.source.rstrip("\n").splitlines()
                lines.append(">>> " + source[0])
                lines += ["... " + line for line in source[1:]]
                want = ex.want or (
                    f"Traceback (most recent call last):\n...\n{ex.exc_msg}" if ex.exc_msg else ""
                )
                lines += want.rstrip("\n").splitlines()
            return json.dumps({"text": "\n".join(lines) + "\n"})
    return json.dumps({"text": ""})


def check_answer(given: str, expected: object, kind: str, tolerance: float) -> tuple[bool, str]:
    """Compare a reader's answer with the package's value.

    A number is right within *tolerance*, relative to the expected value (an absolute
    tolerance when the expected value is 0); a choice is right when it names the
    expected choice, ignoring case and surrounding space.

    >>> check_answer("3.33", Fraction(10, 3), "number", 0.01)
    (True, 'right')
    >>> check_answer("4", Fraction(10, 3), "number", 0.01)
    (False, 'too high')
    >>> check_answer("three", 3, "number", 0.01)
    (False, "'three' is not a number")
    >>> check_answer(" Ring ", "ring", "choice", 0)
    (True, 'right')
    """
    text = given.strip().replace(",", "").replace("_", "")
    if kind == "choice":
        right = text.lower() == str(expected).strip().lower()
        return right, "right" if right else "not that one"
    try:
        value = float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        return False, f"{given.strip()!r} is not a number"
    target = float(expected)  # type: ignore[arg-type]
    allowed = tolerance * abs(target) if target else tolerance
    if abs(value - target) <= allowed:
        return True, "right"
    return False, "too high" if value > target else "too low"


def check(given: str, expect: str, kind: str, tolerance: float, page: str, prime: list[str]) -> str:
    """Evaluate *expect* in the page's namespace (after *prime*) and judge *given*."""
    namespace = _page_namespace(page)
    for earlier in prime:
        with contextlib.suppress(SyntaxError, ValueError):
            for source in _sources(earlier):
                _run(source, namespace, io.StringIO())
    try:
        expected = eval(expect, namespace)
    except Exception as err:  # a broken declaration shows as such, not as "wrong"
        return json.dumps({"ok": False, "verdict": f"the check failed: {err}"})
    right, verdict = check_answer(given, expected, kind, tolerance)
    return json.dumps({"ok": right, "verdict": verdict})


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from infralens.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as done:  # argparse's usage errors
            status = done.code if isinstance(done.code, int) else 2
    return status, out.getvalue(), err.getvalue()


PLAN_PATH = "/tmp/parallelism_plan.yaml"


def plan_job(args: list[str]) -> str:
    """``python -m infralens rank ARGS --write-plan 1 FILE``: the ranking as the command
    prints it and the first plan's file, or the command's one-line error."""
    status, out, err = _cli(["rank", *args, "--write-plan", "1", PLAN_PATH])
    if status != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        return json.dumps({"error": lines[-1] if lines else f"exit status {status}"})
    table = "\n".join(line for line in out.splitlines() if not line.startswith("wrote row"))
    with open(PLAN_PATH, encoding="utf-8") as handle:
        return json.dumps({"table": table, "plan": handle.read()})


def plan_details(model: str, gpu: str) -> str:
    """``memory --model MODEL --plan FILE --gpu GPU`` and ``plan FILE --format markdown``
    for the file :func:`plan_job` wrote last: its memory, groups, worksheet and step;
    with the two breakdowns the page draws (:func:`plan_charts`). A shape (``--model``
    with ``=``) is the file's own model, so ``memory`` reads it from the file."""
    named = [] if "=" in model else ["--model", model]
    _, memory, merr = _cli(["memory", *named, "--plan", PLAN_PATH, "--gpu", gpu])
    _, worksheet, werr = _cli(["plan", PLAN_PATH, "--format", "markdown"])
    try:
        charts = plan_charts(gpu)
    except (ValueError, TypeError) as err:
        charts = {"error": str(err)}
    return json.dumps(
        {"memory": memory or merr.strip(), "worksheet": worksheet or werr.strip(), "charts": charts}
    )


def plan_charts(gpu: str) -> dict[str, Any]:
    """Plan 1's step time by cause (``estimate(job).breakdown``, in ms: the terms
    ``plan`` prints, as it prints them) and its busiest GPU's memory by component
    (``gpu_memory(job)``, in GB, as ``memory`` prints them), for the job of the file
    :func:`plan_job` wrote last; *gpu* is the memory check's GPU."""
    from infralens.cli import job_of
    from infralens.planner.fit import HBM_BYTES, MEMORY_TERMS, gpu_memory
    from infralens.planner.step import estimate
    from infralens.planner.worksheet import STEP_TERMS

    job = job_of(None, PLAN_PATH)
    e = estimate(job)
    step = [
        {"key": key, "label": STEP_TERMS[key], "value": sec * 1e3, "text": f"{sec * 1e3:,.0f}"}
        for key, sec in e.breakdown.items()
        if sec > 0  # the terms ``plan``'s step table lists
    ]
    m = gpu_memory(job)
    memory = [
        {"key": key, "label": label, "value": getattr(m, key) / 1e9,
         "text": f"{getattr(m, key) / 1e9:.2f}"}
        for key, label in MEMORY_TERMS.items()
    ]  # fmt: skip
    capacity = HBM_BYTES.get(gpu, job.hbm_bytes) / 1e9
    return {
        "step": {"unit": "ms", "bars": step,
                 "title": f"Step time of plan 1 by cause: {e.seconds:.2f} s"},
        "memory": {"unit": "GB", "bars": memory,
                   "title": f"Memory of plan 1's busiest GPU ({m.stage} pipeline stage): "
                   f"{m.total / 1e9:.2f} GB of {capacity:.2f} GB"},
    }  # fmt: skip


def prepare(root: str) -> None:
    """Make *root* the working directory and its ``labs_src`` importable."""
    import os

    os.chdir(root)
    sys.path.insert(0, os.path.join(root, "labs_src"))
    importlib.invalidate_caches()
    sys.stdout.flush()
