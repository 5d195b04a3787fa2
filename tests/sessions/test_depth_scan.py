"""The depth bound's C scan (`_cprep.bytes_depth`, issue 14: the first read of 99-large 183 →
~150 ms) equals the Python measure on the bytes (`limits._bytes_depth`) on every line of the
real sessions and bad inputs, and on random lines made of the characters that matter (brackets,
quotes, backslashes), at several limits. Skipped where the optional extension is not built."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ds4sessions.ingest import limits

cprep = pytest.importorskip("ds4sessions.agents.pi._cprep", reason="the optional C extension is not built here")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _lines(shared: Path | None) -> list[bytes]:
    paths = sorted(FIXTURES.rglob("*.jsonl"))
    if shared is not None:
        paths += sorted((shared / "sessions-pi").glob("*.jsonl")) + sorted((shared / "bad-inputs").rglob("*"))
    out: list[bytes] = []
    for path in paths:
        if path.is_file() and path.stat().st_size < 64 << 20:
            out += path.read_bytes().split(b"\n")
    return out


def test_equal_on_every_real_and_bad_line() -> None:
    from tests.conftest import SHARED

    lines = _lines(SHARED)
    assert len(lines) > 100
    deep = 0
    for raw in lines:
        for limit in (0, 3, 200):
            assert cprep.bytes_depth(raw, limit) == limits._bytes_depth(raw, limit), raw[:200]
        deep += raw.count(b"[") + raw.count(b"{") > limits.MAX_DEPTH
    if SHARED is not None:
        assert deep > 300  # 99-large alone has 361 lines past the fast path


def test_equal_on_random_lines() -> None:
    rng = random.Random(14)
    alphabet = [b"[", b"]", b"{", b"}", b'"', b"\\", b"a", b":", b","]
    for _ in range(20_000):
        raw = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        for limit in (0, 2, 5, 200):
            assert cprep.bytes_depth(raw, limit) == limits._bytes_depth(raw, limit), raw


def test_the_bound_uses_the_scan_and_keeps_its_answers() -> None:
    deep = b"[" * 250 + b"]" * 250
    in_strings = b'["' + b"[" * 300 + b'"]'
    assert limits.json_depth(deep) > limits.MAX_DEPTH
    assert limits.line_problem(deep) is not None
    assert limits.json_depth(in_strings) == 1 and limits.line_problem(in_strings) is None
    assert limits._c_bytes_depth() is cprep.bytes_depth
