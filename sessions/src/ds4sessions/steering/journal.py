"""The journal of ds4tui's writes to session files (SQLite, `<state_dir>/journal.sqlite`, 0600).

Write-ahead: `Journal.begin()` records the intent (the file, its identity, the byte offset, the
exact bytes and their SHA-256, how to undo it) **before** the write; the writer writes only when
that succeeded, then `Journal.finish()` records where the bytes really landed (status `done`) or
`Journal.abandon()` that nothing was written. A record left `pending` (a crash between the write
and `finish`) still names the bytes, so `undo` can check whether they are in the file.

Errors a user can cause (an unwritable state dir, a read-only or corrupt journal) raise
`JournalError` with one sentence and, for a corrupt file, the way out (`ds4tui journal reset`,
which moves the file aside: `Journal.reset()`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_state_dir

from ds4core.jsjson import stringify
from ds4sessions.safety import UnsafeDir, private_dir, private_file

SCHEMA_VERSION = 2
"""1: the first journal (no status); 2: write-ahead (`status`, `sha256`, `dev`, `ino`)."""


def serialize_entry(entry: Mapping[str, Any]) -> bytes:
    """One JSONL line (UTF-8, `\\n`-terminated) as Pi's `JSON.stringify(entry) + "\\n"`."""
    text = stringify(dict(entry))
    if text is None:
        raise TypeError("entry is not JSON-shaped")
    return (text + "\n").encode("utf-8")


class JournalError(Exception):
    """The journal cannot be used (unwritable state dir, read-only or corrupt database).
    `str(exc)` is one sentence for the user; `corrupt` is True when `ds4tui journal reset`
    is the way out."""

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


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

    `undoes` is the record this one undid; `undone_by` the record that undid this one. `status`:
    `pending` (intent recorded, write not confirmed), `done`, `abandoned` (nothing written).
    `sha256` is the hash of the bytes written at `offset` (`length` bytes); `dev`/`ino` the
    file's identity at the write (None in version-1 records).
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
    status: str = "done"
    sha256: str | None = None
    dev: int | None = None
    ino: int | None = None
    note: str | None = None

    def describe(self) -> str:
        """One line: `#3 2026-… pin label 1a2b3c4d → a5eb5dae  (undone by #4)`."""
        what = ", ".join(f"{e.get('type')} {e.get('id')}" for e in self.entries)
        target = self.entries[0].get("targetId") if self.entries else None
        extra = f" → {target}" if target else ""
        state = f"  (undone by #{self.undone_by})" if self.undone_by else ""
        undoes = f"  (undoes #{self.undoes})" if self.undoes else ""
        status = "" if self.status == "done" else f"  [{self.status}]"
        note = f"  ({self.note})" if self.note else ""
        return f"#{self.id} {self.time} {self.action}: {what}{extra} in {self.path}{undoes}{state}{status}{note}"


_COLUMNS = (
    "id, time, path, action, offset, length, leaf_before, entries, undo, undoes, undone_by, status, sha256, dev, ino, note"
)


class Journal:
    """SQLite journal of every write (`<state_dir>/journal.sqlite`, folder 0700, file 0600).
    Stores the appended entries (which may hold a collapse or compaction summary), where they
    went, and how to undo them. Raises `JournalError` for an unusable journal."""

    def __init__(self, path: str | Path | None = None) -> None:
        """Open (create) the journal at `path` (default `state_dir()/journal.sqlite`)."""
        self.path = Path(path) if path is not None else state_dir() / "journal.sqlite"
        try:
            private_dir(self.path.parent)
            if self.path.is_symlink():
                raise JournalError(
                    f"the journal {self.path} is a symbolic link, not ds4tui's file (someone may have replaced it); "
                    "move it aside with `ds4tui journal reset` (nothing was written)", corrupt=True,
                )
            private_file(self.path)
        except UnsafeDir as err:
            raise JournalError(f"{err} (nothing was written)") from None
        except OSError as err:
            raise JournalError(f"cannot create the journal {self.path}: {err.strerror or err}") from None
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")  # one fsync per record: the intent is cheap to journal
            db.execute(
                "CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, "
                "path TEXT NOT NULL, action TEXT NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL, "
                "leaf_before TEXT, entries TEXT NOT NULL, undo TEXT, undoes INTEGER, undone_by INTEGER)"
            )
            have = {row[1] for row in db.execute("PRAGMA table_info(writes)")}
            for column, kind in (("status", "TEXT NOT NULL DEFAULT 'done'"), ("sha256", "TEXT"), ("dev", "INTEGER"),
                                 ("ino", "INTEGER"), ("note", "TEXT")):
                if column not in have:
                    db.execute(f"ALTER TABLE writes ADD COLUMN {column} {kind}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _connect(self) -> _Connection:
        return _Connection(self.path)

    # --- write-ahead --------------------------------------------------------------------------

    def begin(
        self, *, path: Path, action: str, offset: int, data: bytes, leaf_before: str | None,
        entries: Sequence[dict[str, Any]], undo: dict[str, Any] | None, time_iso: str, undoes: int | None = None,
        dev: int | None = None, ino: int | None = None,
    ) -> int:
        """Record the intent to write `data` at byte `offset` of `path` (status `pending`); returns
        the record id. Raises `JournalError` (then the caller must not write)."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO writes (time, path, action, offset, length, leaf_before, entries, undo, undoes, status, "
                "sha256, dev, ino) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
                (time_iso, str(Path(path).resolve()), action, offset, len(data), leaf_before, json.dumps(list(entries)),
                 json.dumps(undo) if undo is not None else None, undoes, hashlib.sha256(data).hexdigest(), dev, ino),
            )
            return int(cur.lastrowid or 0)

    def finish(self, record_id: int, *, offset: int, note: str | None = None) -> None:
        """The write of `record_id` landed at byte `offset`: status `done` (and, when it undid a
        record, that one is marked undone). Raises `JournalError`."""
        with self._connect() as db:
            db.execute("UPDATE writes SET status = 'done', offset = ?, note = ? WHERE id = ?", (offset, note, record_id))
            row = db.execute("SELECT undoes FROM writes WHERE id = ?", (record_id,)).fetchone()
            if row and row[0] is not None:
                db.execute("UPDATE writes SET undone_by = ? WHERE id = ?", (record_id, row[0]))

    def abandon(self, record_id: int, reason: str) -> None:
        """Nothing was written for `record_id` (status `abandoned`, with the reason)."""
        with self._connect() as db:
            db.execute("UPDATE writes SET status = 'abandoned', note = ? WHERE id = ?", (reason, record_id))

    def record(
        self, *, path: Path, action: str, offset: int, length: int, leaf_before: str | None,
        entries: Sequence[dict[str, Any]], undo: dict[str, Any] | None, time_iso: str, undoes: int | None = None,
    ) -> int:
        """Add a finished write in one step (older callers); returns its id."""

        data = b"".join(serialize_entry(e) for e in entries)
        record_id = self.begin(path=path, action=action, offset=offset, data=data, leaf_before=leaf_before,
                               entries=entries, undo=undo, time_iso=time_iso, undoes=undoes)
        self.finish(record_id, offset=offset)
        return record_id

    # --- queries --------------------------------------------------------------------------------

    def ends_with_our_write(self, path: str | Path, size: int) -> bool:
        """True when the latest finished journaled write to `path` ended at byte `size` (the
        file's tail is ours)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT offset + length FROM writes WHERE path = ? AND status = 'done' ORDER BY id DESC LIMIT 1",
                (str(Path(path).resolve()),),
            ).fetchone()
        return row is not None and row[0] == size

    def get(self, record_id: int) -> JournalRecord | None:
        """The record `record_id`, or None."""
        with self._connect() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM writes WHERE id = ?", (record_id,)).fetchone()
        return _record(row) if row else None

    def list(self, path: str | Path | None = None) -> list[JournalRecord]:
        """All records except abandoned intents, oldest first; only those of `path` when given."""
        with self._connect() as db:
            if path is None:
                rows = db.execute(f"SELECT {_COLUMNS} FROM writes WHERE status != 'abandoned' ORDER BY id").fetchall()
            else:
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM writes WHERE path = ? AND status != 'abandoned' ORDER BY id",
                    (str(Path(path).resolve()),),
                ).fetchall()
        return [_record(r) for r in rows]

    @staticmethod
    def reset(path: str | Path | None = None, now: float | None = None) -> Path | None:
        """Move the journal (and its `-wal`/`-shm`/`-journal` files) aside to
        `journal.sqlite.broken-<UTC time>`; returns the new name, or None when there was none.
        The next `Journal()` starts empty. Raises OSError."""
        path = Path(path) if path is not None else state_dir() / "journal.sqlite"
        if not path.exists() and not path.is_symlink():
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        target = path.with_name(f"{path.name}.broken-{stamp}")
        for suffix in ("-wal", "-shm", "-journal"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
        os.replace(path, target)
        return target


class _Connection:
    """A SQLite connection for one transaction (`with`), turning sqlite3 errors into `JournalError`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db = sqlite3.connect(self.path, timeout=10)
            self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across a crash of ds4tui, cheap
            self.db.__enter__()
        except sqlite3.Error as err:
            raise _journal_error(self.path, err) from None
        return self.db

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        assert self.db is not None
        try:
            self.db.__exit__(kind, exc, tb)
        except sqlite3.Error as err:
            raise _journal_error(self.path, err) from None
        finally:
            self.db.close()
        if isinstance(exc, sqlite3.Error):
            raise _journal_error(self.path, exc) from None
        return False


def _journal_error(path: Path, err: sqlite3.Error) -> JournalError:
    text = str(err)
    if isinstance(err, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text or "corrupt" in text):
        return JournalError(
            f"the journal {path} is corrupt ({text}); move it aside with `ds4tui journal reset` (nothing was written)",
            corrupt=True,
        )
    if "readonly" in text or "read-only" in text:
        return JournalError(f"the journal {path} is read-only ({text}); nothing was written")
    if "unable to open" in text:
        return JournalError(f"cannot open the journal {path} ({text}); check the state dir's permissions")
    name = getattr(err, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or "disk is full" in text or "disk I/O error" in text:
        full = " (its disk is full)" if _disk_full(path.parent) else ""
        return JournalError(f"the journal {path} cannot be written ({text}){full}; nothing was written")
    return JournalError(f"journal {path}: {text}")


def _disk_full(folder: Path) -> bool:
    """True when the file system of `folder` has no block left for this user (`statvfs`)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 16 * 4096


def _record(row: tuple[Any, ...]) -> JournalRecord:
    rid, time_iso, path, action, offset, length, leaf_before, entries, undo, undoes, undone_by, status, sha, dev, ino, note = row
    try:
        parsed = tuple(e for e in json.loads(entries) if isinstance(e, dict))
        recipe = json.loads(undo) if undo else None
    except (ValueError, TypeError) as err:
        raise JournalError(f"journal record #{rid} is damaged ({err}); move the journal aside with `ds4tui journal reset`",
                           corrupt=True) from None
    return JournalRecord(
        id=rid, time=time_iso, path=Path(path), action=action, offset=offset, length=length,
        leaf_before=leaf_before, entry_ids=tuple(e.get("id") for e in parsed), entries=parsed,
        undo=recipe if isinstance(recipe, dict) else None, undoes=undoes, undone_by=undone_by, status=status or "done",
        sha256=sha, dev=dev, ino=ino, note=note,
    )
