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
    """A reader that keeps every row (as for lines fed without the file's offsets)."""
    reader = ClaudeReader(path)
    reader._reread = False
    reader.feed(read_lines(path))
    return reader


def test_lines_fed_without_the_files_offsets_are_kept_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claude_reader, "SETTLE_ROWS", 1)
    path = transcripts()[0]
    reader = ClaudeReader(path)
    reader.feed([(n, 0, raw) for n, _, raw in read_lines(path)])
    assert not reader._reread
    _same(reader.conversation(), kept_whole(path).conversation())


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


def test_mutated_transcripts_read_in_settles_equal_rows_kept_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows dropped, repeated, moved and re-parented at random (rewinds, retries, branches,
    parents read later, cycles, duplicate uuids), read with a settle after every 1–5 rows, and
    read a few lines at a time with a conversation after each: the same conversation as the
    reader that keeps every row and builds once."""
    import json
    import random

    rng = random.Random(36)
    sources = [p for p in transcripts() if p.stat().st_size < 400_000]
    for case in range(150):
        lines = rng.choice(sources).read_bytes().splitlines()
        rows = [json.loads(line) if line.strip() else None for line in lines]
        uuids = [r["uuid"] for r in rows if isinstance(r, dict) and isinstance(r.get("uuid"), str)]
        out = list(lines)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(out))
            op = rng.random()
            if op < 0.25:
                del out[i]
            elif op < 0.45:
                out.insert(rng.randrange(len(out) + 1), out[i])  # a repeated row (same uuid)
            elif op < 0.6:
                out.insert(rng.randrange(len(out) + 1), out.pop(i))  # a row read out of order
            else:
                try:
                    row = json.loads(out[i])
                except ValueError:
                    continue
                if isinstance(row, dict) and uuids:
                    row["parentUuid"] = rng.choice([*uuids, None, "not-a-row"])
                    if rng.random() < 0.3:
                        row["uuid"] = rng.choice(uuids) + "-b"  # a new branch row
                    out[i] = json.dumps(row).encode()
        path = tmp_path / f"m{case}.jsonl"
        path.write_bytes(b"\n".join(out) + b"\n")
        monkeypatch.setattr(claude_reader, "SETTLE_ROWS", rng.randint(1, 5))
        reader = ClaudeReader(path)
        reader.feed(read_lines(path))
        whole = kept_whole(path).conversation()
        _same(reader.conversation(), whole)
        # as the dashboard reads it: a few lines, a conversation, a few more lines…
        from ds4sessions.agents.claude.views import MessageTally, context_map

        live = ClaudeReader(path)
        lines = list(read_lines(path))
        tally = MessageTally()
        at = 0
        while at < len(lines):
            step = rng.randint(1, 7)
            live.feed(lines[at:at + step])
            conv = live.conversation()
            assert context_map(conv, {}, tally=tally) == context_map(conv, {})  # (the live map's memos too)
            at += step
        _same(live.conversation(), whole)
