"""Plan files as YAML a plan needs and no more: the bounds checked before PyYAML parses.

A plan is a few dozen keys, so :func:`check_size` refuses text whose lines, keys or
flow items would make the parser's work grow past that, and :func:`plan_loader` builds a
``SafeLoader`` without aliases, nested at most :data:`MAX_PLAN_DEPTH` deep, that turns
only decimal integers, decimal floats, booleans and null into values (base-60 numbers
and dates stay strings). :func:`infralens.planner.plan_file.load_plan_file` uses both.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

__all__ = ["MAX_PLAN_DEPTH", "MAX_PLAN_ITEMS", "check_size", "plan_loader"]

MAX_PLAN_ITEMS = 2000
"""Most lines, flow items or keys a plan file may hold (a plan is a few dozen): the YAML
parser's work grows with them, so they are counted before it runs."""

MAX_PLAN_DEPTH = 8
"""Deepest nesting of mappings and lists a plan file may have (it needs three)."""


def check_size(text: str, shown: str) -> None:
    """Refuse a plan file whose structure would cost the parser more than a plan can need."""
    counts = {
        "lines": text.count("\n"),
        "flow items": text.count(","),
        "keys": text.count(":"),
        "flow brackets": text.count("[") + text.count("{"),
    }
    for what, n in counts.items():
        if n > MAX_PLAN_ITEMS:
            raise ValueError(
                f"plan file {shown} has {n} {what}; a plan holds at most {MAX_PLAN_ITEMS}"
            )


def plan_loader(yaml: Any, shown: str) -> Any:
    """A SafeLoader for plan files: no aliases, depth at most MAX_PLAN_DEPTH, and only the
    implicit types a plan uses (decimal ints of up to 19 digits, decimal floats, true and
    false, null); base-60 numbers, dates and the rest stay strings."""

    class _PlanLoader(yaml.SafeLoader):  # type: ignore[misc]
        yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, Any]]]] = {}
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise ValueError(
                    f"plan file {shown} uses a YAML alias at line {mark.line + 1}; "
                    "write the value out"
                )
            self.depth += 1
            if self.depth > MAX_PLAN_DEPTH:
                mark = self.peek_event().start_mark
                raise ValueError(
                    f"plan file {shown} nests more than {MAX_PLAN_DEPTH} levels "
                    f"at line {mark.line + 1}"
                )
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    implicit = [
        ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        (
            "tag:yaml.org,2002:bool",
            r"^(?:true|True|TRUE|false|False|FALSE)$",
            "tTfF",
        ),
        ("tag:yaml.org,2002:int", r"^[-+]?[0-9]{1,19}$", "-+0123456789"),
        (
            "tag:yaml.org,2002:float",
            r"^[-+]?[0-9]{1,19}\.[0-9]{0,19}$",
            "-+0123456789",
        ),
    ]
    for tag, pattern, first in implicit:
        _PlanLoader.add_implicit_resolver(tag, re.compile(pattern), list(first))
    return _PlanLoader
