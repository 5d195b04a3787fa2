"""Property: however the bytes of a session file arrive, the Tailer hands out each complete line
exactly once, in order, byte-identical, and never writes.

A file is built from sample lines (synthetic ones that always run; Pi's own lines from
`01-tools-and-image.jsonl` when the shared folder is present), some with a corrupted byte inside
(never a `\\n`, so the line boundaries stay), maybe followed by a torn last line. It is written
in chunks cut at random byte positions, with a poll after each chunk.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4sessions.ingest.tailer import TailBatch, Tailer, TailLine
from tests.conftest import SHARED, SKIP_NO_SHARED

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_opens: list[int] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opens is not None:
        _opens.append(args[2])


sys.addaudithook(_audit)

SYNTHETIC = [
    b'{"type":"session","version":3,"id":"s-1","timestamp":"2026-03-02T08:41:13.726Z","cwd":"/w"}',
    b'{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"hi"}}',
    b'{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","content":[]}}\r',
    b'{"type":"label","id":"a3","targetId":"a1","label":"caf\xc3\xa9 \xf0\x9f\x99\x82"}',
    b"",
    b"not json at all",
    b'{"type":"message","id":"a4","message":{"content":"' + b"x" * 5000 + b'"}}',
]


def _pi_lines() -> list[bytes]:
    if SHARED is None:
        return []
    return (SHARED / "sessions-pi" / "01-tools-and-image.jsonl").read_bytes().split(b"\n")[:-1]


PI_LINES = _pi_lines()


@st.composite
def written_file(draw: st.DrawFn, pool: list[bytes]) -> tuple[bytes, list[int]]:
    """(content, sorted cut positions): lines from `pool`, ~1 in 8 with one corrupted byte,
    maybe a torn last line without its `\\n`."""
    parts = []
    for line in draw(st.lists(st.sampled_from(pool), max_size=25)):
        if line and draw(st.integers(0, 7)) == 0:
            pos = draw(st.integers(0, len(line) - 1))
            byte = draw(st.integers(0, 255).filter(lambda b: b != 0x0A))
            line = line[:pos] + bytes([byte]) + line[pos + 1 :]
        parts.append(line + b"\n")
    if draw(st.booleans()):
        torn = draw(st.sampled_from(pool))
        parts.append(torn[: draw(st.integers(0, len(torn)))])
    content = b"".join(parts)
    cuts = draw(st.lists(st.integers(0, len(content)), max_size=12, unique=True))
    return content, sorted(cuts)


def expected_lines(content: bytes) -> list[TailLine]:
    """Complete lines of `content` as the tailer must deliver them (1-based, byte offsets)."""
    out, offset = [], 0
    for no, raw in enumerate(content.split(b"\n")[:-1], start=1):
        out.append(TailLine(no, offset, raw))
        offset += len(raw) + 1
    return out


def read_only_poll(tailer: Tailer) -> TailBatch:
    """`tailer.poll()`, failing if it opened anything with a flag that could write."""
    global _opens
    _opens = []
    try:
        batch = tailer.poll()
    finally:
        opens, _opens = _opens, None
    assert all(flags & WRITE_FLAGS == 0 for flags in opens), opens
    return batch


def check(content: bytes, cuts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        path.write_bytes(b"")
        tailer = Tailer(path)
        delivered: list[TailLine] = []
        for start, end in zip([0, *cuts], [*cuts, len(content)]):
            with open(path, "ab") as f:
                f.write(content[start:end])
            batch = read_only_poll(tailer)
            assert batch.reset is None
            delivered += batch.lines
            assert batch.offset + batch.pending_bytes == end == batch.size
        assert path.read_bytes() == content  # the tailer wrote nothing
        want = expected_lines(content)
        assert delivered == want
        assert batch.pending_bytes == len(content.rsplit(b"\n", 1)[-1])
        assert tailer.poll().lines == ()
        assert list(Tailer(path).poll().lines) == want  # incremental == one read from scratch


@settings(max_examples=100, deadline=None)
@given(written_file(SYNTHETIC))
def test_synthetic_lines_in_random_chunks(case: tuple[bytes, list[int]]) -> None:
    check(*case)


@pytest.mark.skipif(SHARED is None, reason=SKIP_NO_SHARED)
@settings(max_examples=60, deadline=None)
@given(written_file(PI_LINES or [b""]))
def test_pi_sample_lines_in_random_chunks(case: tuple[bytes, list[int]]) -> None:
    check(*case)
