"""infralens.interview: worked scenarios are valid and about a minute; vague parts are rejected."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infralens.interview import (
    PARTS,
    Scenario,
    ddp_stops_scaling_across_nodes,
    job_hangs_at_scale,
    long_context_out_of_memory,
    one_slow_link,
    seventy_b_on_64_gpus,
    speaking_seconds,
    spoken_answer,
)

WORKED = [
    seventy_b_on_64_gpus,
    ddp_stops_scaling_across_nodes,
    long_context_out_of_memory,
    job_hangs_at_scale,
    one_slow_link,
]


@pytest.mark.parametrize("build", WORKED)
def test_worked_scenarios_take_about_a_minute(build: object) -> None:
    scenario = build()  # type: ignore[operator]
    answer = spoken_answer(scenario)
    assert 45 <= speaking_seconds(answer) <= 70
    for part in PARTS:  # the answer says every part, in order
        assert getattr(scenario, part).rstrip(".") in answer


def test_the_ddp_scenario_quotes_the_nccl_model() -> None:
    from dataclasses import replace

    from infralens.nccl import predict
    from infralens.topology import Cluster

    two = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    one_nic = Cluster(2, 8, replace(two.system, nics_per_node=1))
    ms = [
        round(predict("all_reduce", 2 * 10**9, c, r).seconds * 1000)
        for c, r in ((two, None), (two, range(8)), (one_nic, None))
    ]
    text = ddp_stops_scaling_across_nodes().communication
    assert f"all-reduce takes about {ms[0]} ms, close to the {ms[1]} ms inside one node" in text
    assert f"it takes about {ms[2]} ms when NCCL can use only one adapter" in text
    assert ms[2] > 4 * ms[0]  # one adapter per node: the jump the problem describes


@pytest.mark.parametrize(
    ("part", "text", "message"),
    [
        ("problem", "", "problem must not be empty"),
        ("tradeoff", "it depends", "tradeoff is too vague"),
        ("mechanism", "we use a very large number of GPUs for this job", "sharded, split"),
        (
            "communication",
            "an all-reduce of the gradient every single step here",
            "link it crosses",
        ),
        ("measurement", "we would look at it carefully and see what happens then", "name a signal"),
    ],
)
def test_vague_parts_are_rejected(part: str, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(seventy_b_on_64_gpus(), **{part: text})


def test_speaking_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="words_per_minute must be >= 1"):
        speaking_seconds("a b", 0)


def test_scenario_is_frozen() -> None:
    s = seventy_b_on_64_gpus()
    assert isinstance(s, Scenario)
    with pytest.raises(AttributeError):
        s.problem = "x"  # type: ignore[misc]


def test_the_hang_scenario_names_the_culprit_not_the_reporters() -> None:
    s = job_hangs_at_scale()
    assert "here rank 2" in s.mechanism  # the rank at the minimum sequence number
    assert "sequence 1203457" in s.communication and "stopped at 1203456" in s.communication
    # 466 interruptions in 54 days (Llama 3, section 3.3.4) is one every 54 * 24 / 466 hours
    assert f"every {54 * 24 / 466:.1f} hours" in s.problem


def test_the_slow_link_scenario_blames_one_group_not_one_rank() -> None:
    s = one_slow_link()
    assert "ranks 0 to 7 of 64" in s.problem
    assert "no single GPU is slow" in s.mechanism
