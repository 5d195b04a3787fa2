"""What ds4tui keeps in its state directory, how big it is, and how it is pruned.

The state directory (`$DS4TUI_STATE_DIR`, else platformdirs' `user_state_dir("ds4tui")`) holds:

- `journal.sqlite`: the steering journal (every write ds4tui made to a Pi session, with what undoes
  it). The only file whose loss loses anything: the undo history.
- `retrieval/<sha256 of the session path>.sqlite3` (+ `-wal`, `-shm`): one derived retrieval index
  per session file (SQLite FTS5; about twice the session file's size). Rebuilt from the session
  file on demand, safe to delete at any time.
- anything else found there is listed as "other" and never touched.

Safety (issue 30): the folder must be the user's own and not writable by its group or others
(`check_state_dir`; else every command that uses it refuses in one line, exit 2: another user
could otherwise swap the journal). A derived file that is a symbolic link, a FIFO or a folder
(`ds4sessions.safety.remove_non_files`, when `RetrievalIndex` opens it) is removed and rebuilt; the journal, which is not derived, is refused
instead (`ds4tui journal reset` moves it aside).

Derived indexes are bounded two ways:
- `prune(days)`: indexes of sessions not opened for `days` days (default 30) are removed
  (`ds4tui state --prune`);
- `enforce_cap(cap_bytes)`: when the indexes together exceed the cap (`$DS4TUI_INDEX_CAP_MB`, default
  `DEFAULT_INDEX_CAP_MB`), the least recently opened are removed first until they fit. The app calls it
  each time it opens an index, never evicting the one being opened.

"Opened" is the index file's modification time, which `touch_opened()` sets each time ds4tui opens
an index (`RetrievalIndex` does so).
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ds4sessions.derive.retrieval_index import state_dir

DEFAULT_INDEX_CAP_MB = 1024
"""Total size cap of the derived retrieval indexes, in MiB (`$DS4TUI_INDEX_CAP_MB` overrides)."""

DEFAULT_PRUNE_DAYS = 30
"""`prune()` removes indexes of sessions not opened for this many days."""

INDEX_DIR = "retrieval"
JOURNAL = "journal.sqlite"
_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class IndexInfo:
    """One derived retrieval index: its database `path`, the `session_path` it indexes (None when
    unreadable), `size` in bytes (database + WAL + shared memory), `last_opened` (Unix seconds) and
    whether the session file still exists."""

    path: Path
    session_path: str | None
    size: int
    last_opened: float
    session_exists: bool


@dataclass(frozen=True)
class StateReport:
    """The state directory's contents: `journal` (path, bytes; None when absent), the `indexes`
    (newest opened first), `other` files (path, bytes), and the `total` in bytes."""

    state_dir: Path
    journal: tuple[Path, int] | None
    indexes: tuple[IndexInfo, ...]
    other: tuple[tuple[Path, int], ...]

    @property
    def index_bytes(self) -> int:
        """Bytes used by the derived indexes."""
        return sum(i.size for i in self.indexes)

    @property
    def total(self) -> int:
        """Bytes used by everything in the state directory."""
        return (self.journal[1] if self.journal else 0) + self.index_bytes + sum(s for _, s in self.other)


def index_cap_bytes() -> int:
    """The indexes' total size cap in bytes: `$DS4TUI_INDEX_CAP_MB` MiB (a number > 0), else
    `DEFAULT_INDEX_CAP_MB`. Raises ValueError on a value that is not a positive number."""
    raw = os.environ.get("DS4TUI_INDEX_CAP_MB")
    if raw is None or raw.strip() == "":
        return DEFAULT_INDEX_CAP_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        raise ValueError(f"DS4TUI_INDEX_CAP_MB={raw!r} is not a number of MiB") from None
    if not mb > 0:
        raise ValueError(f"DS4TUI_INDEX_CAP_MB={raw!r} must be > 0")
    return int(mb * (1 << 20))


def _size_with_sides(db: Path) -> int:
    total = 0
    for candidate in (db, *(Path(str(db) + s) for s in _SIDE_SUFFIXES)):
        try:
            total += candidate.stat().st_size
        except OSError:
            pass
    return total


def _indexed_session(db: Path) -> str | None:
    """The session file path recorded inside an index (read-only open), or None."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT path FROM sessions LIMIT 1").fetchone()
        return str(row[0]) if row else None
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def check_state_dir(root: Path | None = None) -> None:
    """Raise `ds4sessions.safety.UnsafeDir` (a PermissionError: the CLI's one line, exit 2) when
    the state directory `root` (default `state_dir()`) or its `retrieval` folder exists and
    belongs to another user or is writable by its group or others (issue 30: such a folder was
    used silently, so another user could swap the journal `journal undo` acts on). An absent
    folder passes (ds4tui creates it 0700)."""
    from ds4sessions.safety import check_private_dir

    root = root or state_dir()
    for folder in (root, root / INDEX_DIR):
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            continue
        check_private_dir(folder, st)


def touch_opened(db: Path, now: float | None = None) -> None:
    """Record that the index `db` was opened now (its modification time); no error when absent."""
    try:
        stamp = time.time() if now is None else now
        os.utime(db, (stamp, stamp))
    except OSError:
        pass


def list_indexes(root: Path | None = None) -> list[IndexInfo]:
    """Every derived retrieval index under `root` (default `state_dir()`), newest opened first."""
    folder = (root or state_dir()) / INDEX_DIR
    out: list[IndexInfo] = []
    try:
        candidates = sorted(folder.glob("*.sqlite3"))
    except OSError:
        return out
    for db in candidates:
        try:
            opened = db.stat().st_mtime
        except OSError:
            continue
        session = _indexed_session(db)
        out.append(
            IndexInfo(
                path=db,
                session_path=session,
                size=_size_with_sides(db),
                last_opened=opened,
                session_exists=bool(session) and Path(session).exists(),
            )
        )
    out.sort(key=lambda i: i.last_opened, reverse=True)
    return out


def inventory(root: Path | None = None) -> StateReport:
    """What the state directory `root` (default `state_dir()`) holds; an absent directory is empty."""
    root = root or state_dir()
    check_state_dir(root)
    indexes = list_indexes(root)
    known = {i.path for i in indexes} | {Path(str(i.path) + s) for i in indexes for s in _SIDE_SUFFIXES}
    journal_path = root / JOURNAL
    journal = (journal_path, _size_with_sides(journal_path)) if journal_path.exists() else None
    skip = known | {journal_path, *(Path(str(journal_path) + s) for s in _SIDE_SUFFIXES)}
    other: list[tuple[Path, int]] = []
    if root.is_dir():
        for path in sorted(root.rglob("*")):
            if path in skip or not path.is_file() or path.is_symlink():
                continue
            try:
                other.append((path, path.stat().st_size))
            except OSError:
                pass
    return StateReport(state_dir=root, journal=journal, indexes=tuple(indexes), other=tuple(other))


def remove_index(db: Path) -> int:
    """Delete one index (database, WAL, shared memory); return the bytes freed."""
    freed = 0
    for candidate in (db, *(Path(str(db) + s) for s in _SIDE_SUFFIXES)):
        try:
            size = candidate.stat().st_size
            candidate.unlink()
            freed += size
        except FileNotFoundError:
            continue
    return freed


def prune(
    days: float = DEFAULT_PRUNE_DAYS, *, root: Path | None = None, now: float | None = None, dry_run: bool = False
) -> list[IndexInfo]:
    """Remove the indexes not opened for `days` days (and those whose session file is gone
    *and* not opened for a day); return what was (or, with `dry_run`, would be) removed.
    Raises ValueError when `days` < 0."""
    if days < 0:
        raise ValueError("days must be >= 0")
    check_state_dir(root or state_dir())
    now = time.time() if now is None else now
    removed = []
    for info in list_indexes(root):
        age = now - info.last_opened
        if age > days * 86400 or (not info.session_exists and age > 86400):
            if not dry_run:
                remove_index(info.path)
            removed.append(info)
    return removed


def enforce_cap(cap_bytes: int | None = None, *, keep: Path | None = None, root: Path | None = None) -> list[IndexInfo]:
    """Evict the least recently opened indexes until the indexes fit in `cap_bytes` (default
    `index_cap_bytes()`), never the index `keep`; return the evicted ones. An evicted index is
    rebuilt from its session file the next time that session is opened."""
    cap = index_cap_bytes() if cap_bytes is None else cap_bytes
    indexes = list_indexes(root)
    total = sum(i.size for i in indexes)
    evicted = []
    for info in sorted(indexes, key=lambda i: i.last_opened):
        if total <= cap:
            break
        if keep is not None and info.path == keep:
            continue
        total -= info.size
        remove_index(info.path)
        evicted.append(info)
    return evicted
