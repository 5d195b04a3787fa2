"""The overview index: one small SQLite file of derived summaries, so a home directory with
hundreds of session files is listed without re-reading them.

`<state dir>/overview.sqlite3` (state dir: `$DS4TUI_STATE_DIR`, else platformdirs'
`user_state_dir("ds4tui")`; the folder is made 0700 and the file 0600, design.md). One row per
session file: its agent, size (bytes), mtime (epoch seconds), the byte offset summarised, the
`SessionSummary` as a JSON array of its field values (`SessionSummary.to_row`; schema 2: 40%
smaller and faster to load than schema 1's JSON objects) and the settings it was made under
(`OverviewSettings.index_key`, schema 3): a row answers only under the same settings, so changing
`DS4TUI_CACHE_RETENTION` or `PI_CACHE_RETENTION` re-reads the files instead of showing the old
countdowns. The file carries a schema version (`PRAGMA user_version`); a file of
another version, or one SQLite cannot open, is deleted and rebuilt (it is derived data: deleting
it at any time only costs one re-read of every file).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Iterator

from ds4sessions.overview.summary import SessionSummary

def _summary_shape_version() -> int:
    """A number that changes whenever the stored summary's fields change (so an index written by
    another ds4tui version is rebuilt rather than misread)."""
    import dataclasses
    import zlib

    from ds4sessions.overview.summary import CacheClockInfo, UsageRow

    names = ",".join(f.name for cls in (SessionSummary, CacheClockInfo, UsageRow) for f in dataclasses.fields(cls))
    return zlib.crc32(names.encode()) & 0x7FFFFFFF


SCHEMA_VERSION = 3
"""The table layout's version; the stored `user_version` is this combined with the summary's
shape (`_summary_shape_version`)."""
DB_NAME = "overview.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL,
    offset INTEGER NOT NULL,
    summary TEXT NOT NULL,
    settings TEXT NOT NULL
);
"""


def _user_version() -> int:
    return (SCHEMA_VERSION * 1_000_003 + _summary_shape_version()) & 0x7FFFFFFF


def state_dir() -> Path:
    """ds4tui's state directory: `$DS4TUI_STATE_DIR`, else platformdirs `user_state_dir("ds4tui")`."""
    override = os.environ.get("DS4TUI_STATE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_state_dir("ds4tui"))


def default_index_path() -> Path:
    """`state_dir() / "overview.sqlite3"`."""
    return state_dir() / DB_NAME


class OverviewIndex:
    """The derived summaries of session files (thread-safe: one connection behind a lock).

    `path` defaults to `default_index_path()`. `rebuilt` is True when an existing file was
    discarded (other schema version or unreadable); `problem` then says why in one line.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_index_path()
        self.rebuilt = False
        self.problem: str | None = None
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(self.path.parent, 0o700)
        except OSError:
            pass
        self._db = self._open()

    def _connect(self) -> sqlite3.Connection:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(self.path, 0o600)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _open(self) -> sqlite3.Connection:
        try:
            db = self._connect()
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == _user_version() and "files" in tables:
                return db
            if version == 0 and not tables:
                db.executescript(_SCHEMA)
                db.execute(f"PRAGMA user_version={_user_version()}")
                return db
            db.close()
            self.problem = f"{self.path}: schema version {version}, expected {_user_version()}; rebuilt"
        except sqlite3.DatabaseError as exc:
            self.problem = f"{self.path}: unreadable ({exc}); rebuilt"
        self.rebuilt = True
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(str(self.path) + suffix)
            except FileNotFoundError:
                pass
        db = self._connect()
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version={_user_version()}")
        return db

    def load(self, settings: str = "") -> dict[str, tuple[int, float, SessionSummary]]:
        """Every summary stored under `settings` (`OverviewSettings.index_key`) by path: (size,
        mtime, summary); rows made under other settings are left out (their files are re-read).
        Rows that no longer parse are dropped (they will be re-read)."""
        out: dict[str, tuple[int, float, SessionSummary]] = {}
        bad: list[str] = []
        with self._lock:
            rows = self._db.execute("SELECT path, size, mtime, summary FROM files WHERE settings = ?", (settings,)).fetchall()
        for path, size, mtime, text in rows:
            try:
                out[path] = (size, mtime, SessionSummary.from_row(json.loads(text)))
            except (ValueError, KeyError, TypeError, IndexError):
                bad.append(path)
        if bad:
            self.forget(bad)
        return out

    def store(self, summaries: list[SessionSummary], settings: str = "") -> None:
        """Insert or replace the rows of `summaries`, made under `settings`
        (`OverviewSettings.index_key`), in one transaction."""
        if not summaries:
            return
        rows = [(s.path, s.agent, s.size, s.modified, s.offset, json.dumps(s.to_row(), separators=(",", ":")), settings)
                for s in summaries]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def forget(self, paths: list[str]) -> None:
        """Drop the rows of `paths` (files that disappeared)."""
        with self._lock:
            self._db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in paths])

    def paths(self) -> Iterator[str]:
        """Stored paths."""
        with self._lock:
            rows = self._db.execute("SELECT path FROM files").fetchall()
        return iter(r[0] for r in rows)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
