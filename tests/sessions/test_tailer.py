"""Tailer and SessionWatcher on real files (tmp_path), no mocks.

Every poll goes through `poll()`, which records the tailer's opens with a Python audit hook and
fails on any open that could write (the tailer must only ever read). The file system is real:
appends, truncation, in-place rewrites, rename-replace, deletion and re-creation.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from ds4sessions.ingest.tailer import ANCHOR_BYTES, HEAD_BYTES, TailBatch, Tailer, TailLine
from ds4sessions.ingest.watch import SessionWatcher

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_opens: list[tuple[str, int]] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opens is not None:
        _opens.append((os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else str(args[0]), args[2]))


sys.addaudithook(_audit)


def poll(tailer: Tailer) -> tuple[TailBatch, int]:
    """Poll and return (batch, number of opens of the tailed file); fail on a writable open."""
    global _opens
    _opens = []
    try:
        batch = tailer.poll()
    finally:
        opens, _opens = _opens, None
    mine = [flags for name, flags in opens if name == str(tailer.path)]
    assert all(flags & WRITE_FLAGS == 0 for flags in mine), f"tailer opened for writing: {mine}"
    return batch, len(mine)


def lines_of(batch: TailBatch) -> list[bytes]:
    return [line.raw for line in batch.lines]


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def bump_mtime(path: Path, before_ns: int) -> None:
    """Give `path` an mtime 1 s after `before_ns`: the kernel's mtime ticks are coarse (a jiffy),
    so a same-size rewrite right after a poll may keep the old mtime; a real later write would not."""
    os.utime(path, ns=(before_ns + 1_000_000_000, before_ns + 1_000_000_000))


HEADER = b'{"type":"session","version":3,"id":"019cadb5-6afd","timestamp":"2026-03-02T08:41:13.726Z","cwd":"/w"}'
MSG = b'{"type":"message","id":"06fb6c69","parentId":"1a860668","message":{"role":"user","content":"h\xc3\xa9llo \xf0\x9f\x99\x82"}}'


# --- appends -------------------------------------------------------------------------------------


def test_first_poll_reads_existing_lines_then_only_appended_ones(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\nBB\nCCC\n")
    tailer = Tailer(path)
    batch, _ = poll(tailer)
    assert batch == TailBatch(
        (TailLine(1, 0, b"A"), TailLine(2, 2, b"BB"), TailLine(3, 5, b"CCC")), None, 0, 9, 9
    )
    append(path, b"DDDD\nE\n")
    batch, opens = poll(tailer)
    assert batch == TailBatch((TailLine(4, 9, b"DDDD"), TailLine(5, 14, b"E")), None, 0, 16, 16)
    assert opens == 1


def test_unchanged_file_is_stat_only(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n" + b'{"partial')
    tailer = Tailer(path)
    first, opens = poll(tailer)
    assert (lines_of(first), first.pending_bytes, opens) == ([HEADER], 9, 1)
    for _ in range(3):
        batch, opens = poll(tailer)
        assert batch == TailBatch((), None, 9, len(HEADER) + 10, len(HEADER) + 1)
        assert opens == 0


def test_line_split_at_every_byte_position(tmp_path: Path) -> None:
    full = MSG + b"\n"
    for k in range(len(full)):
        path = tmp_path / f"s{k}.jsonl"
        path.write_bytes(HEADER + b"\n" + full[:k])
        tailer = Tailer(path)
        batch, _ = poll(tailer)
        assert lines_of(batch) == [HEADER]
        assert batch.pending_bytes == k
        append(path, full[k:])
        batch, _ = poll(tailer)
        assert batch == TailBatch(
            (TailLine(2, len(HEADER) + 1, MSG),), None, 0, len(HEADER) + 1 + len(full), len(HEADER) + 1 + len(full)
        )
        assert path.read_bytes() == HEADER + b"\n" + full


def test_line_arriving_in_many_pieces_is_delivered_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    tailer = Tailer(path)
    delivered: list[bytes] = []
    for piece in (MSG[:5], MSG[5:6], MSG[6:40], MSG[40:], b"\n"):
        append(path, piece)
        delivered += lines_of(poll(tailer)[0])
    assert delivered == [MSG]


def test_pi_newline_after_crash_completes_the_torn_line(tmp_path: Path) -> None:
    # Pi session format §2: after a crash left a partial last line, Pi 1.x appends "\n" on open
    # and then appends whole lines; the torn line becomes a (malformed) line of its own.
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b'\n{"type":"mess')
    tailer = Tailer(path)
    assert lines_of(poll(tailer)[0]) == [HEADER]
    append(path, b"\n" + MSG + b"\n")
    batch, _ = poll(tailer)
    assert batch.reset is None
    assert [(line.line_no, line.raw) for line in batch.lines] == [(2, b'{"type":"mess'), (3, MSG)]


def test_crlf_lines_keep_their_carriage_return(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\r\n{"b":2}\r')
    tailer = Tailer(path)
    batch, _ = poll(tailer)
    assert (lines_of(batch), batch.pending_bytes) == ([b'{"a":1}\r'], 8)
    append(path, b"\n")
    batch, _ = poll(tailer)
    assert batch.lines == (TailLine(2, 9, b'{"b":2}\r'),)


def test_empty_lines_are_delivered_and_numbered(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n\nA\n\n")
    batch, _ = poll(Tailer(path))
    assert batch.lines == (TailLine(1, 0, b""), TailLine(2, 1, b""), TailLine(3, 2, b"A"), TailLine(4, 4, b""))


@pytest.mark.parametrize("most", [1, 7, 1000])
def test_a_poll_with_a_limit_delivers_at_most_poll_lines(most: int, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A slice of tiny lines stops after `POLL_LINES` lines, at a line end, inside a read chunk
    (16 MiB of blank lines were 16M lines, 2 GB, in one poll); the polls that follow deliver
    every line once, as one poll without a limit does, then the torn last line."""
    from ds4sessions.ingest import tailer as tailer_module

    monkeypatch.setattr(tailer_module, "POLL_LINES", most)
    monkeypatch.setattr(tailer_module, "CHUNK_BYTES", 4096)
    body = b"".join(b"\n" * (i % 5) + b"x" * (i % 300) + b"\n" for i in range(2000)) + b"\n\r\n{torn"
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n" + body)
    whole = Tailer(path).poll()
    sliced = Tailer(path)
    lines: list[TailLine] = []
    batch = sliced.poll(1 << 30)
    polls = 1
    while batch.unread:
        assert 0 < len(batch.lines) <= most and batch.pending_bytes == 0
        lines += batch.lines
        batch = sliced.poll(1 << 30)
        polls += 1
    lines += batch.lines
    assert lines == list(whole.lines) and len(lines) == 6003
    assert (batch.pending_bytes, batch.offset, batch.size) == (whole.pending_bytes, whole.offset, whole.size) == (5, len(HEADER) + len(body) - 4, path.stat().st_size)
    assert polls == -(-6003 // most) + (6003 % most == 0)  # (the last full poll leaves the torn line unread)
    assert sliced.pending_line() == whole_pending(path)


def whole_pending(path: Path) -> TailLine | None:
    tailer = Tailer(path)
    tailer.poll()
    return tailer.pending_line()


def test_line_longer_than_a_mebibyte(tmp_path: Path) -> None:
    # Pi stores images as base64 inside lines (Pi session format §11); read chunks are 1 MiB.
    big = b'{"data":"' + bytes(range(65, 91)) * 100_000 + b'"}'  # 2.6 MB
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    tailer = Tailer(path)
    poll(tailer)
    step = 700_001
    for start in range(0, len(big), step):
        append(path, big[start : start + step])
        batch, _ = poll(tailer)
        assert batch.lines == ()
        assert batch.pending_bytes == min(start + step, len(big))
    append(path, b"\nB\n")
    batch, _ = poll(tailer)
    assert batch.lines == (TailLine(2, len(HEADER) + 1, big), TailLine(3, len(HEADER) + 2 + len(big), b"B"))
    assert Tailer(path).poll().lines[1].raw == big  # the same line read in one go, from scratch


# --- resets --------------------------------------------------------------------------------------


def test_truncation_resets_and_rereads_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n" + MSG + b"\n")
    tailer = Tailer(path)
    poll(tailer)
    with open(path, "r+b") as f:
        f.truncate(len(HEADER) + 1)
    batch, _ = poll(tailer)
    assert batch == TailBatch((TailLine(1, 0, HEADER),), "truncated", 0, len(HEADER) + 1, len(HEADER) + 1)
    append(path, b"X\n")
    assert poll(tailer)[0].lines == (TailLine(2, len(HEADER) + 1, b"X"),)


def test_truncation_of_the_held_partial_line_only(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\nBBBB")
    tailer = Tailer(path)
    poll(tailer)
    with open(path, "r+b") as f:
        f.truncate(4)
    batch, _ = poll(tailer)
    assert batch == TailBatch((TailLine(1, 0, b"A"),), "truncated", 2, 4, 2)


def test_truncate_to_empty_then_write_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\nB\n")
    tailer = Tailer(path)
    poll(tailer)
    path.write_bytes(b"")  # same inode: open(..., "wb") truncates in place
    assert poll(tailer)[0] == TailBatch((), "truncated", 0, 0, 0)
    append(path, b"C\n")
    assert poll(tailer)[0] == TailBatch((TailLine(1, 0, b"C"),), None, 0, 2, 2)


def test_same_size_overwrite_of_the_first_line_is_a_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"id":"aaaa"}\n{"id":"bbbb"}\n')
    tailer = Tailer(path)
    poll(tailer)
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.write(b'{"id":"zzzz"}')
    bump_mtime(path, before.st_mtime_ns)
    assert os.stat(path).st_ino == before.st_ino
    batch, _ = poll(tailer)
    assert batch.reset == "rewritten"
    assert batch.lines == (TailLine(1, 0, b'{"id":"zzzz"}'), TailLine(2, 14, b'{"id":"bbbb"}'))


def test_same_size_overwrite_past_the_head_is_caught_by_the_anchor(tmp_path: Path) -> None:
    filler = [b"x" * 99 for _ in range(HEAD_BYTES // 100 + 2)]  # lines well past HEAD_BYTES
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(filler) + b"\nlast-line\n")
    tailer = Tailer(path)
    poll(tailer)
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(before.st_size - 5)
        f.write(b"LINE")
    bump_mtime(path, before.st_mtime_ns)
    batch, _ = poll(tailer)
    assert batch.reset == "rewritten"
    assert lines_of(batch) == [*filler, b"last-LINE"]


def test_migration_rewrite_truncate_and_write_larger(tmp_path: Path) -> None:
    # Pi session format §2: opening a v1/v2 file rewrites it whole in v3 form (same inode here).
    v1 = b'{"type":"session","id":"s1","timestamp":"t"}\n{"type":"message","timestamp":"t","message":{}}\n'
    v3 = (
        b'{"type":"session","version":3,"id":"s1","timestamp":"t"}\n'
        b'{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"t","message":{}}\n'
    )
    path = tmp_path / "s.jsonl"
    path.write_bytes(v1)
    tailer = Tailer(path)
    poll(tailer)
    ino = os.stat(path).st_ino
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(v3)
    assert os.stat(path).st_ino == ino
    batch, _ = poll(tailer)
    assert batch.reset == "rewritten"
    assert lines_of(batch) == v3.splitlines()
    assert (batch.offset, batch.size) == (len(v3), len(v3))


def test_rewrite_keeping_the_header_changes_the_anchor(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b'\n{"n":1}\n')
    tailer = Tailer(path)
    poll(tailer)
    path.write_bytes(HEADER + b'\n{"n":2}\n{"n":3}\n')  # truncate + write, same inode, larger
    batch, _ = poll(tailer)
    assert batch.reset == "rewritten"
    assert lines_of(batch) == [HEADER, b'{"n":2}', b'{"n":3}']


def test_replacement_by_rename(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    tailer = Tailer(path)
    poll(tailer)
    new = tmp_path / "s.jsonl.tmp"
    new.write_bytes(HEADER + b"\n" + MSG + b"\n")  # extends the old content, yet a new file
    os.replace(new, path)
    batch, _ = poll(tailer)
    assert batch == TailBatch(
        (TailLine(1, 0, HEADER), TailLine(2, len(HEADER) + 1, MSG)), "replaced", 0, len(HEADER) + len(MSG) + 2,
        len(HEADER) + len(MSG) + 2,
    )
    assert poll(tailer)[0] == TailBatch((), None, 0, batch.size, batch.offset)


def test_deletion_is_reported_once_then_recreation_appears(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\nB\n")
    tailer = Tailer(path)
    poll(tailer)
    path.unlink()
    assert poll(tailer)[0] == TailBatch((), "deleted", 0, 0, 4)  # offset kept: last state
    assert poll(tailer)[0] == TailBatch((), None, 0, 0, 4)
    path.write_bytes(b"C\n")
    assert poll(tailer)[0] == TailBatch((TailLine(1, 0, b"C"),), "appeared", 0, 2, 2)


def test_file_appearing_after_the_tailer_was_created(tmp_path: Path) -> None:
    path = tmp_path / "later" / "s.jsonl"  # not even the directory exists yet
    tailer = Tailer(path)
    assert poll(tailer) == (TailBatch((), None, 0, 0, 0), 0)
    assert poll(tailer)[0] == TailBatch((), None, 0, 0, 0)
    path.parent.mkdir()
    path.write_bytes(HEADER + b"\n{")
    assert poll(tailer)[0] == TailBatch((TailLine(1, 0, HEADER),), "appeared", 1, len(HEADER) + 2, len(HEADER) + 1)


def test_file_created_before_the_first_poll_is_no_reset(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    tailer = Tailer(path)  # no I/O yet
    path.write_bytes(b"A\n")
    assert poll(tailer)[0] == TailBatch((TailLine(1, 0, b"A"),), None, 0, 2, 2)


def test_directory_path_raises(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        Tailer(tmp_path).poll()


def test_anchor_is_the_bytes_before_the_offset(tmp_path: Path) -> None:
    # Many short lines and one long one, over several polls: the remembered anchor must stay
    # exactly the file's bytes before the offset, or later polls would see false rewrites.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    tailer = Tailer(path)
    for data in (b"a\n", b"b\nc\n", b"L" * (ANCHOR_BYTES * 3) + b"\n", b"d\n" * 40, b"\n", b"e"):
        append(path, data)
        batch, _ = poll(tailer)
        assert batch.reset is None
        content = path.read_bytes()
        assert tailer._anchor == content[max(0, batch.offset - ANCHOR_BYTES) : batch.offset]
        assert tailer._head == content[:HEAD_BYTES]


def test_tailer_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    data = HEADER + b"\n" + MSG + b"\n{torn"
    path.write_bytes(data)
    before = os.stat(path)
    tailer = Tailer(path)
    for _ in range(3):
        poll(tailer)
    after = os.stat(path)
    assert path.read_bytes() == data
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


# --- SessionWatcher ------------------------------------------------------------------------------

WAKE_TIMEOUT = 5.0  # seconds; a wake-up test, not a timing test


def test_watcher_wakes_on_append(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\n")
    woke = threading.Event()
    with SessionWatcher(path, woke.set, poll_interval=3600):  # events only within the timeout
        append(path, b"B\n")
        assert woke.wait(WAKE_TIMEOUT)


def test_watcher_wakes_on_creation(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    woke = threading.Event()
    with SessionWatcher(path, woke.set, poll_interval=3600):
        (tmp_path / "other.jsonl").write_bytes(b"x\n")
        path.write_bytes(b"A\n")
        assert woke.wait(WAKE_TIMEOUT)


def test_watcher_wakes_on_rename_replace(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\n")
    new = tmp_path / "s.jsonl.tmp"
    new.write_bytes(b"B\n")
    woke = threading.Event()
    with SessionWatcher(path, woke.set, poll_interval=3600):
        os.replace(new, path)
        assert woke.wait(WAKE_TIMEOUT)
    assert Tailer(path).poll().lines == (TailLine(1, 0, b"B"),)


def test_watcher_ignores_other_files(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    calls: list[str] = []
    mine = threading.Event()

    def on_change() -> None:
        calls.append("wake")
        mine.set()

    with SessionWatcher(path, on_change, poll_interval=3600):
        for i in range(5):
            (tmp_path / f"other{i}.jsonl").write_bytes(b"x\n")
        path.write_bytes(b"A\n")  # events arrive in order: once this one is seen, the rest were
        assert mine.wait(WAKE_TIMEOUT)
    assert 1 <= len(calls) <= 2  # created and modified of s.jsonl; the others' 10 events add none


def test_watcher_fallback_poll_without_events(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\n")
    woke = threading.Event()
    with SessionWatcher(path, woke.set, poll_interval=0.05, use_events=False):
        append(path, b"B\n")
        assert woke.wait(WAKE_TIMEOUT)
        woke.clear()
        path.unlink()
        assert woke.wait(WAKE_TIMEOUT)


def test_watcher_directory_created_after_start(tmp_path: Path) -> None:
    path = tmp_path / "project" / "s.jsonl"
    woke = threading.Event()
    with SessionWatcher(path, woke.set, poll_interval=0.05) as watcher:
        path.parent.mkdir()
        path.write_bytes(b"A\n")
        assert woke.wait(WAKE_TIMEOUT)
        for _ in range(100):  # the poll thread schedules the directory watch at its next tick
            if watcher._watch is not None:
                break
            time.sleep(0.05)
        assert watcher._watch is not None


def test_watcher_stops_cleanly_and_survives_a_failing_callback(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"A\n")
    before = set(threading.enumerate())
    calls: list[int] = []
    second = threading.Event()

    def on_change() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("consumer bug")
        second.set()

    watcher = SessionWatcher(path, on_change, poll_interval=0.05)
    with watcher:
        append(path, b"B\n")
        for n in range(50):  # keep appending until a call after the failing one arrives
            if second.wait(0.1):
                break
            append(path, b"%d\n" % n)
        assert second.is_set()
    assert set(threading.enumerate()) <= before
    watcher.stop()  # idempotent
    with pytest.raises(RuntimeError):
        watcher.start()


def test_watcher_rejects_bad_interval(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SessionWatcher(tmp_path / "s.jsonl", lambda: None, poll_interval=0)


def test_watcher_can_be_stopped_from_its_callback(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    before = set(threading.enumerate())
    stopped = threading.Event()
    watcher: SessionWatcher

    def on_change() -> None:
        watcher.stop()
        stopped.set()

    watcher = SessionWatcher(path, on_change, poll_interval=0.05)
    watcher.start()
    path.write_bytes(b"A\n")
    assert stopped.wait(WAKE_TIMEOUT)
    watcher.stop()  # from the test thread: joins what is left
    assert set(threading.enumerate()) <= before


def test_polls_reads_to_the_end_one_slice_of_lines_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`polls()` (the overview's and the Codex view's read): batches of at most `POLL_LINES`
    lines that together are one `poll()`'s lines; after an append, only the new ones."""
    from ds4sessions.ingest import tailer as tailer_module

    monkeypatch.setattr(tailer_module, "POLL_LINES", 100)
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n" + b"\n" * 250 + b"1\n" * 99)
    tailer = Tailer(path)
    batches = list(tailer.polls())
    assert [len(b.lines) for b in batches] == [100, 100, 100, 50]
    assert [line for b in batches for line in b.lines] == list(Tailer(path).poll().lines)
    append(path, b"2\n" * 3 + b"{torn")
    again = list(tailer.polls())
    assert [[line.raw for line in b.lines] for b in again] == [[b"2"] * 3] and again[-1].pending_bytes == 5
