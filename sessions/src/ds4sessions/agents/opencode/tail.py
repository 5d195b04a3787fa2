"""Follow one OpenCode session in its database: the tailer of a session that is not a file.

`OpenCodeTail(handle).poll()` has the interface of `ds4sessions.ingest.tailer.Tailer.poll` (a
`TailBatch` of lines, a `reset` when the consumer must start again), so the generic live session
(`ingest.conversation.ConversationLive`) and the overview read an OpenCode session exactly as
they read a file. Its "lines" are the session's rows, one per line (private to this plug-in,
read by `reader.OpenCodeReader`):

    S\\t<session row as JSON>
    M\\t<message id>\\t<time_updated>\\t<message data JSON>
    P\\t<message id>\\t<part id>\\t<time_updated>\\t<part data JSON>
    -M\\t<message id>                       (the message and its parts are gone)
    -P\\t<message id>\\t<part id>            (the part is gone)
    !\\t<why the database cannot be read now, or nothing once it can again>

A poll opens the database read-only (`store.connect`), reads in one transaction, and closes it:

- first poll: the session row, every message and part row (a consistent snapshot), and the head
  of the session's event log (`event_sequence.seq`);
- then: only when the head moved, the events after the last one read (`seq > n`, indexed); each
  names the rows it changed (`message.updated.1`, `message.part.updated.1`, `…removed.1`,
  `session.updated.1`), and those rows are read again by id: an update costs the new rows only;
- a gap in the log (events pruned), a head that went back (a rewritten log), a replaced
  database file: a reset and a full read; the session's row gone: a "deleted" reset (the view
  keeps its last state); a database without an event log: a full read whenever its files or
  the session's rows changed;
- a database that is locked, corrupt or gone after the first read: a `!` line (shown as a
  problem until a read succeeds again) and the last state kept; before any read, the error.

`size` (and `offset`) is the session's size: the characters of its message and part JSON
(`store.session_sizes`'s `chars`, kept exact from the rows read); `modified()` the newest
`time_updated` (seconds). `handle_stat` in `agent.py` computes the same two from the database.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterator

from ds4sessions.agents.opencode import store
from ds4sessions.agents.opencode.handle import split_handle
from ds4sessions.ingest.tailer import TailBatch, TailLine

try:
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _loads = json.loads

_ROWS = {"message.updated", "message.removed", "message.part.updated", "message.part.removed"}


def _event_name(kind: str) -> str:
    """`message.part.updated.1` → `message.part.updated` (the version suffix dropped)."""
    head, _, version = kind.rpartition(".")
    return head if version.isdigit() else kind


class OpenCodeTail:
    """The rows of one OpenCode session, new ones per poll (module doc). `path` is the handle.
    Not thread-safe (one consumer thread at a time). Raises ValueError for a path that is not a
    handle."""

    def __init__(self, path: Path) -> None:
        parsed = split_handle(path)
        if parsed is None:
            raise ValueError(f"{path}: not an OpenCode session handle (PATH/opencode.db#ses_…)")
        self.path = Path(path)
        self.db, self.session_id = parsed
        self._loaded = False
        self._deleted = False
        self._seq: int | None = None
        self._ident: tuple[int, int] | None = None
        self._signature: tuple[Any, ...] | None = None
        self._rows: dict[str, tuple[int, int]] = {}  # row id → (chars, time_updated ms)
        self._by_message: dict[str, set[str]] = {}  # message id → its part ids
        self._session_updated = 0
        self._size = 0
        self._line_no = 0
        self._problem: str | None = None

    # --- the Tailer interface ----------------------------------------------------------------

    def polls(self, limit: int | None = None) -> Iterator[TailBatch]:
        """One `poll()` (a session is read whole: `limit` does not apply)."""
        yield self.poll()

    def poll(self, limit: int | None = None) -> TailBatch:
        """The rows changed since the last poll (module doc). Raises FileNotFoundError or
        `store.OpenCodeDbError` when the first read fails; later failures become a `!` line."""
        first = not self._loaded
        try:
            conn = store.connect(self.db, store.FIRST_TIMEOUT_S if first else store.POLL_TIMEOUT_S)
        except FileNotFoundError:
            if first:
                raise
            return self._gone()
        except OSError as error:
            if first:
                raise
            return self._trouble(f"{error.filename}: {error.strerror}")
        try:
            with store.ReadTransaction(conn):
                return self._read(conn, first)
        except sqlite3.Error as error:
            problem = store.why(self.db, error)
            if first:
                raise problem from None
            return self._trouble(f"{problem.filename}: {problem.strerror}")
        except OSError as error:  # (the file vanished between the open and the read)
            if first:
                raise
            return self._trouble(f"{error.filename or self.db}: {error.strerror or error}")
        finally:
            conn.close()

    def pending_line(self) -> TailLine | None:
        """None: rows are whole (nothing is ever held back)."""
        return None

    def modified(self) -> float:
        """The newest `time_updated` of the session and its rows read, in Unix seconds."""
        newest = max((t for _, t in self._rows.values()), default=0)
        return max(newest, self._session_updated) / 1000.0

    # --- reading -----------------------------------------------------------------------------

    def _read(self, conn: sqlite3.Connection, first: bool) -> TailBatch:
        session = store.session_row(conn, self.session_id)
        if session is None:
            if first:
                raise store.OpenCodeDbError(self.db, f"no session {self.session_id} in this database "
                                                     "(`ds4tui sessions` lists them)", errno.ENOENT)
            return self._gone()
        st = os.stat(self.db)
        ident = (st.st_dev, st.st_ino)
        head = store.head_seq(conn, self.session_id)
        if first:
            return self._full(conn, session, head, ident, None)
        if self._deleted:
            return self._full(conn, session, head, ident, "appeared")
        if ident != self._ident:
            return self._full(conn, session, head, ident, "replaced")
        if head is None or self._seq is None:  # no event log: read again when anything changed
            signature = self._signature_of(conn, session)
            if signature == self._signature:
                return self._quiet()
            return self._full(conn, session, head, ident, "rewritten")
        if head == self._seq:
            return self._quiet()
        if head < self._seq:
            return self._full(conn, session, head, ident, "rewritten")
        events = store.events_after(conn, self.session_id, self._seq)
        if not events or int(events[0]["seq"]) != self._seq + 1:
            return self._full(conn, session, head, ident, "rewritten")  # a gap: the log was pruned
        return self._apply(conn, session, events)

    def _signature_of(self, conn: sqlite3.Connection, session: dict[str, Any]) -> tuple[Any, ...]:
        sizes = store.session_sizes(conn, self.session_id)
        row = sizes[0] if sizes else None
        return (session.get("time_updated"), row["chars"] if row else 0, row["updated"] if row else 0,
                row["messages"] if row else 0)

    def _full(self, conn: sqlite3.Connection, session: dict[str, Any], head: int | None, ident: tuple[int, int],
              reset: str | None) -> TailBatch:
        self._rows.clear()
        self._by_message.clear()
        self._size = 0
        self._line_no = 0
        self._seq = head
        self._ident = ident
        self._deleted = False
        lines = [self._session_line(session)]
        for row in store.messages(conn, self.session_id):
            lines.append(self._message_line(row))
        for row in store.parts(conn, self.session_id):
            lines.append(self._part_line(row))
        if head is None:
            self._signature = self._signature_of(conn, session)
        self._loaded = True
        if self._problem is not None:
            self._problem = None
            lines.append(b"!\t")
        return self._batch(lines, reset)  # type: ignore[arg-type]

    def _apply(self, conn: sqlite3.Connection, session: dict[str, Any], events: list[sqlite3.Row]) -> TailBatch:
        touched_messages: dict[str, None] = {}
        touched_parts: dict[str, str] = {}  # part id → message id
        session_changed = False
        for event in events:
            name = _event_name(str(event["type"]))
            if name in _ROWS:
                try:
                    data = _loads(event["data"])
                except (ValueError, RecursionError):
                    data = None
                if not isinstance(data, dict):  # it names no row: read the session again in full
                    return self._full(conn, session, store.head_seq(conn, self.session_id), self._ident or (0, 0),
                                      "rewritten")
                if name == "message.updated" or name == "message.removed":
                    info = data.get("info")
                    mid = info.get("id") if isinstance(info, dict) else data.get("messageID")
                    if isinstance(mid, str):
                        touched_messages[mid] = None
                else:
                    part = data.get("part")
                    pid = part.get("id") if isinstance(part, dict) else data.get("partID")
                    mid = part.get("messageID") if isinstance(part, dict) else data.get("messageID")
                    if isinstance(pid, str):
                        touched_parts[pid] = mid if isinstance(mid, str) else ""
            else:  # session.created/updated/deleted and anything newer: the session row is read again
                session_changed = True
        self._seq = int(events[-1]["seq"])
        lines: list[bytes] = []
        if session_changed or session.get("time_updated") != self._session_updated:
            lines.append(self._session_line(session))
        found = {row["id"]: row for row in store.messages_by_id(conn, self.session_id, touched_messages)}
        for mid in touched_messages:
            row = found.get(mid)
            if row is not None:
                lines.append(self._message_line(row))
            elif mid in self._rows:
                lines.append(self._drop_message(mid))
        found = {row["id"]: row for row in store.parts_by_id(conn, self.session_id, touched_parts)}
        for pid, mid in touched_parts.items():
            row = found.get(pid)
            if row is not None:
                lines.append(self._part_line(row))
            elif pid in self._rows:
                owner = mid or next((m for m, ids in self._by_message.items() if pid in ids), "")
                lines.append(self._drop_part(owner, pid))
        if self._problem is not None:
            self._problem = None
            lines.append(b"!\t")
        return self._batch(lines, None)

    # --- lines -------------------------------------------------------------------------------

    def _session_line(self, session: dict[str, Any]) -> bytes:
        updated = session.get("time_updated")
        self._session_updated = updated if isinstance(updated, int) else 0
        return b"S\t" + json.dumps(session, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")

    def _keep(self, rid: str, chars: int | None, updated: Any) -> None:
        old = self._rows.get(rid)
        if old is not None:
            self._size -= old[0]
        chars = int(chars or 0)
        self._rows[rid] = (chars, updated if isinstance(updated, int) else 0)
        self._size += chars

    def _message_line(self, row: sqlite3.Row) -> bytes:
        mid = str(row["id"])
        self._keep(mid, row["chars"], row["time_updated"])
        self._by_message.setdefault(mid, set())
        return b"M\t" + mid.encode() + b"\t" + str(row["time_updated"]).encode() + b"\t" + bytes(row["data"] or b"")

    def _part_line(self, row: sqlite3.Row) -> bytes:
        pid, mid = str(row["id"]), str(row["message_id"])
        self._keep(pid, row["chars"], row["time_updated"])
        self._by_message.setdefault(mid, set()).add(pid)
        return (b"P\t" + mid.encode() + b"\t" + pid.encode() + b"\t" + str(row["time_updated"]).encode() + b"\t"
                + bytes(row["data"] or b""))

    def _drop_message(self, mid: str) -> bytes:
        for rid in (mid, *self._by_message.pop(mid, ())):
            old = self._rows.pop(rid, None)
            if old is not None:
                self._size -= old[0]
        return b"-M\t" + mid.encode()

    def _drop_part(self, mid: str, pid: str) -> bytes:
        old = self._rows.pop(pid, None)
        if old is not None:
            self._size -= old[0]
        self._by_message.get(mid, set()).discard(pid)
        return b"-P\t" + mid.encode() + b"\t" + pid.encode()

    def _batch(self, raw: list[bytes], reset: str | None) -> TailBatch:
        lines = []
        for item in raw:
            self._line_no += 1
            lines.append(TailLine(self._line_no, 0, item))
        return TailBatch(tuple(lines), reset, 0, self._size, self._size)  # type: ignore[arg-type]

    def _quiet(self) -> TailBatch:
        if self._problem is not None:
            self._problem = None
            return self._batch([b"!\t"], None)
        return self._batch([], None)

    def _gone(self) -> TailBatch:
        if self._deleted:
            return self._batch([], None)
        self._deleted = True
        return TailBatch((), "deleted", 0, self._size, self._size)

    def _trouble(self, text: str) -> TailBatch:
        """A poll that could not read: one `!` line when the problem is new, else nothing."""
        if text == self._problem:
            return self._batch([], None)
        self._problem = text
        return self._batch([b"!\t" + " ".join(text.split()).encode("utf-8", "replace")], None)
