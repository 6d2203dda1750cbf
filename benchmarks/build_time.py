"""Time the HTML build before and after the parallel build and the figure cache.

Run with the docs environment's Python (it needs Sphinx and the docs extras):

    nox -s docs   # once, to create the environment
    .nox/docs/bin/python benchmarks/build_time.py [--before main]

"Before" is the tree at ``--before`` (extracted with ``git archive`` into a
temporary folder), built as its noxfile did: serial, figures redrawn whenever
the output folder is new. "After" is the working tree built as ``nox -s docs``
builds it now (``-j auto``, figures from ``build/figure-cache``). For each it
reports a clean build (empty output folder; for "after" once with an empty
figure cache and once with a warm one) and a one-page incremental rebuild (the
page's file touched), then what the pages' Python runtime adds to the output and
how fast it answered in the last ``nox -s browser`` run. Prints the machine's
load average with each run, since the 2-core machines it runs on are shared. A
benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-b", "html", "-c", "conf", "-n", "-W", "--keep-going", "-q"]
PAGE = Path("handbook") / "labs" / "lab-04-fsdp.md"


def build(tree: Path, out: Path, extra: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree / "labs_src"))
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "sphinx", *FLAGS, *extra, "handbook", str(out)],
        cwd=tree,
        env=env,
        check=True,
    )
    return time.perf_counter() - start


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def report(label: str, seconds: float) -> None:
    print(f"{label:<44} {seconds:6.1f} s   ({load()}, {os.cpu_count()} CPUs)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git ref of the 'before' tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.before], cwd=ROOT, check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        out = Path(tmp) / "html-before"
        report(f"before ({args.before}): clean build, serial", build(before, out, []))
        (before / PAGE).touch()
        report(f"before ({args.before}): one page touched", build(before, out, []))

        out = Path(tmp) / "html-after"
        shutil.rmtree(ROOT / "build" / "figure-cache", ignore_errors=True)
        report("after: clean build, -j auto, empty cache", build(ROOT, out, ["-j", "auto"]))
        shutil.rmtree(out)
        report("after: clean build, -j auto, warm cache", build(ROOT, out, ["-j", "auto"]))
        (ROOT / PAGE).touch()
        report("after: one page touched, -j auto", build(ROOT, out, ["-j", "auto"]))
        (ROOT / PAGE).touch()
        report("after: one page touched, serial", build(ROOT, out, []))
    runtime()


def runtime() -> None:
    """What the pages' Python adds to the HTML output and how fast it answers, as the
    last ``nox -s browser`` measured it (build/browser-runtime.json)."""
    path = ROOT / "build" / "browser-runtime.json"
    if not path.exists():
        print("no build/browser-runtime.json: run nox -s browser first")
        return
    r = json.loads(path.read_text(encoding="utf-8"))
    print(f"runtime: {r['bytes_added'] / 1e6:.1f} MB added to the HTML output")
    for key in ("first_output_s", "second_run_s"):
        if r.get(key):
            print(f"runtime: {key} median {r[key]['median']:.2f} s, "
                  f"max {r[key]['max']:.2f} s over {r[key]['runs']} pages")  # fmt: skip
    for job in r.get("planner_s") or []:
        print(f"runtime: planner {job}")
    print(f"runtime: measured at load {r['load_average']} on {r['cpus']} CPUs")


if __name__ == "__main__":
    main()
