"""`schema._conforms`, the fast check in front of `conform_entry` (issue 14), must never say
"conforms" for an entry the rule-by-rule path would change: random mutations of real entries
(every field the rules read set to values of every JSON type, in range and out of it) are
checked against the rule-by-rule path run on its own."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

from ds4sessions.agents.pi import schema

VALUES: list[Any] = [
    None, True, False, 0, -1, 7, 2**53, 2**53 + 1, -(2**53) - 1, 1.5, -0.0, 8.64e15, 8.64e15 + 2, 1e300,
    float("inf"), float("nan"), "", "text", [], ["a"], ["a", 1], {}, {"a": 1}, [{"type": "text", "text": "x"}],
]
KEYS = sorted(
    set(schema._ENTRY_CHECKS) | set(schema._MESSAGE_CHECKS) | set(schema._BLOCK_CHECKED)
    | set(schema._USAGE_FIELDS) | {"cost", "readFiles", "modifiedFiles", "details", "total", "unrelated"}
)


def _slow(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`conform_entry` without its fast check."""
    original = schema._conforms
    schema._conforms = lambda _obj: False  # type: ignore[assignment]
    try:
        return schema.conform_entry(obj)
    finally:
        schema._conforms = original  # type: ignore[assignment]


def _containers(value: Any) -> list[Any]:
    found = []
    if isinstance(value, dict):
        found.append(value)
        for member in value.values():
            found += _containers(member)
    elif isinstance(value, list):
        for member in value:
            found += _containers(member)
    return found


def test_fast_check_never_passes_an_entry_the_rules_would_change(sample01: Path) -> None:
    entries = [json.loads(line) for line in sample01.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    rng = random.Random(14)
    checked = passed = 0
    for _ in range(6000):
        obj = copy.deepcopy(rng.choice(entries))
        for _ in range(rng.randint(1, 3)):
            target = rng.choice(_containers(obj))
            target[rng.choice(KEYS)] = copy.deepcopy(rng.choice(VALUES))
        fast = schema._conforms(obj)
        out, fixes = _slow(obj)
        checked += 1
        if fast:
            passed += 1
            assert fixes == [] and out is obj, (obj, fixes)
        assert schema.conform_entry(obj)[1] == fixes  # the fast check never changes the outcome
    assert passed > 500 and checked - passed > 500  # both outcomes were exercised


def test_fast_check_passes_every_real_entry(sample01: Path) -> None:
    for line in sample01.read_text(encoding="utf-8").splitlines()[1:]:
        if line.strip():
            obj = json.loads(line)
            assert schema._conforms(obj) == (_slow(obj)[1] == [])
