"""A session's first read in slices (`Tailer.poll(limit)`, `LiveSession.refresh(limit=...)`):
the same lines as one read, each slice's snapshot the session as it was at that byte, and the
last one equal to a read in one go. Real files, every shared sample and a synthetic session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ds4sessions.agents.pi.live import LiveSession
from ds4sessions.ingest.tailer import CHUNK_BYTES, Tailer
from tests.conftest import FIXTURES, ROOT, SHARED
from tests.sessions.test_slim_prepare import _same

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402


def _files(tmp_path: Path) -> list[Path]:
    synthetic = tmp_path / "synthetic.jsonl"
    synthetic_session(synthetic, 1500)  # ~2.5 MB: several chunks
    paths = [FIXTURES / "pi" / "01-tools-and-image.jsonl", synthetic]
    if SHARED is not None:
        paths += sorted((SHARED / "sessions-pi").glob("*.jsonl"))
    return paths


@pytest.mark.parametrize("limit", [1, 4096, CHUNK_BYTES + 7])
def test_polls_with_a_limit_deliver_the_lines_of_one_poll(tmp_path: Path, limit: int) -> None:
    for path in _files(tmp_path):
        whole = Tailer(path).poll()
        tailer = Tailer(path)
        lines, polls, unread = [], 0, None
        while True:
            batch = tailer.poll(limit)
            polls += 1
            lines += batch.lines
            assert batch.reset is None
            if batch.unread:
                assert batch.pending_bytes == 0 and batch.size + batch.unread == path.stat().st_size
                assert unread is None or batch.unread < unread  # always progress
                unread = batch.unread
                continue
            break
        assert lines == list(whole.lines), path.name
        assert (batch.pending_bytes, batch.size, batch.offset) == (whole.pending_bytes, whole.size, whole.offset)
        if path.stat().st_size > 2 * max(limit, CHUNK_BYTES):
            assert polls > 1, path.name
        assert tailer.poll(limit).lines == ()  # nothing left


def test_a_sliced_first_read_ends_equal_to_one_read(tmp_path: Path) -> None:
    for path in _files(tmp_path):
        one = LiveSession(path).refresh(force=True)
        live = LiveSession(path)
        limit = max(path.stat().st_size // 5, 1)
        snaps = []
        while True:
            snap = live.refresh(force=not snaps, limit=limit)
            assert snap is not None
            snaps.append(snap)
            if not snap.unread_bytes:
                break
        last = snaps[-1]
        assert snap.file_size == one.file_size and last.pending_bytes == one.pending_bytes
        assert last.breakdown == one.breakdown and last.turns == one.turns, path.name
        assert last.context.message_entry_ids == one.context.message_entry_ids
        assert _same(list(last.context.messages), list(one.context.messages))
        assert last.session.diagnostics.counts == one.session.diagnostics.counts
        assert [d.message for d in last.session.diagnostics.items] == [d.message for d in one.session.diagnostics.items]
        if path.stat().st_size > 4 * CHUNK_BYTES // 2:
            assert len(snaps) > 1, path.name  # (a large file really was read in slices)
        # each slice's snapshot is the session as it was at that byte: a file cut there reads the same
        for snap in snaps[:-1]:
            assert snap.unread_bytes == path.stat().st_size - snap.file_size
            cut = tmp_path / f"cut-{snap.file_size}-{path.name}"
            cut.write_bytes(path.read_bytes()[: snap.file_size])
            prefix = LiveSession(cut).refresh(force=True)
            assert prefix.breakdown == snap.breakdown and prefix.turns == snap.turns, (path.name, snap.file_size)


def test_a_slice_inside_one_long_line_still_moves_on(tmp_path: Path) -> None:
    """A slice that ends inside a line longer than the slice gives a snapshot with fewer unread
    bytes (and no new line), so the reader of slices never stops early."""
    path = tmp_path / "long.jsonl"
    lines = (FIXTURES / "pi" / "01-tools-and-image.jsonl").read_bytes().splitlines(keepends=True)
    big = b'{"type":"custom","customType":"x","data":"' + b"y" * (3 * CHUNK_BYTES) + b'","id":"big1","parentId":null}\n'
    path.write_bytes(lines[0] + big + b"".join(lines[1:]))
    live = LiveSession(path)
    seen = []
    snap = live.refresh(force=True, limit=1)
    while snap is not None and snap.unread_bytes:
        seen.append(snap.unread_bytes)
        snap = live.refresh(limit=1)
    assert snap is not None and seen == sorted(seen, reverse=True) and len(seen) >= 3
    one = LiveSession(path).refresh(force=True)
    assert snap.breakdown == one.breakdown and len(snap.session.entries) == len(one.session.entries)
