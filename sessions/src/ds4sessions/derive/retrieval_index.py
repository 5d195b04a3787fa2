"""The retrieval index: a derived SQLite database of session entries for DS4-style retrieval.

One file, `retrieval.sqlite3`, in the user's state directory (platformdirs
`user_state_dir("ds4tui")`, or `$DS4TUI_STATE_DIR`). It is never authoritative: it is rebuilt
from the session files whenever it is missing, unreadable or of another schema version, and it is
safe to delete at any time.

Contents (schema version `SCHEMA_VERSION`, kept in `PRAGMA user_version`):
- `sessions`: one row per (session file path, session id), with the checkpoint of the last indexed
  entry (its id, byte offset and the byte offset just past it);
- `entries`: every entry of the file (all branches), with DS4's searchable text, role, created-at
  time (ms) and chars-v1 token estimate (`ds4core.retrieval.indexed_text`);
- `entries_fts`: FTS5 over the text with DS4's tokenizer (`unicode61 remove_diacritics 2`), for
  the ranked full-text search (bm25);
- `entries_tri`: FTS5 `trigram case_sensitive 1` over the same text, which answers DS4's exact
  (case-sensitive substring, `instr`) search without scanning every row.

Both FTS tables are external-content tables over `entries` (the text is stored once).

`sync(session)` indexes only the entries past the checkpoint (O(new entries)); when the file no
longer matches the checkpoint (rewritten, truncated, replaced) that session is re-indexed.
The database is written with `synchronous=OFF` in WAL mode: a crash can at worst lose or corrupt
derived data, which the next open detects and rebuilds.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ds4sessions.safety import private_dir, private_file, remove_non_files
from ds4core.retrieval import SearchHit, indexed_text, parse_timestamp_ms

from ds4sessions.agents.pi.entries import Entry
from ds4sessions.agents.pi.reader import PiSession

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "RetrievalIndex",
    "SessionSearch",
    "SyncResult",
    "default_db_path",
    "state_dir",
]

SCHEMA_VERSION = 1
"""Bumped whenever the schema or the indexed text changes; a mismatch rebuilds the file."""
DB_NAME = "retrieval.sqlite3"

_SCHEMA = """
CREATE TABLE sessions (
    session_key INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    session_id TEXT NOT NULL,
    indexed_offset INTEGER NOT NULL DEFAULT 0,
    indexed_entries INTEGER NOT NULL DEFAULT 0,
    last_entry_id TEXT,
    last_entry_offset INTEGER,
    indexed_at REAL NOT NULL DEFAULT 0,
    UNIQUE (path, session_id)
);
CREATE TABLE entries (
    rowid INTEGER PRIMARY KEY,
    session_key INTEGER NOT NULL REFERENCES sessions(session_key) ON DELETE CASCADE,
    entry_id TEXT NOT NULL,
    parent_id TEXT,
    entry_type TEXT NOT NULL,
    role TEXT,
    created_at INTEGER,
    line_no INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    token_estimate INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (session_key, entry_id)
);
CREATE INDEX entries_session_created ON entries (session_key, created_at DESC, entry_id DESC);
CREATE VIRTUAL TABLE entries_fts USING fts5(
    text, content='entries', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE entries_tri USING fts5(
    text, content='entries', content_rowid='rowid', tokenize='trigram case_sensitive 1'
);
"""


def state_dir() -> Path:
    """ds4tui's state directory: `$DS4TUI_STATE_DIR` when set, else platformdirs
    `user_state_dir("ds4tui")`."""
    override = os.environ.get("DS4TUI_STATE_DIR")
    return Path(override) if override else Path(platformdirs.user_state_dir("ds4tui"))


def default_db_path() -> Path:
    """`state_dir() / "retrieval.sqlite3"` (an index shared by several sessions)."""
    return state_dir() / DB_NAME


def session_db_path(session_path: str | Path) -> Path:
    """The index of one session file: `state_dir()/retrieval/<hash of its resolved path>.sqlite3`.

    One database per session keeps FTS5's ranking statistics (bm25 uses the whole table's
    document counts and lengths) to that session's own entries, so results do not depend on
    which other sessions were indexed before, and deleting the index and reopening gives the
    same results (issue 5)."""
    digest = hashlib.blake2b(str(Path(session_path).resolve()).encode("utf-8", "surrogatepass"), digest_size=10)
    return state_dir() / "retrieval" / f"{digest.hexdigest()}.sqlite3"


@dataclass(frozen=True)
class SyncResult:
    """What one `sync` did: the session's key, entries added (`added`), whether the session was
    re-indexed from scratch (`rebuilt`), its indexed entry count and the time taken (seconds)."""

    session_key: int
    added: int
    rebuilt: bool
    indexed_entries: int
    seconds: float


def _fts_string(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


class SessionSearch:
    """`ds4core.retrieval.CandidateSearch` over one indexed session (all its branches).

    Each search first finds the matching row ids in order, then loads the rows it has not loaded
    yet, so an entry found by several searches is read from the database once.
    """

    def __init__(self, index: RetrievalIndex, session_key: int) -> None:
        """Search the entries of `session_key` in `index`."""
        self._index = index
        self._key = session_key
        self._rows: dict[int, SearchHit] = {}

    def search_exact(self, needle: str, limit: int) -> Sequence[SearchHit]:
        """Entries whose text contains `needle` (case-sensitive substring, as SQLite `instr`),
        newest first (undated last), then entry id descending; at most `limit`. Needles of 3 or
        more characters are answered by the case-sensitive trigram index (a trigram phrase
        match is a substring match); shorter ones scan the session's rows."""
        if len(needle) >= 3:
            sql = (
                "SELECT e.rowid FROM entries_tri CROSS JOIN entries AS e ON e.rowid = entries_tri.rowid"
                " WHERE entries_tri MATCH ? AND e.session_key = ?"
                " ORDER BY e.created_at DESC, e.entry_id DESC LIMIT ?"
            )
            params: tuple[object, ...] = (_fts_string(needle), self._key, limit)
        else:
            sql = (
                "SELECT e.rowid FROM entries AS e WHERE e.session_key = ? AND instr(e.text, ?) > 0"
                " ORDER BY e.created_at DESC, e.entry_id DESC LIMIT ?"
            )
            params = (self._key, needle, limit)
        return self._load(self._index._rowids(sql, params))

    def search_fts(self, query: str, limit: int) -> Sequence[SearchHit]:
        """FTS5 `MATCH query` with DS4's tokenizer, best bm25 first, then newest; at most
        `limit`. Raises sqlite3.OperationalError on an invalid query."""
        sql = (
            "SELECT e.rowid FROM entries_fts CROSS JOIN entries AS e ON e.rowid = entries_fts.rowid"
            " WHERE entries_fts MATCH ? AND e.session_key = ?"
            " ORDER BY bm25(entries_fts), e.created_at DESC LIMIT ?"
        )
        return self._load(self._index._rowids(sql, (query, self._key, limit)))

    def _load(self, rowids: list[int]) -> list[SearchHit]:
        missing = [r for r in rowids if r not in self._rows]
        if missing:
            self._rows.update(self._index._rows(missing))
        return [self._rows[r] for r in rowids]


class RetrievalIndex:
    """The derived retrieval database (see the module docstring).

    Thread-safe: one connection guarded by a lock, usable from any thread. Raises
    sqlite3.OperationalError at open when this SQLite lacks FTS5 or the trigram tokenizer.
    """

    def __init__(self, path: Path | None = None) -> None:
        """Open (creating, or rebuilding on a schema mismatch or corruption) the database at
        `path` (default `default_db_path()`)."""
        self.path = Path(path) if path is not None else default_db_path()
        self.removed: tuple[str, ...] = ()
        """What stood where the index's files go and was removed before rebuilding it (a symbolic
        link, a FIFO, a folder: `ds4sessions.safety.remove_non_files`), for the caller to say."""
        self._lock = threading.Lock()
        self._conn = self._open()
        try:  # "last opened", read by `ds4sessions.state` (prune, size cap: least recently opened first)
            os.utime(self.path)
        except OSError:
            pass

    # -- lifecycle -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # it holds the text of prompts: folders 0700, database 0600 (ds4sessions.safety)
        if self.path.parent.name == "retrieval":
            private_dir(self.path.parent.parent)
        private_dir(self.path.parent)
        sides = [self.path, *(Path(str(self.path) + s) for s in ("-wal", "-shm", "-journal"))]
        self.removed += tuple(remove_non_files(sides))  # a link or a FIFO where the index goes: rebuilt
        private_file(self.path)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = self._connect()
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
                return conn
            if version == 0 and not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
                self._create(conn)
                return conn
            conn.close()
        except sqlite3.DatabaseError:
            pass
        self._delete_files()
        conn = self._connect()
        self._create(conn)
        return conn

    @staticmethod
    def _create(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")

    def _delete_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    def rebuild(self) -> None:
        """Delete the database and start empty; sessions are re-indexed on their next `sync`
        (the `--rebuild-index` command)."""
        with self._lock:
            self._conn.close()
            self._delete_files()
            self._conn = self._connect()
            self._create(self._conn)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    # -- indexing --------------------------------------------------------------------------

    def sync(self, session: PiSession) -> SyncResult:
        """Bring the index of `session` up to date and return what was done.

        The session is keyed by its resolved file path and header id. Only entries after the
        checkpoint entry (by byte offset) are added; if the checkpoint entry is gone or moved (the file was
        rewritten), the session's rows are dropped and every entry is indexed again. Entries
        without an id are skipped. Raises ValueError when the session has no path.
        """
        if session.path is None:
            raise ValueError("session has no file path")
        started = time.perf_counter()
        path = str(Path(session.path).resolve())
        session_id = session.session_id or ""
        entries = list(session.entries)
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT session_key, indexed_offset, last_entry_id, last_entry_offset"
                    " FROM sessions WHERE path = ? AND session_id = ?",
                    (path, session_id),
                ).fetchone()
                rebuilt = False
                if row is None:
                    key = conn.execute(
                        "INSERT INTO sessions (path, session_id) VALUES (?, ?)", (path, session_id)
                    ).lastrowid
                    first = 0
                else:
                    key, _, last_id, last_offset = row
                    first = 0
                    if last_id is not None:
                        if self._checkpoint_holds(session, last_id, last_offset):
                            first = bisect.bisect_right(entries, last_offset, key=lambda e: e.offset)
                        else:
                            self._drop_entries(conn, key)
                            rebuilt = True
                assert key is not None
                new = [e for e in entries[first:] if e.id is not None]
                for entry in new:
                    self._insert(conn, key, entry)
                if entries[first:]:
                    last = entries[-1]
                    conn.execute(
                        "UPDATE sessions SET indexed_offset = ?, last_entry_id = ?, last_entry_offset = ?,"
                        " indexed_entries = (SELECT count(*) FROM entries WHERE session_key = ?),"
                        " indexed_at = ? WHERE session_key = ?",
                        (last.offset + last.length, last.id, last.offset, key, time.time(), key),
                    )
                elif rebuilt:
                    conn.execute(
                        "UPDATE sessions SET indexed_offset = 0, last_entry_id = NULL,"
                        " last_entry_offset = NULL, indexed_entries = 0 WHERE session_key = ?",
                        (key,),
                    )
                count = conn.execute(
                    "SELECT indexed_entries FROM sessions WHERE session_key = ?", (key,)
                ).fetchone()[0]
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return SyncResult(key, len(new), rebuilt, count, time.perf_counter() - started)

    @staticmethod
    def _checkpoint_holds(session: PiSession, entry_id: str, offset: int | None) -> bool:
        entry = session.by_id.get(entry_id)
        return entry is not None and entry.offset == offset

    @staticmethod
    def _drop_entries(conn: sqlite3.Connection, key: int) -> None:
        for table in ("entries_fts", "entries_tri"):
            conn.execute(
                f"INSERT INTO {table} ({table}, rowid, text)"
                f" SELECT 'delete', rowid, text FROM entries WHERE session_key = ? AND text != ''",
                (key,),
            )
        conn.execute("DELETE FROM entries WHERE session_key = ?", (key,))

    @staticmethod
    def _insert(conn: sqlite3.Connection, key: int, entry: Entry) -> None:
        old = conn.execute(
            "SELECT rowid, text FROM entries WHERE session_key = ? AND entry_id = ?", (key, entry.id)
        ).fetchone()
        if old is not None:  # a duplicate id later in the file wins, as in the reader's by_id
            if old[1]:
                for table in ("entries_fts", "entries_tri"):
                    conn.execute(f"INSERT INTO {table} ({table}, rowid, text) VALUES ('delete', ?, ?)", old)
            conn.execute("DELETE FROM entries WHERE rowid = ?", (old[0],))
        found = indexed_text(entry.raw)
        rowid = conn.execute(
            "INSERT INTO entries (session_key, entry_id, parent_id, entry_type, role, created_at,"
            " line_no, offset, token_estimate, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key, entry.id, entry.parent_id, entry.type, found.role,
                parse_timestamp_ms(entry.timestamp), entry.line_no, entry.offset,
                found.token_estimate, found.text,
            ),
        ).lastrowid
        if found.text:
            conn.execute("INSERT INTO entries_fts (rowid, text) VALUES (?, ?)", (rowid, found.text))
            conn.execute("INSERT INTO entries_tri (rowid, text) VALUES (?, ?)", (rowid, found.text))

    # -- queries ---------------------------------------------------------------------------

    def search(self, session_key: int) -> SessionSearch:
        """The candidate search over one synced session (`SyncResult.session_key`)."""
        return SessionSearch(self, session_key)

    def _rowids(self, sql: str, params: tuple[object, ...]) -> list[int]:
        with self._lock:
            return [r[0] for r in self._conn.execute(sql, params)]

    def _rows(self, rowids: list[int]) -> dict[int, SearchHit]:
        marks = ",".join("?" * len(rowids))
        with self._lock:
            rows = self._conn.execute(
                "SELECT rowid, entry_id, entry_type, role, created_at, text, token_estimate"
                f" FROM entries WHERE rowid IN ({marks})",
                rowids,
            ).fetchall()
        return {r[0]: SearchHit(r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows}

    def indexed_entry_ids(self, session_key: int) -> list[str]:
        """Entry ids indexed for a session, in file order."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT entry_id FROM entries WHERE session_key = ? ORDER BY offset", (session_key,)
            ).fetchall()
        return [r[0] for r in rows]
