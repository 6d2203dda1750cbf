"""The CLI under attack: every bad input is one line on stderr, exit 2,
within a second of work and 100 MB, never a traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOOD = "world_size: 8\nnode_shape: 1_node_x_8_gpus\nparallelism: {tp_size: 8}\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)


def _limit_memory() -> None:
    # The interpreter and its imports map about 40 MB; 100 MB more is the bound.
    resource.setrlimit(resource.RLIMIT_AS, (140 * 2**20, 140 * 2**20))


def run(*args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "labs_src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "infralens", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=20,
        preexec_fn=_limit_memory,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done, cpu


def assert_one_line(done: subprocess.CompletedProcess[str], cpu: float, expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr[-500:]
    assert "Traceback" not in done.stderr
    # CPU seconds beyond the interpreter's start and imports (about 0.3 s here)
    assert cpu < 2.0, cpu


def plan(tmp_path: Path, text: str | bytes, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("trainig: {layers: 2}\n" + GOOD, "unknown key 'trainig'; did you mean 'training'?"),
        (
            "world_size: 1000000000000\nnode_shape: 125000000000_nodes_x_8_gpus\n"
            "parallelism: {tp_size: 8, dp_size: 125000000000}\n",
            "at most 32768",
        ),
        (
            "world_size: 64\nnode_shape: 1000000_nodes_x_8_gpus\nparallelism: {tp_size: 8}\n",
            "node_shape gives 8000000 GPUs",
        ),
        (GOOD + "cluster: " + "x" * 10_000 + "\n", "preset must be one of"),
        (GOOD.replace("8\n", "8.5\n", 1), "world_size must be an int, got float"),
    ],
)
def test_bad_plan_files(tmp_path: Path, text: str, expected: str) -> None:
    assert_one_line(*run("plan", str(plan(tmp_path, text))), expected)


@pytest.mark.parametrize("key", ["node_shape", "cluster", "order"])
def test_alias_bombs_are_refused_quickly(tmp_path: Path, key: str) -> None:
    target = {
        "node_shape": GOOD.replace("node_shape: 1_node_x_8_gpus", "node_shape: *j"),
        "cluster": GOOD + "cluster: *j\n",
        "order": GOOD.replace("{tp_size: 8}", "{tp_size: 8, order: *j}"),
    }[key]
    assert_one_line(*run("plan", str(plan(tmp_path, BOMB + target))), "YAML alias at line 2")


def test_big_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = plan(tmp_path, "world_size: [" + "1, " * 20_000_000 + "1]\n")
    assert_one_line(*run("plan", str(path)), "is larger than 1048576 bytes")


def test_non_utf8_names_the_file(tmp_path: Path) -> None:
    path = plan(tmp_path, b"world_size: \xff\xfe\n", name="latin.yaml")
    assert_one_line(*run("plan", str(path)), "latin.yaml' is not UTF-8")


def test_directory_and_missing_file(tmp_path: Path) -> None:
    assert_one_line(*run("plan", str(tmp_path)), "Is a directory")
    assert_one_line(*run("plan", str(tmp_path / "none.yaml")), "no such plan file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path: Path) -> None:
    path = plan(tmp_path, GOOD)
    path.chmod(0)
    assert_one_line(*run("plan", str(path)), "Permission denied")


def test_name_too_long(tmp_path: Path) -> None:
    assert_one_line(*run("plan", str(tmp_path / ("p" * 300 + ".yaml"))), "File name too long")


def test_memory_command_reads_plans_the_same_way(tmp_path: Path) -> None:
    path = plan(tmp_path, "trainig: {}\n" + GOOD)
    done, cpu = run("memory", "--model", "llama3-70b", "--plan", str(path))
    assert_one_line(done, cpu, "did you mean 'training'?")


def test_rank_command_rejects_nonpositive_gpus() -> None:
    done, cpu = run(
        "rank",
        "--model",
        "llama3-70b",
        "--gpus",
        "-8",
        "--seq-len",
        "4096",
        "--global-batch",
        "512",
    )
    assert_one_line(done, cpu, "gpus must be >= 1")


def test_closed_stdout_exits_quietly() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "labs_src")}
    starter = ROOT / "labs_src" / "starters" / "parallelism_plan.yaml"
    done = subprocess.run(
        f"'{sys.executable}' -m infralens plan '{starter}' --format json | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.stdout.strip() == "{" and done.stderr == "", done.stderr


# --- Inputs that used to hang the CLI, blow up the parser or print a traceback. ---


@pytest.mark.parametrize("command", ["plan", "memory"])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)  # nothing ever writes to it: opening it for reading would block
    args = (
        ("plan", str(fifo))
        if command == "plan"
        else ("memory", "--model", "llama3-8b", "--plan", str(fifo))
    )
    assert_one_line(*run(*args), "not a regular file")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # YAML 1.1 reads 1:0:0:... as a base-60 integer; its digits cost seconds of CPU.
        (GOOD.replace("8\n", ":".join(["1"] + ["0"] * 400) + "\n", 1), "world_size must be an int"),
        (GOOD.replace("8\n", "2001-12-14\n", 1), "world_size must be an int, got str"),
        (GOOD.replace("8\n", "9" * 5000 + "\n", 1), "world_size must be an int"),
        ("world_size: [" + "1, " * 200_000 + "1]\n" + GOOD, "flow items; a plan holds at most"),
        ("world_size: " + "[" * 3000 + "]" * 3000 + "\n" + GOOD, "flow brackets"),
        ("".join(f"k{i}: 1\n" for i in range(60_000)), "a plan holds at most"),
        (GOOD + "training:\n" + "".join("  " * (i + 1) + "a:\n" for i in range(30)), "nests more"),
        (
            GOOD + "training: {num_params: 6738415616, layers: 32, hidden: 4096, heads: 32, "
            "seq_len: 4096, micro_batch_size: 1, global_batch_size: 8, sequence_parallel: 'no'}\n",
            "sequence_parallel must be a bool, got str",
        ),
        (
            GOOD + "training: {num_params: 1, layers: 80, hidden: 8192, heads: 64, "
            "seq_len: 4096, micro_batch_size: 1, global_batch_size: 8}\n",
            "num_params must match the shape",
        ),
    ],
    ids=[
        "base-60",
        "date",
        "5000-digits",
        "flow-list",
        "deep-flow",
        "many-keys",
        "deep-block",
        "string-flag",
        "contradicting-count",
    ],
)
def test_plan_files_that_cost_the_parser_are_refused(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert_one_line(*run("plan", str(plan(tmp_path, text))), expected)


def test_the_training_section_is_checked_before_the_rank_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from infralens.plan import ParallelPlan
    from infralens.planner.plan_file import _report, parse_plan

    text = {
        "world_size": 8192,
        "node_shape": "1024_nodes_x_8_gpus",
        "parallelism": {"tp_size": 8, "dp_size": 1024},
        "training": {
            "num_params": 6738415616,
            "layers": 32,
            "hidden": 4096,
            "heads": 32,
            "seq_len": 4096,
            "micro_batch_size": 1,
            "global_batch_size": 8,
        },
    }
    parsed = parse_plan(text)
    listed: list[int] = []
    original = ParallelPlan.coords

    def counting(self: ParallelPlan, rank: int) -> dict[str, int]:
        listed.append(rank)
        return original(self, rank)

    monkeypatch.setattr(ParallelPlan, "coords", counting)
    with pytest.raises(ValueError, match="global_batch_size must divide"):
        _report(*parsed)
    assert listed == []  # refused before a single rank of the grid was placed


def test_a_full_stdout_is_one_line_not_a_traceback() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "labs_src")}
    starter = ROOT / "labs_src" / "starters" / "parallelism_plan.yaml"
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "infralens", "plan", str(starter)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
        )
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr[-500:]
    assert "No space left on device" in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("rank", "--model", "llama3-8b"), "the following arguments are required"),
        (
            (
                "rank",
                "--model",
                "llama3-8b",
                "--gpus",
                "x",
                "--seq-len",
                "1",
                "--global-batch",
                "1",
            ),
            "invalid int value",
        ),
        (("plan",), "the following arguments are required: path"),
        (("launch",), "invalid choice"),
        (
            (
                "rank",
                "--model",
                "llama2-7b",
                "--gpus",
                "32",
                "--seq-len",
                "4096",
                "--global-batch",
                "1" + "0" * 400,
            ),
            "global_batch must be within",
        ),
        (
            (
                "rank",
                "--model",
                "llama3-70b",
                "--gpus",
                "131072",
                "--seq-len",
                "4096",
                "--global-batch",
                "524288",
            ),
            "too large to finish in time",
        ),
    ],
    ids=["missing", "not-an-int", "no-path", "unknown-command", "400-zeros", "huge-search"],
)
def test_usage_errors_and_huge_numbers_are_one_line(args: tuple[str, ...], expected: str) -> None:
    assert_one_line(*run(*args), expected)
