"""The one way ds4tui writes to a Pi session file: append-only, checked, journaled.

Rules (Pi session format §2, §4; bad input B03):

- Only appends. Never rewrites or truncates a byte: the file is opened `O_WRONLY | O_APPEND`
  (never `O_TRUNC`, never `O_CREAT`), the new lines go out in **one** `os.write()` of complete,
  `\\n`-terminated lines, then `os.fsync()`. Bytes before the old end stay identical.
- An entry's `parentId` is the file's current leaf (its last entry, read from the file just
  before writing), never a label's target and never a cached leaf (B03). Only re-branching
  entries (a `branch_summary` anchored at an earlier entry, an undo that moves the leaf back)
  name another parent, explicitly.
- Ids: 8 lowercase hex characters (the first 8 of a random UUID), unique within the file, as
  Pi's `generateId` (§4). Timestamps: ISO-8601 UTC with milliseconds and `Z`.
- JSON as `JSON.stringify` writes it (`ds4core.jsjson.stringify`: compact, keys in JavaScript
  order, no ASCII escaping).

Refusals (`WriteRefused`, nothing written): the file is not a v3 Pi session (no header, or a
v1/v2 file that Pi rewrites on open), its last line is partial, it changed since the state the
user acted on (`Expected`: size and leaf id), the agent is mid-turn (`agent_busy`), the file grew
in the last `quiet_seconds`, or a process holds it open (`open_holders`) when the action refuses
that (collapse, compaction). `force=True` overrides only the last three (busy, recent growth,
open file); it never overrides a partial line, a changed file or a non-session.

Every write is recorded in a `Journal` (SQLite under `state_dir()`), with what undoes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ds4core.jsjson import stringify
from platformdirs import user_state_dir

from ds4sessions.agents.pi.context import branch_path
from ds4sessions.agents.pi.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    CUSTOM_MESSAGE,
    MESSAGE,
    Entry,
)
from ds4sessions.agents.pi.reader import PiSession, PiSessionReader

QUIET_SECONDS = 3.0
"""A file modified less than this many seconds ago is taken as being written by a running agent."""

CONTEXT_ENTRY_TYPES = frozenset({MESSAGE, COMPACTION, BRANCH_SUMMARY, CUSTOM_MESSAGE})


class WriteRefused(Exception):
    """A write was refused and nothing was written. `code` names the check (`not_a_session`,
    `migrated`, `partial_last_line`, `changed`, `leaf_changed`, `busy`, `recent_growth`,
    `open_by_process`, `locked`, `unknown_entry`, `nothing_to_do`, `not_undoable`); `str(exc)` is
    a sentence for the user."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Expected:
    """The state the user acted on: file size in bytes and leaf id (None = do not check)."""

    size: int | None = None
    leaf_id: str | None = None


@dataclass(frozen=True)
class Holder:
    """A process that has the session file open: `pid` and its command name."""

    pid: int
    name: str


@dataclass(frozen=True)
class FileState:
    """A session file as read just before a write: `size` and `mtime` (Unix seconds) of the
    bytes read, the parsed `session` (whose `leaf_id` is the current leaf)."""

    path: Path
    size: int
    mtime: float
    session: PiSession

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: the id of the last entry in file order."""
        return self.session.leaf_id


@dataclass(frozen=True)
class WriteResult:
    """What one write appended: `entries` (as written), at byte `offset` (= old size), `length`
    bytes; `journal_id` is the journal row (None without a journal)."""

    path: Path
    offset: int
    length: int
    entries: tuple[dict[str, Any], ...]
    journal_id: int | None

    @property
    def entry_ids(self) -> list[str]:
        """The ids of the appended entries, in order."""
        return [e["id"] for e in self.entries]

    def describe(self) -> str:
        """One line for the status bar / CLI: what was written where."""
        kinds = ", ".join(f"{e['type']} {e['id']}" for e in self.entries)
        journal = f" (journal #{self.journal_id})" if self.journal_id is not None else ""
        return f"appended {kinds} to {self.path} at byte {self.offset} ({self.length} bytes){journal}"


def iso_now(now: float | None = None) -> str:
    """ISO-8601 UTC timestamp with milliseconds and `Z` (JavaScript `toISOString()`), for the
    Unix time `now` in seconds (default: the current time)."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_entry_id(taken: set[str] | Mapping[str, Any]) -> str:
    """A fresh entry id not in `taken`: the first 8 hex chars of a random UUID, or a whole UUID
    after 100 collisions (Pi's `generateId`, Pi session format §4)."""
    for _ in range(100):
        candidate = str(uuid.uuid4())[:8]
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())


def serialize_entry(entry: Mapping[str, Any]) -> bytes:
    """One JSONL line (UTF-8, `\\n`-terminated) as Pi's `JSON.stringify(entry) + "\\n"`."""
    text = stringify(dict(entry))
    if text is None:
        raise TypeError("entry is not JSON-shaped")
    return (text + "\n").encode("utf-8")


def read_state(path: str | Path) -> FileState:
    """Read the whole session file once (binary) and parse it; a torn last line stays unparsed
    (`session.diagnostics.pending`/`end_offset` < `size` shows it). Raises OSError."""
    path = Path(path)
    with path.open("rb") as f:
        st = os.fstat(f.fileno())
        data = f.read()
    return FileState(path, len(data), st.st_mtime, _parse(path, data))


def _parse(path: Path, data: bytes) -> PiSession:
    reader = PiSessionReader(path)
    complete = data[: data.rfind(b"\n") + 1]
    lines = []
    offset = 0
    for line_no, line in enumerate(complete.split(b"\n")[:-1], start=1):
        lines.append((line_no, offset, line))
        offset += len(line) + 1
    reader.feed(lines)
    reader.set_pending_tail(len(data) - len(complete))
    return reader


def agent_busy(session: PiSession) -> str | None:
    """Why the agent looks mid-turn, or None when the last turn is finished.

    Looks at the last message-bearing entry on the branch of the file's leaf: a `user` message
    (the model is answering), a `toolResult` (the model has not replied to it yet), or an
    assistant message that made tool calls or stopped with `toolUse` (results pending). An
    aborted or errored assistant message ends the turn.
    """
    for entry in reversed(branch_path(session)):
        if entry.type not in CONTEXT_ENTRY_TYPES:
            continue
        role = entry.role
        if role == "user":
            return f"the last message ({entry.id}) is a user prompt: the agent is answering it"
        if role == "toolResult":
            return f"the last message ({entry.id}) is a tool result the model has not answered yet"
        if role == "assistant":
            message = entry.message or {}
            if message.get("stopReason") in ("aborted", "error"):
                return None
            calls = [
                b.get("id") for b in message.get("content") or () if isinstance(b, dict) and b.get("type") == "toolCall"
            ]
            if calls or message.get("stopReason") == "toolUse":
                return f"the last message ({entry.id}) has tool call(s) without results: {', '.join(map(str, calls))}"
        return None
    return None


def open_holders(path: str | Path) -> list[Holder]:
    """Other processes that have `path` open (this process excluded).

    Linux: scans `/proc/<pid>/fd/*` links (processes we may not inspect are skipped). Elsewhere:
    `lsof -t -- path` when `lsof` exists, else an empty list. Note: Pi 1.6.0 opens the file only
    for each append (`appendFileSync`), so a running but idle Pi is usually not seen here; the
    recent-growth check covers an agent that is writing.
    """
    path = Path(path)
    me = os.getpid()
    proc = Path("/proc")
    if (proc / "self" / "fd").is_dir():
        try:
            target = os.stat(path)
        except OSError:
            return []
        key = (target.st_dev, target.st_ino)
        real = os.path.realpath(path)
        holders = []
        for pid_dir in proc.iterdir():
            if not pid_dir.name.isdigit() or int(pid_dir.name) == me:
                continue
            try:
                for fd in (pid_dir / "fd").iterdir():
                    link = os.readlink(fd)
                    if link != real and os.path.basename(link) != path.name:
                        continue
                    st = os.stat(fd)
                    if (st.st_dev, st.st_ino) == key:
                        holders.append(Holder(int(pid_dir.name), _comm(pid_dir)))
                        break
            except OSError:
                continue
        return holders
    lsof = shutil.which("lsof")
    if lsof is None:
        return []
    out = subprocess.run([lsof, "-t", "--", str(path)], capture_output=True, text=True, timeout=10, check=False).stdout
    return [Holder(int(p), "") for p in out.split() if p.isdigit() and int(p) != me]


def _comm(pid_dir: Path) -> str:
    try:
        return (pid_dir / "comm").read_text().strip()
    except OSError:
        return ""


def describe_holders(holders: Sequence[Holder]) -> str:
    """`"pid 123 (node), pid 456"` for messages."""
    return ", ".join(f"pid {h.pid}" + (f" ({h.name})" if h.name else "") for h in holders)


Draft = dict[str, Any]
"""An entry to append without `id`/`timestamp`: `{"type": ..., fields...}`. A `parentId` key
names an explicit parent (re-branching); without it the parent is the current leaf (or, for the
second entry of a batch, the entry appended before it)."""


def append_entries(
    path: str | Path,
    build: Callable[[FileState], Sequence[Draft]],
    *,
    action: str,
    expected: Expected | None = None,
    refuse_when_open: bool = False,
    force: bool = False,
    journal: Journal | None = None,
    undo: Callable[[FileState, list[dict[str, Any]]], dict[str, Any]] | None = None,
    undoes: int | None = None,
    quiet_seconds: float = QUIET_SECONDS,
    now: float | None = None,
) -> WriteResult:
    """Check the file, build the entries from its state, append them in one write, fsync, journal.

    - `build(state)` returns the drafts (see `Draft`), or raises `WriteRefused`;
    - `action`: journal name (`pin`, `unpin`, `collapse`, `compaction`, `undo`);
    - `expected`: the state the user acted on (size in bytes, leaf id);
    - `refuse_when_open`: refuse while another process holds the file open (collapse,
      compaction), unless `force`;
    - `undo(state, entries)` returns the journal's undo recipe (see `JournalRecord`);
    - `undoes`: the journal record this write undoes (marked undone);
    - `quiet_seconds`: a file modified more recently than this is refused unless `force` (or
      unless the file ends with ds4tui's own last journaled write);
    - `now`: Unix seconds for timestamps and the quiet check (tests).

    Raises `WriteRefused` (nothing written) or OSError (I/O). An advisory `flock` keeps two
    ds4tui writers apart (Pi takes no lock; its appends are `O_APPEND` too, so lines never mix).
    """
    path = Path(path)
    now = time.time() if now is None else now
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WriteRefused("locked", f"{path}: another ds4tui write is in progress") from None
        state = _state_for(fd, path)
        if journal is not None and journal.ends_with_our_write(path, state.size):
            quiet_seconds = 0.0  # the recent growth is our own last write
        check_writable(state, expected, refuse_when_open=refuse_when_open, force=force, quiet_seconds=quiet_seconds, now=now)
        drafts = build(state)
        if not drafts:
            raise WriteRefused("nothing_to_do", "nothing to write")
        entries = _materialize(state, drafts, now)
        data = b"".join(serialize_entry(e) for e in entries)
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes); the last line is partial")
        os.fsync(fd)
    finally:
        os.close(fd)
    journal_id = None
    if journal is not None:
        journal_id = journal.record(
            path=path, action=action, offset=state.size, length=len(data), leaf_before=state.leaf_id,
            entries=entries, undo=undo(state, entries) if undo else None, time_iso=iso_now(now), undoes=undoes,
        )
    return WriteResult(path, state.size, len(data), tuple(entries), journal_id)


def _state_for(fd: int, path: Path) -> FileState:
    """Read the file the descriptor `fd` points at (same inode), up to its current size."""
    st = os.fstat(fd)
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_ino != st.st_ino:
            raise WriteRefused("changed", f"{path} was replaced while opening it")
        data = f.read(st.st_size)
    return FileState(path, len(data), st.st_mtime, _parse(path, data))


def check_writable(
    state: FileState,
    expected: Expected | None = None,
    *,
    refuse_when_open: bool = False,
    force: bool = False,
    quiet_seconds: float = QUIET_SECONDS,
    now: float | None = None,
) -> None:
    """Raise `WriteRefused` when `append_entries` would refuse to write to `state` (see the module
    docstring); used before a costly step (a summary request) and again at the write."""
    now = time.time() if now is None else now
    session, path = state.session, state.path
    if session.status != "session":
        raise WriteRefused("not_a_session", f"{path} is not a Pi session (no valid header); ds4tui never writes to it")
    if session.migrated:
        raise WriteRefused(
            "migrated",
            f"{path} is a version-{session.version:g} session; Pi rewrites it (with new random ids) when it "
            "opens it, so ds4tui does not append to it",
        )
    if state.size != session.end_offset:
        raise WriteRefused(
            "partial_last_line",
            f"{path} ends with a partial line ({state.size - session.end_offset} bytes without a newline): "
            "a writer was interrupted or is still writing",
        )
    if expected is not None and expected.size is not None and expected.size != state.size:
        raise WriteRefused(
            "changed", f"{path} changed since you looked at it ({expected.size} → {state.size} bytes); look again"
        )
    if expected is not None and expected.leaf_id is not None and expected.leaf_id != state.leaf_id:
        raise WriteRefused(
            "leaf_changed", f"{path}: the leaf moved since you looked at it ({expected.leaf_id} → {state.leaf_id})"
        )
    if force:
        return
    busy = agent_busy(session)
    if busy:
        raise WriteRefused("busy", f"the agent is mid-turn: {busy}; wait until the turn ends (or force)")
    age = now - state.mtime
    if 0 <= age < quiet_seconds:
        raise WriteRefused(
            "recent_growth",
            f"{path} was written {age:.1f} s ago; an agent may be working (wait {quiet_seconds:g} s or force)",
        )
    if refuse_when_open:
        holders = open_holders(path)
        if holders:
            raise WriteRefused(
                "open_by_process",
                f"{path} is open in {describe_holders(holders)}: a running agent keeps its own copy of the "
                "session and would not see this change (close it, or force)",
            )


def _materialize(state: FileState, drafts: Sequence[Draft], now: float) -> list[dict[str, Any]]:
    by_id = state.session.by_id
    taken: set[str] = set(by_id)
    parent = state.leaf_id
    entries = []
    stamp = iso_now(now)
    for draft in drafts:
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        explicit = "parentId" in draft
        parent_id = draft["parentId"] if explicit else parent
        if parent_id is not None and parent_id not in taken:
            raise WriteRefused("unknown_entry", f"parent entry {parent_id} is not in {state.path}")
        fields = {k: v for k, v in draft.items() if k not in ("type", "parentId")}
        entries.append({"type": draft["type"], "id": entry_id, "parentId": parent_id, "timestamp": stamp, **fields})
        parent = entry_id
    return entries


# --------------------------------------------------------------------------------------------
# Journal


def state_dir() -> Path:
    """ds4tui's state folder: `$DS4TUI_STATE_DIR`, else platformdirs' `user_state_dir("ds4tui")`."""
    env = os.environ.get("DS4TUI_STATE_DIR")
    return Path(env).expanduser() if env else Path(user_state_dir("ds4tui"))


@dataclass(frozen=True)
class JournalRecord:
    """One journaled write. `undo` is the recipe that reverses it:

    - `{"kind": "label", "targetId": id, "label": text | None}`: append a label entry giving the
      target its previous label (None = a cleared label);
    - `{"kind": "leaf", "leafId": id}`: append a no-op `custom` entry (customType
      `ds4tui.undo`, never in context) whose parent is `leafId`, the leaf before the write, so the
      branch Pi loads is the one before the write again (re-branching, Pi session format §4);
    - None: not undoable.

    `undoes` is the record this one undid; `undone_by` the record that undid this one.
    """

    id: int
    time: str
    path: Path
    action: str
    offset: int
    length: int
    leaf_before: str | None
    entry_ids: tuple[str, ...]
    entries: tuple[dict[str, Any], ...]
    undo: dict[str, Any] | None
    undoes: int | None
    undone_by: int | None

    def describe(self) -> str:
        """One line: `#3 2026-… pin label 1a2b3c4d → a5eb5dae  (undone by #4)`."""
        what = ", ".join(f"{e.get('type')} {e.get('id')}" for e in self.entries)
        target = self.entries[0].get("targetId") if self.entries else None
        extra = f" → {target}" if target else ""
        state = f"  (undone by #{self.undone_by})" if self.undone_by else ""
        undoes = f"  (undoes #{self.undoes})" if self.undoes else ""
        return f"#{self.id} {self.time} {self.action}: {what}{extra} in {self.path}{undoes}{state}"


class Journal:
    """SQLite journal of every write (`<state_dir>/journal.sqlite`). Stores no secrets, only the
    appended entries, where they went, and how to undo them."""

    def __init__(self, path: str | Path | None = None) -> None:
        """Open (create) the journal at `path` (default `state_dir()/journal.sqlite`)."""
        self.path = Path(path) if path is not None else state_dir() / "journal.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, "
                "path TEXT NOT NULL, action TEXT NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL, "
                "leaf_before TEXT, entries TEXT NOT NULL, undo TEXT, undoes INTEGER, undone_by INTEGER)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def record(
        self, *, path: Path, action: str, offset: int, length: int, leaf_before: str | None,
        entries: Sequence[dict[str, Any]], undo: dict[str, Any] | None, time_iso: str, undoes: int | None = None,
    ) -> int:
        """Add a write; returns its id. When `undoes` is set, marks that record as undone."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO writes (time, path, action, offset, length, leaf_before, entries, undo, undoes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (time_iso, str(Path(path).resolve()), action, offset, length, leaf_before,
                 json.dumps(list(entries)), json.dumps(undo) if undo is not None else None, undoes),
            )
            new_id = int(cur.lastrowid or 0)
            if undoes is not None:
                db.execute("UPDATE writes SET undone_by = ? WHERE id = ?", (new_id, undoes))
        return new_id

    def ends_with_our_write(self, path: str | Path, size: int) -> bool:
        """True when the latest journaled write to `path` ended at byte `size` (the file's tail is ours)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT offset + length FROM writes WHERE path = ? ORDER BY id DESC LIMIT 1", (str(Path(path).resolve()),)
            ).fetchone()
        return row is not None and row[0] == size

    def get(self, record_id: int) -> JournalRecord | None:
        """The record `record_id`, or None."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM writes WHERE id = ?", (record_id,)).fetchone()
        return _record(row) if row else None

    def list(self, path: str | Path | None = None) -> list[JournalRecord]:
        """All records, oldest first; only those of `path` when given."""
        with self._connect() as db:
            if path is None:
                rows = db.execute("SELECT * FROM writes ORDER BY id").fetchall()
            else:
                rows = db.execute(
                    "SELECT * FROM writes WHERE path = ? ORDER BY id", (str(Path(path).resolve()),)
                ).fetchall()
        return [_record(r) for r in rows]


def _record(row: tuple[Any, ...]) -> JournalRecord:
    rid, time_iso, path, action, offset, length, leaf_before, entries, undo, undoes, undone_by = row
    parsed = tuple(json.loads(entries))
    return JournalRecord(
        id=rid, time=time_iso, path=Path(path), action=action, offset=offset, length=length,
        leaf_before=leaf_before, entry_ids=tuple(e.get("id") for e in parsed), entries=parsed,
        undo=json.loads(undo) if undo else None, undoes=undoes, undone_by=undone_by,
    )


def entries_after(session: PiSession, entry_id: str) -> list[Entry] | None:
    """The entries after `entry_id` on the branch of the current leaf, or None when `entry_id` is
    not on that branch."""
    path = branch_path(session)
    for index, entry in enumerate(path):
        if entry.id == entry_id:
            return path[index + 1 :]
    return None
