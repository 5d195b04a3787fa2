"""The Claude Code reader in bounded memory (issue 36): rows are kept whole only until the next
settle; after it only their records (line, offset, length, parent, time) are kept and a row
needed again is read again from the file. Whatever the settle interval, the conversation equals
the one of a reader that keeps every row (lines fed by hand, whose offsets are not the file's),
on every Claude Code fixture and the shared sample, and on the repeated sample of bench/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ds4sessions.agents.claude import reader as claude_reader
from ds4sessions.agents.claude.reader import ClaudeReader, read_lines
from tests.conftest import FIXTURES, SHARED
from tests.sessions.test_incremental_conversations import _same

ROOT = Path(__file__).resolve().parents[2]


def transcripts() -> list[Path]:
    found = sorted((FIXTURES / "claude").rglob("*.jsonl")) + sorted((FIXTURES / "claude-2.1.337").rglob("*.jsonl"))
    if SHARED is not None:
        found += sorted((SHARED / "sessions-claude").rglob("*.jsonl"))
    return found


def kept_whole(path: Path) -> ClaudeReader:
    """A reader that keeps every row (its lines carry no file offsets)."""
    reader = ClaudeReader(path)
    reader.feed([(n, 0, raw) for n, _, raw in read_lines(path)])
    assert not reader._reread
    return reader


@pytest.mark.parametrize("every", [1, 2, 3, 7])
@pytest.mark.parametrize("path", transcripts(), ids=lambda p: p.name[-24:])
def test_any_settle_interval_equals_rows_kept_whole(path: Path, every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claude_reader, "SETTLE_ROWS", every)
    reader = ClaudeReader(path)
    reader.feed(read_lines(path))
    assert reader._reread and len(reader._s.fresh) <= every
    _same(reader.conversation(), kept_whole(path).conversation())


def test_a_repeated_sample_reads_rows_again_only_when_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if SHARED is None:
        pytest.skip("no shared folder")
    sys.path.insert(0, str(ROOT / "bench"))
    import repeat_sample

    for compaction in (True, False):
        path = tmp_path / f"c{compaction}.jsonl"
        repeat_sample.write_repeated("claude", path, 0.3, SHARED, compaction)
        reads = []
        original = ClaudeReader._row_of

        def counted(self, uuid, _original=original):  # type: ignore[no-untyped-def]
            if isinstance(uuid, str) and uuid not in self._s.fresh:
                reads.append(uuid)
            return _original(self, uuid)

        monkeypatch.setattr(ClaudeReader, "_row_of", counted)
        monkeypatch.setattr(claude_reader, "SETTLE_ROWS", 50)
        reader = ClaudeReader(path)
        reader.feed(read_lines(path))
        conv = reader.conversation()
        monkeypatch.undo()
        _same(conv, kept_whole(path).conversation())
        rows = reader._s.row_count
        # a retry after an API error goes back along the context (`Converter.rewind`): no row is
        # read again but a compaction's preserved rows and the session's first request's
        assert len(reads) < rows / 20, (compaction, len(reads), rows)


def test_a_changed_file_gives_no_row_instead_of_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if SHARED is None:
        pytest.skip("no shared folder")
    source = next((SHARED / "sessions-claude").rglob("af1a7763-*.jsonl"))
    path = tmp_path / "t.jsonl"
    path.write_bytes(source.read_bytes())
    monkeypatch.setattr(claude_reader, "SETTLE_ROWS", 1)
    reader = ClaudeReader(path)
    reader.feed(read_lines(path))
    reader.conversation()
    first = next(iter(reader._s.recs))
    assert reader._row_of(first) is not None
    path.write_bytes(b"x" * path.stat().st_size)  # (the tailer would start the reader over)
    assert reader._row_of(first) is None
