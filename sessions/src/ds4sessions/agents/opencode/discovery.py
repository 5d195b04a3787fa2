"""OpenCode's sessions on this machine, one entry per session (cheap: no message is parsed).

Every database of `config.databases()` (`$OPENCODE_DB`, else `opencode.db` and the channel
databases of OpenCode's data folder) is opened read-only (`store.connect`) and listed with one
query (`store.session_sizes`): a `SessionInfo` per `session` row, named by its handle
(`PATH#ses_…`), its size the characters of its message and part JSON, modified at its newest
`time_updated`, live when that is within `LIVE_SECONDS` (OpenCode records no running state in
the database), its parent for a subagent's session (`parent_id`).

Title-generation calls leave no row (their usage is not stored): `title_calls` counts them in
OpenCode's own log (`<data>/log/*.log`, lines `message=stream … session.id=<id> … agent=title`).
"""

from __future__ import annotations

import errno
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Mapping

from ds4sessions.agents.base import SessionInfo
from ds4sessions.agents.opencode import store
from ds4sessions.agents.opencode.config import data_dir, databases
from ds4sessions.agents.opencode.handle import make_handle

NAME = "opencode"

LIVE_SECONDS = 120.0
"""A session updated this recently counts as live."""

MAX_LOG_BYTES = 32 << 20
"""Log bytes read per file for title-generation calls (OpenCode keeps a few runs' logs)."""

_TITLE_STREAM = re.compile(rb"message=stream\b[^\n]*?\bsession\.id=(ses_[0-9A-Za-z_-]+)[^\n]*?\bagent=title\b")


def discover(env: Mapping[str, str] | None = None, now: float | None = None) -> list[SessionInfo]:
    """Every session of every OpenCode database, newest first (module doc). Raises
    `store.OpenCodeDbError` naming a database that cannot be listed (locked, corrupt, not
    OpenCode's), after listing none: the overview shows the line."""
    now = time.time() if now is None else now
    out: list[SessionInfo] = []
    for db in databases(env):
        try:
            conn = store.connect(db, store.POLL_TIMEOUT_S)
        except store.OpenCodeDbError as error:
            if error.errno == errno.ENODATA:
                continue  # being created: no session yet
            raise
        try:
            with store.ReadTransaction(conn):
                rows = store.session_sizes(conn)
        except sqlite3.Error as error:
            raise store.why(db, error) from None
        finally:
            conn.close()
        for row in rows:
            modified = (row["updated"] or row["time_updated"] or 0) / 1000.0
            out.append(SessionInfo(
                agent=NAME, path=make_handle(db, row["id"]), session_id=row["id"], modified=modified,
                size=int(row["chars"] or 0), project=row["directory"], title=row["title"],
                live=now - modified < LIVE_SECONDS, parent=row["parent_id"], model=_model_id(row["model"]),
            ))
    out.sort(key=lambda info: info.modified, reverse=True)
    return out


def _model_id(raw: Any) -> str | None:
    try:
        model = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    if isinstance(model, dict):
        value = model.get("id") or model.get("modelID")
        return str(value) if value else None
    return None


_LOG_MEMO: dict[str, tuple[tuple[int, float], dict[str, int]]] = {}


def _log_counts(path: Path) -> dict[str, int]:
    try:
        st = path.stat()
    except OSError:
        return {}
    key = (st.st_size, st.st_mtime)
    memo = _LOG_MEMO.get(str(path))
    if memo is not None and memo[0] == key:
        return memo[1]
    counts: dict[str, int] = {}
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LOG_BYTES)
    except OSError:
        return {}
    for match in _TITLE_STREAM.finditer(data):
        sid = match.group(1).decode()
        counts[sid] = counts.get(sid, 0) + 1
    _LOG_MEMO[str(path)] = (key, counts)
    return counts


def title_calls(db: Path, session_id: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`{"calls", "source"}`: the title-generation calls OpenCode logged for `session_id`
    (`<data>/log/*.log` beside the database, else OpenCode's data folder); calls 0 and source
    None when no log names it (logs are rotated: an old session's calls are gone)."""
    folders = [Path(db).parent / "log", data_dir(env) / "log"]
    total = 0
    for folder in dict.fromkeys(folders):
        try:
            logs = sorted(folder.glob("*.log"))
        except OSError:
            continue
        for log in logs:
            total += _log_counts(log).get(session_id, 0)
        if total:
            return {"calls": total, "source": str(folder)}
    return {"calls": 0, "source": None}


def handle_stat(db: Path, session_id: str, timeout: float = store.POLL_TIMEOUT_S) -> tuple[int, float]:
    """`(size, modified)` of one session as `discover` lists it (characters of its JSON, Unix
    seconds). Raises FileNotFoundError or `store.OpenCodeDbError` (one line) when the database
    cannot be read or holds no such session."""
    conn = store.connect(db, timeout)
    try:
        with store.ReadTransaction(conn):
            rows = store.session_sizes(conn, session_id)
    except sqlite3.Error as error:
        raise store.why(db, error) from None
    finally:
        conn.close()
    if not rows:
        raise store.OpenCodeDbError(db, f"no session {session_id} in this database (`ds4tui sessions` lists them)",
                                    errno.ENOENT)
    row = rows[0]
    return int(row["chars"] or 0), (row["updated"] or row["time_updated"] or 0) / 1000.0


def newest(db: Path) -> tuple[str, int] | None:
    """The most recently updated root session of `db` and how many sessions it holds, None when
    it holds none or cannot be read."""
    try:
        conn = store.connect(db, store.POLL_TIMEOUT_S)
    except OSError:
        return None
    try:
        rows = conn.execute("SELECT id FROM session WHERE parent_id IS NULL ORDER BY time_updated DESC").fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return (rows[0][0], len(rows)) if rows else None

