"""Read-only access to OpenCode's SQLite database (`opencode.db`), and nothing else.

OpenCode 1.18.33 (`packages/opencode/src/storage`, the drizzle schema in its binary) keeps
sessions in `session` (one row per session: title, directory, model, the token sums
`tokens_input/output/reasoning/cache_read/cache_write`, `time_created/updated` in ms),
`message` and `part` (one row each, `data` = the JSON of the message or part without its ids),
upserted in place while a run goes on, and an append-only `event` log (`aggregate_id` = session
id, `seq` 0, 1, 2, … per session, `type` like `message.part.updated.1`, `data` = the event's
JSON) with its head in `event_sequence`. OpenCode writes an event and applies it to the tables
in one `BEGIN IMMEDIATE` transaction (its `SyncEvent.run`: projectors, then `event_sequence`,
then `event`), so within one read transaction the rows and the head `seq` agree.

How ds4tui opens it (`connect`):

- a `file:…?mode=ro` URI (SQLite opens the file `O_RDONLY`) and `PRAGMA query_only`: no
  statement can write, a read-only connection never checkpoints (`sqlite3WalCheckpoint` refuses
  on a read-only WAL), so the database and its `-wal` stay byte for byte as OpenCode left them
  (SQLite keeps its `-shm` index beside them up to date, as any reader of a WAL database does);
- a WAL database whose `-wal` is absent (no OpenCode process has it open) is read with
  `immutable=1`: no lock, and no empty `-wal`/`-shm` created beside it (which a plain read-only
  open does); it also reads on a read-only file system then. With a `-wal` on a read-only file
  system SQLite cannot build the `-shm` index, so that is one line (copy it with `.backup`);
- one read transaction per poll, closed at once (no snapshot held open: OpenCode's checkpoints
  are never held back), a fresh connection per poll (a vacuumed, replaced or deleted file is
  simply read again);
- a short busy timeout: a database locked by another process (an exclusive lock) is an error
  of one line for a command, and a note on screen for a live view that keeps its last state.

Errors are `OpenCodeDbError` (an `OSError`: `ds4tui.errors.one_line` prints `PATH: reason`).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import quote

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

REQUIRED_TABLES = ("session", "message", "part")
"""The tables without which a database is not OpenCode's."""

FIRST_TIMEOUT_S = 2.0
"""Busy timeout of a first read (seconds): a command waits this long for a lock to clear."""

POLL_TIMEOUT_S = 0.25
"""Busy timeout of a live poll (seconds): the worker never waits long; the next poll retries."""

ID_CHUNK = 400
"""Ids per `IN (…)` query (SQLite's default variable limit is 32,766; small chunks stay cheap)."""


class OpenCodeDbError(OSError):
    """A database ds4tui cannot read as OpenCode's: missing, not a regular file, not SQLite,
    corrupt, locked, not OpenCode's, a missing session, or a WAL database on a read-only file
    system. `filename` is the database, `strerror` the reason in one line."""

    def __init__(self, path: str | Path, reason: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, reason, str(path))


def _uri(path: Path, immutable: bool) -> str:
    return "file:" + quote(str(path.absolute()), safe="/") + "?mode=ro" + ("&immutable=1" if immutable else "")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def why(db: Path, error: sqlite3.Error) -> OpenCodeDbError:
    """The one-line `OpenCodeDbError` for an SQLite error met reading `db`."""
    text = str(error)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return OpenCodeDbError(db, f"database is locked by another process ({text}); try again when it is released",
                               errno.EBUSY)
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return OpenCodeDbError(db, f"corrupt or not an SQLite database ({text})")
    if "unable to open" in low and _read_only_fs(db):
        return OpenCodeDbError(
            db, "on a read-only file system: SQLite cannot read a WAL database there (it must write the -shm index "
                "beside it); copy it with `sqlite3 DB \".backup COPY\"` and open the copy", errno.EROFS)
    if "readonly" in low or "read-only" in low:
        return OpenCodeDbError(db, f"cannot be read without writing ({text})", errno.EROFS)
    return OpenCodeDbError(db, f"cannot be read ({text})", errno.EIO)


def check_file(db: Path) -> bool:
    """Raise unless `db` is a regular file starting with the SQLite header: FileNotFoundError,
    `OpenCodeDbError` for a directory, FIFO, device or socket (never opened, so never a hang),
    or a file that is no SQLite database. Reads 20 bytes; returns True for a WAL database
    (header bytes 18–19 = 2, as OpenCode sets `journal_mode = WAL`)."""
    from ds4sessions.safety import file_kind

    st = os.stat(db)
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise OpenCodeDbError(db, f"{kind}, not an OpenCode database; refused")
    fd = os.open(db, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OpenCodeDbError(db, "not a regular file; refused")
        head = os.read(fd, 20)
    finally:
        os.close(fd)
    if head[:len(SQLITE_MAGIC)] != SQLITE_MAGIC:
        raise OpenCodeDbError(db, "not an SQLite database (OpenCode keeps its sessions in opencode.db)")
    return head[18:20] == b"\x02\x02"


def connect(db: Path, timeout: float = FIRST_TIMEOUT_S) -> "_Connection":
    """A read-only connection to OpenCode's database `db` (module doc), its schema checked.
    Raises FileNotFoundError or `OpenCodeDbError` (see `check_file`, `why`; a database without
    the `session`, `message` and `part` tables is "not OpenCode's")."""
    db = Path(db)
    wal = check_file(db)
    # A WAL database without its -wal file has no writer now (OpenCode keeps it while its
    # connection is open; the last close checkpoints and deletes it): read the file as it is,
    # `immutable` (no lock, and no empty -wal or -shm left beside it, as a plain read-only open
    # would create). With a -wal, the normal read-only open reads it through its -shm index.
    immutable = wal and not os.path.exists(f"{db}-wal")
    try:
        conn = sqlite3.connect(_uri(db, immutable), uri=True, timeout=timeout, isolation_level=None, check_same_thread=False,
                               factory=_Connection)
    except sqlite3.Error as error:
        raise why(db, error) from None
    try:
        conn.execute("PRAGMA query_only = ON")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as error:
        conn.close()
        raise why(db, error) from None
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if not tables:
        conn.close()
        raise OpenCodeDbError(db, "an empty SQLite database (OpenCode creates its tables when it first starts)",
                              errno.ENODATA)
    if missing:
        conn.close()
        raise OpenCodeDbError(db, "an SQLite database, but not OpenCode's (no " + ", ".join(missing) + " table)")
    conn.row_factory = sqlite3.Row
    conn.tables = frozenset(tables)
    return conn


class _Connection(sqlite3.Connection):
    """A connection that knows the database's tables (`connect`)."""

    tables: frozenset[str] = frozenset()


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """True when the connected database has table `name`."""
    return name in getattr(conn, "tables", ())


class ReadTransaction:
    """`with ReadTransaction(conn):` one consistent snapshot of the database (BEGIN … COMMIT)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN")
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            pass


def session_row(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    """The `session` row of `session_id` as a dict of its columns, None when there is none."""
    row = conn.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone()
    return dict(row) if row is not None else None


def head_seq(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The session's last event `seq` (`event_sequence`), None without an event log for it."""
    if not has_table(conn, "event_sequence"):
        return None
    row = conn.execute("SELECT seq FROM event_sequence WHERE aggregate_id = ?", (session_id,)).fetchone()
    return int(row[0]) if row is not None else None


def messages(conn: sqlite3.Connection, session_id: str) -> list[sqlite3.Row]:
    """Every `message` row of the session: `id, time_updated` (ms), `chars` (`LENGTH(data)`),
    `data` (the JSON as bytes)."""
    return conn.execute("SELECT id, time_updated, LENGTH(data) AS chars, CAST(data AS BLOB) AS data FROM message "
                        "WHERE session_id = ?",
                        (session_id,)).fetchall()


def parts(conn: sqlite3.Connection, session_id: str) -> list[sqlite3.Row]:
    """Every `part` row of the session: `id, message_id, time_updated` (ms), `chars`, `data` (bytes)."""
    return conn.execute("SELECT id, message_id, time_updated, LENGTH(data) AS chars, CAST(data AS BLOB) AS data "
                        "FROM part WHERE session_id = ?",
                        (session_id,)).fetchall()


def events_after(conn: sqlite3.Connection, session_id: str, seq: int) -> list[sqlite3.Row]:
    """The session's events after `seq`, in order: `seq, type, data` (bytes; index
    `event_aggregate_seq_idx`: the cost is the new rows only)."""
    return conn.execute("SELECT seq, type, CAST(data AS BLOB) AS data FROM event WHERE aggregate_id = ? AND seq > ? "
                        "ORDER BY seq",
                        (session_id, seq)).fetchall()


def _chunks(ids: Iterable[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in ids:
        batch.append(item)
        if len(batch) == ID_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def messages_by_id(conn: sqlite3.Connection, session_id: str, ids: Iterable[str]) -> list[sqlite3.Row]:
    """The `message` rows of `ids` that exist (in the session)."""
    out: list[sqlite3.Row] = []
    for batch in _chunks(ids):
        marks = ",".join("?" * len(batch))
        out += conn.execute(f"SELECT id, time_updated, LENGTH(data) AS chars, CAST(data AS BLOB) AS data FROM message "
                            f"WHERE id IN ({marks}) "
                            "AND session_id = ?", (*batch, session_id)).fetchall()
    return out


def parts_by_id(conn: sqlite3.Connection, session_id: str, ids: Iterable[str]) -> list[sqlite3.Row]:
    """The `part` rows of `ids` that exist (in the session)."""
    out: list[sqlite3.Row] = []
    for batch in _chunks(ids):
        marks = ",".join("?" * len(batch))
        out += conn.execute(f"SELECT id, message_id, time_updated, LENGTH(data) AS chars, CAST(data AS BLOB) AS data FROM part "
                            f"WHERE id IN ({marks}) "
                            "AND session_id = ?", (*batch, session_id)).fetchall()
    return out


_SIZES = """
SELECT s.id, s.parent_id, s.title, s.directory, s.model, s.time_created, s.time_updated,
       COALESCE(m.chars, 0) + COALESCE(p.chars, 0) AS chars,
       MAX(s.time_updated, COALESCE(m.updated, 0), COALESCE(p.updated, 0)) AS updated,
       COALESCE(m.rows, 0) AS messages
FROM session s
LEFT JOIN (SELECT session_id, SUM(LENGTH(data)) AS chars, MAX(time_updated) AS updated, COUNT(*) AS rows
           FROM message {where} GROUP BY session_id) m ON m.session_id = s.id
LEFT JOIN (SELECT session_id, SUM(LENGTH(data)) AS chars, MAX(time_updated) AS updated
           FROM part {where} GROUP BY session_id) p ON p.session_id = s.id
{outer}
"""


def session_sizes(conn: sqlite3.Connection, session_id: str | None = None) -> list[sqlite3.Row]:
    """One row per session (or only `session_id`'s): `id, parent_id, title, directory, model,
    time_created, time_updated`, `chars` (characters of its message and part JSON: the
    session's size), `updated` (ms: the newest `time_updated` of the session and its rows) and
    `messages`. O(the rows read); the JSON is read to count it."""
    if session_id is None:
        return conn.execute(_SIZES.format(where="", outer="")).fetchall()
    return conn.execute(_SIZES.format(where="WHERE session_id = :sid", outer="WHERE s.id = :sid"),
                        {"sid": session_id}).fetchall()
