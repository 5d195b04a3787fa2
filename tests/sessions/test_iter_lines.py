"""`ingest.limits.iter_lines`, the shared streaming line reader (Pi's one-shot read, Claude Code's
and Codex's whole-file reads): whatever the read-chunk size and the cap, its lines are the
file's `\\n`-separated lines with their offsets, a line over the cap (at least `HEAD_KEPT`, as
every real cap is) an `OversizedLine` of its head and real length, and an unterminated last
line marked incomplete."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4sessions.ingest import limits
from ds4sessions.ingest.limits import HEAD_KEPT, OversizedLine, iter_lines


def _expected(data: bytes, cap: int) -> list[tuple[int, int, bytes, int, bool]]:
    pieces = data.split(b"\n")
    out, offset = [], 0
    for number, piece in enumerate(pieces, 1):
        last = number == len(pieces)
        if last and not piece:
            break
        out.append((number, offset, piece[:HEAD_KEPT] if len(piece) > cap else piece, len(piece), not last))
        offset += len(piece) + 1
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from([b"", b"a", b"\r", b" ", b"{}", b"x" * 40, b"y" * 300, bytes(range(1, 251)) * 2]),
                     max_size=40).map(lambda parts: b"\n".join(parts)),
       chunk=st.integers(1, 64), cap=st.integers(HEAD_KEPT, 400),
       end=st.sampled_from([b"", b"\n"]))
def test_lines_are_the_files_lines_at_any_chunk_and_cap(data: bytes, chunk: int, cap: int, end: bytes) -> None:
    data += end
    monkey = pytest.MonkeyPatch()
    monkey.setattr(limits, "READ_CHUNK", chunk)
    try:
        got = [(n, o, bytes(r), limits.line_length(r), complete) for n, o, r, complete in iter_lines(io.BytesIO(data), cap)]
        kinds = [isinstance(r, OversizedLine) for _, _, r, _ in iter_lines(io.BytesIO(data), cap)]
    finally:
        monkey.undo()
    assert got == _expected(data, cap)
    assert kinds == [length > cap for _, _, _, length, _ in got]
