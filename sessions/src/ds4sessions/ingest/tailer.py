"""Incremental reader of an append-only JSONL session file (the first step of the hot path).

Pi appends one JSON object per line with `appendFileSync`, so a crash can leave a partial last
line; Pi never edits lines in place except the whole-file rewrite of v1/v2 files on open and the
`\\n` it appends on open after a partial last line (Pi session format §2, §11). The tailer
therefore reads only the bytes appended since the last poll, hands out complete lines and holds
the torn tail until its newline arrives (design.md, "The path of one appended line").

Design choices:

* **Reopen by path, no fd kept open.** Every `poll()` starts with one `os.stat(path)`; only when
  the file's identity, size or mtime changed is the file opened (read-only, binary), read from
  the saved offset, and closed again. Reopening by path sees a rename-replace or a re-created
  file at once (a kept fd would go on reading the old, unlinked inode), and holding no handle
  lets the writer rename or delete the file on Windows.
* **Raw lines.** A line is the bytes before its `\\n`, kept verbatim: a CRLF line keeps its
  trailing `\\r` (JSON parsers ignore it as whitespace, so the reader need not strip it), a
  UTF-8 BOM or invalid UTF-8 is passed through, and empty lines are delivered (the reader
  counts them). Decoding and parsing belong to the reader.
* **Reset, not repair.** When the file no longer extends what was read (truncated, rewritten,
  replaced, re-created), the batch says so and carries every line of the current file from
  line 1; the consumer rebuilds its state from scratch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, Literal, NamedTuple

from ds4sessions.ingest.limits import HEAD_KEPT, MAX_LINE_BYTES, OversizedLine
from ds4sessions.safety import not_regular

ResetReason = Literal["truncated", "rewritten", "replaced", "appeared", "deleted"]
"""Why a `TailBatch` restarts the file (see `Tailer.poll` for the rule behind each)."""

CHUNK_BYTES = 1 << 20
"""Read size in bytes (1 MiB, the chunk size Pi itself reads with, Pi session format §11)."""

HEAD_BYTES = 4096
"""Bytes at the start of the file remembered to detect an in-place rewrite (covers the header)."""

ANCHOR_BYTES = 64
"""Bytes just before the read offset remembered to detect a rewrite that keeps the header."""

SLICE_BYTES = 64 << 20
"""Bytes per poll of a read to the end in slices (`Tailer.polls`, `LiveSession.refresh`)."""

POLL_LINES = 1 << 18
"""Lines one poll with a `limit` delivers at most (it stops after that many, at a line end): a
line costs ~130 bytes of Python objects whatever its length, so a slice of a file of tiny lines
(16 MiB of blank lines: 16M lines, 2 GB) stays bounded (~35 MB), like one of real lines."""


class TailLine(NamedTuple):
    """One complete line of the file.

    `line_no` is 1-based over the whole file (every `\\n` ends a line, empty lines included);
    `offset` is the byte offset of the line's first byte; `raw` is the line's bytes without the
    terminating `\\n` (a CRLF line keeps its `\\r`).
    """

    line_no: int
    offset: int
    raw: bytes


def _new_line(fields: tuple[int, int, bytes]) -> TailLine:
    """`TailLine(*fields)` without the named tuple's Python-level `__new__` (once per line)."""
    return tuple.__new__(TailLine, fields)


@dataclass(frozen=True, slots=True)
class TailBatch:
    """What one `Tailer.poll()` found.

    - `lines`: the complete lines not delivered before, in file order. After a reset other than
      "deleted" they start at line 1 of the current file.
    - `reset`: None, or why the consumer must drop what it built so far: "truncated",
      "rewritten", "replaced", "appeared" (the file was absent and now exists), or "deleted" (the
      file is gone; `lines` is empty and the consumer may keep showing its last state, marked as
      deleted; the file's return is reported as "appeared").
    - `pending_bytes`: length in bytes of the partial last line held back (no `\\n` yet).
    - `size`: bytes of the file seen by this poll (0 when the file is absent).
    - `offset`: byte offset just after the last complete line delivered, i.e. where the held
      partial line starts (kept at its last value after "deleted").
    - `unread`: bytes of the file after `size` that this poll left for the next one (a poll
      with a `limit`); then `pending_bytes` is 0 (the held bytes are the start of a line still
      being read, not a partial last line).
    """

    lines: tuple[TailLine, ...]
    reset: ResetReason | None
    pending_bytes: int
    size: int
    offset: int
    unread: int = 0


@dataclass(frozen=True, slots=True)
class _Seen:
    """The file as the tailer last saw it: identity (st_dev, st_ino), size (bytes), mtime (ns)."""

    ident: tuple[int, int]
    size: int
    mtime_ns: int


class Tailer:
    """Delivers each complete line of one append-only file exactly once.

    `Tailer(path)` does no I/O; the first `poll()` reads the file from the start (no reset: the
    consumer starts empty). A file that does not exist yet is fine: polls return empty batches
    until it appears, which is reported as "appeared".

    Cost: `poll()` on an unchanged file (same device, inode, size and mtime) is one `os.stat`
    and no open or read. Otherwise it opens the file read-only, reads at most `HEAD_BYTES` +
    `ANCHOR_BYTES` to check that the file still extends what was read, then only the new bytes.
    The held partial line stays in memory and is not read again.

    Thread safety: not thread-safe. Call `poll()` from one thread at a time (e.g. one worker);
    the `TailBatch` it returns is immutable and may be handed to any thread.
    """

    def __init__(self, path: Path, cap: int | None = None) -> None:
        """Tail `path` (a session file that may not exist yet). No I/O happens here. `cap`: the
        longest line kept, in bytes (default `limits.MAX_LINE_BYTES`; an agent whose reader
        allows longer lines gives its own)."""
        self.path = Path(path)
        self._cap = cap
        self._seen: _Seen | None = None  # None: absent (or never polled)
        self._polled = False
        self._line_no = 0  # complete lines delivered
        self._offset = 0  # byte offset just after the last complete line
        self._pending = b""  # partial last line, bytes from _offset (its head when oversized)
        self._over = 0  # > 0: the partial last line is longer than MAX_LINE_BYTES; its length
        self._head = b""  # first min(HEAD_BYTES, bytes read) bytes of the file
        self._anchor = b""  # the ANCHOR_BYTES (or fewer) bytes before _offset

    def polls(self, limit: int = SLICE_BYTES) -> Iterator[TailBatch]:
        """`poll(limit)`, then again while the last batch left bytes unread: a read to the end
        of the file whose lines are in memory one batch (`limit` bytes, `POLL_LINES` lines) at
        a time. Each batch is handled as a `poll()` batch (a reset in a later one too)."""
        batch = self.poll(limit)
        yield batch
        while batch.unread:
            batch = self.poll(limit)
            yield batch

    def pending_line(self) -> TailLine | None:
        """The held partial last line as the `TailLine` it would become (its line number and
        offset), or None. For a final read of an idle file (bad input B01: report the fragment
        as one unparseable trailing record)."""
        if not self._pending:
            return None
        raw = OversizedLine(self._pending, self._over) if self._over else self._pending
        return TailLine(self._line_no + 1, self._offset, raw)

    def poll(self, limit: int | None = None) -> TailBatch:
        """Read what was appended since the last poll and return it as a `TailBatch`.

        `limit`: read about that many new bytes at most (whole read chunks, so up to
        `CHUNK_BYTES` more), and at most `POLL_LINES` lines, and leave the rest for the next
        poll (`TailBatch.unread`): a large file read in slices, each delivered as it comes.
        None: up to the end of the file.

        Detection rules, in order (same identity = same `(st_dev, st_ino)` as last seen):
        1. path absent: "deleted" once if the file was seen before, then empty batches;
        2. path present after being absent: "appeared" (never on the very first poll);
        3. different identity: "replaced" (rename over the path, or delete and re-create);
        4. same identity, size smaller than the bytes already read (complete lines plus held
           partial line): "truncated";
        5. same identity, size and mtime unchanged: nothing to do (one `os.stat`, no read);
        6. same identity, but the first `HEAD_BYTES` or the `ANCHOR_BYTES` before the offset
           differ from what was read: "rewritten" (e.g. Pi's v1/v2 -> v3 migration rewrite, or a
           truncate-and-write of the same or a larger size);
        7. otherwise the new bytes are appended lines.
        On any reset but "deleted" the file is read again from byte 0.

        Not detected: a rewrite that keeps the first `HEAD_BYTES`, the `ANCHOR_BYTES` before the
        offset and the size (or grows it), and a same-size rewrite within the file system's mtime
        granularity; both look like a plain append (or no change).

        Raises OSError (other than FileNotFoundError, which means "absent") when the path cannot
        be stat'ed or read, e.g. PermissionError, and `NotRegularFile` (an OSError) for a FIFO,
        device, socket or directory, which is never opened for reading.
        """
        first_poll = not self._polled
        self._polled = True
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._absent()
        refused = not_regular(self.path, st.st_mode)
        if refused is not None:  # a FIFO would block the open, /dev/zero never ends: never opened
            raise refused
        if self._seen is not None and _same(self._seen, st):
            return self._batch((), None, st.st_size)
        try:
            f = os.fdopen(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)), "rb")
        except FileNotFoundError:
            return self._absent()
        with f:
            st = os.fstat(f.fileno())  # the file actually opened (the path may have changed)
            refused = not_regular(self.path, st.st_mode)
            if refused is not None:
                raise refused
            try:
                reset = self._classify(f, st, first_poll)
                if reset is not None:
                    self._restart()
                lines, end = self._read_new(f, limit)
            except OSError as err:  # a read error (EIO of /proc/self/mem, a failing disk) names the file
                if err.filename is not None:
                    raise
                raise OSError(err.errno, f"cannot read: {err.strerror or err}", str(self.path)) from None
            self._seen = _Seen((st.st_dev, st.st_ino), end, st.st_mtime_ns)
        unread = max(st.st_size - end, 0) if limit is not None else 0
        if unread:
            return TailBatch(lines, reset, 0, end, self._offset, unread)
        return self._batch(lines, reset, end)

    def _classify(self, f: BinaryIO, st: os.stat_result, first_poll: bool) -> ResetReason | None:
        """Apply detection rules 2-4 and 6 to the opened file `f` (see `poll`)."""
        if self._seen is None:
            return None if first_poll else "appeared"
        if (st.st_dev, st.st_ino) != self._seen.ident:
            return "replaced"
        if st.st_size < self._offset + self._pending_len():
            return "truncated"
        f.seek(0)
        if f.read(len(self._head)) != self._head:
            return "rewritten"
        f.seek(self._offset - len(self._anchor))
        if f.read(len(self._anchor)) != self._anchor:
            return "rewritten"
        return None

    def _restart(self) -> None:
        """Forget everything read so far; the next read starts at byte 0 and line 1."""
        self._line_no = 0
        self._offset = 0
        self._pending = b""
        self._over = 0
        self._head = b""
        self._anchor = b""

    def _read_new(self, f: BinaryIO, limit: int | None = None) -> tuple[tuple[TailLine, ...], int]:
        """Read `f` from the end of the held partial line to EOF (or, with `limit`, until at
        least `limit` bytes were read); return new lines and the end.

        Linear in the new bytes: a line spanning many chunks is joined once. A line longer than
        `MAX_LINE_BYTES` is not kept: it is delivered as an `OversizedLine` (its head and real
        length), so memory stays bounded by the cap, not by the line. With `limit`, the read
        ends after `POLL_LINES` lines (a chunk with more is cut after that many).
        """
        start = self._offset + self._pending_len()
        f.seek(start)
        lines: list[TailLine] = []
        append = lines.append
        parts = [self._pending]
        held = 0 if self._over else len(self._pending)
        over = self._over  # > 0: the current line is oversized; its length so far
        head = bytearray(self._head)
        pos = start
        line_no, offset = self._line_no, self._offset
        cap = MAX_LINE_BYTES if self._cap is None else self._cap
        stop = pos + limit if limit is not None else None
        room = POLL_LINES if limit is not None else -1  # lines this poll may still deliver (-1: any)
        while (stop is None or pos < stop) and room and (chunk := f.read(CHUNK_BYTES)):
            if room > 0:
                newlines = chunk.count(b"\n")
                if newlines >= room:  # the chunk up to the end of the room-th line
                    chunk = chunk[: _line_end(chunk, room)]
                    newlines = room
                room -= newlines
            if pos < HEAD_BYTES:  # invariant: head == file[:min(pos, HEAD_BYTES)]
                head += chunk[: HEAD_BYTES - pos]
            pos += len(chunk)
            cut = 0
            while True:
                nl = chunk.find(b"\n", cut)
                if nl != -1 and not held and not over and nl - cut <= cap:
                    # a whole line inside the chunk (the usual one): nothing held before it
                    line_no += 1
                    append(_new_line((line_no, offset, chunk[cut:nl])))
                    offset += nl - cut + 1
                    cut = nl + 1
                    continue
                piece = chunk[cut:] if nl == -1 else chunk[cut:nl]
                if over or held + len(piece) > cap:
                    if not over:
                        parts = [(b"".join(parts) + piece[:HEAD_KEPT])[:HEAD_KEPT]]
                        over = held
                    over += len(piece)
                else:
                    parts.append(piece)
                    held += len(piece)
                if nl == -1:
                    break
                raw: bytes = OversizedLine(parts[0], over) if over else b"".join(parts)
                length = over if over else len(raw)
                parts, held, over = [], 0, 0
                line_no += 1
                append(_new_line((line_no, offset, raw)))
                offset += length + 1
                cut = nl + 1
        self._line_no, self._offset = line_no, offset
        self._pending = b"".join(parts)
        self._over = over
        self._head = bytes(head)
        self._anchor = _anchor_after(self._anchor, lines)
        return tuple(lines), pos

    def _pending_len(self) -> int:
        """Bytes of the held partial line (an oversized one counts what was not kept)."""
        return self._over if self._over else len(self._pending)

    def _absent(self) -> TailBatch:
        """The path does not exist: report "deleted" once if the file was seen, keep the state."""
        if self._seen is None:
            return self._batch((), None, 0)
        self._seen = None
        return self._batch((), "deleted", 0)

    def _batch(self, lines: tuple[TailLine, ...], reset: ResetReason | None, size: int) -> TailBatch:
        """Wrap `lines` with the current offset and held partial line; `size` in bytes."""
        return TailBatch(lines, reset, self._pending_len(), size, self._offset)


def _line_end(chunk: bytes, n: int) -> int:
    """The index just past the `n`-th `\\n` of `chunk` (n >= 1; there are at least n): the
    least `end` with n newlines in chunk[:end], found by bisection (~20 `count` calls)."""
    low, high = n, len(chunk)  # chunk[:low] holds fewer than n newlines or low == end; chunk[:high] at least n
    while low < high:
        middle = (low + high) // 2
        if chunk.count(b"\n", 0, middle) >= n:
            high = middle
        else:
            low = middle + 1
    return low


def _same(seen: _Seen, st: os.stat_result) -> bool:
    """True when `st` shows the file exactly as last seen (identity, size in bytes, mtime in ns)."""
    return (
        (st.st_dev, st.st_ino) == seen.ident
        and st.st_size == seen.size
        and st.st_mtime_ns == seen.mtime_ns
    )


def _anchor_after(anchor: bytes, lines: list[TailLine]) -> bytes:
    """The last `ANCHOR_BYTES` of the file before the offset, after `lines` were read.

    `anchor` ends where the first of `lines` starts. Each line contributes at most its last
    `ANCHOR_BYTES` (enough for the suffix), so a long line or a long batch is not copied whole.
    """
    pieces = [anchor]
    for line in lines[-ANCHOR_BYTES:]:
        pieces += (line.raw[-ANCHOR_BYTES:], b"\n")
    return b"".join(pieces)[-ANCHOR_BYTES:]
