"""Time the runtime-agreement suite before and after pooled process groups.

Run with the tests environment's Python (it needs torch==2.13.0):

    nox -s tests -- tests/test_validate.py   # once, to create the environment
    .nox/tests/bin/python benchmarks/test_suite_time.py [--before main] [--after-only]

"Before" is the tree at ``--before`` (extracted with ``git archive`` into a
temporary folder), where every distinct rank function spawned a fresh gloo
group; "after" is the working tree, where tests/runtime/harness.py keeps one
pooled group per world size for the session. Each runs ``pytest tests/runtime``
and prints its wall time, its pass count and the machine's load average (the
2-core machines it runs on are shared). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_suite(tree: Path) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'labs_src'}")
    env["INFRALENS_REQUIRE_TORCH"] = "1"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/runtime"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    return seconds, lines[-1] if lines else f"exit {done.returncode}"


def report(label: str, seconds: float, summary: str) -> None:
    load = "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    print(f"{label:<28} {seconds:6.1f} s   {summary}   ({load}, {os.cpu_count()} CPUs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git ref of the 'before' tree")
    parser.add_argument("--after-only", action="store_true", help="time the working tree only")
    args = parser.parse_args()
    if not args.after_only:
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(
                ["git", "archive", args.before], cwd=ROOT, check=True, capture_output=True
            )
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            report(f"before ({args.before})", *run_suite(Path(tmp)))
    report("after (working tree)", *run_suite(ROOT))


if __name__ == "__main__":
    main()
