"""The OpenCode 1.18.33 fixture (`tests/fixtures/opencode-1.18.33`, written by the real CLI) and a
replayer of its writes: `Replayer` writes one session's events into a fresh WAL database the way
OpenCode does (`SyncEvent.run`: in one `BEGIN IMMEDIATE` transaction, the projection onto the
`session`/`message`/`part` rows, the `event_sequence` head, the `event` row), so a reader can
follow a database that grows exactly as OpenCode grew it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "opencode-1.18.33"
DB = FIX / "data" / "opencode" / "opencode.db"
MAIN = "ses_dae0fe62affe21xLAU9tZCcr6W"
"""The main session: list + tool, read, reasoning, an auto-compaction, a turn after it, a file."""
SECOND = "ses_dae0f4552ffeqyuMOb4KVjB9Jt"
FORK = "ses_dae0f2fceffemu4JFEu0shFaQd"
SESSIONS = (MAIN, SECOND, FORK)


def handle(session_id: str, db: Path = DB) -> str:
    """`DB#ses_…`."""
    return f"{db}#{session_id}"


def env(tmp: Path, **extra: str) -> dict[str, str]:
    """Environment variables that point OpenCode's folders at the fixture (and ds4tui's and the
    other agents' at `tmp`)."""
    return {"XDG_DATA_HOME": str(FIX / "data"), "XDG_CONFIG_HOME": str(FIX / "config"),
            "XDG_CACHE_HOME": str(tmp / "cache"), "HOME": str(tmp / "home"), "DS4TUI_STATE_DIR": str(tmp / "state"),
            "DS4TUI_CACHE_DIR": str(tmp / "ds4cache"), "PI_CODING_AGENT_DIR": str(tmp / "pi"),
            "CODEX_HOME": str(tmp / "codex"), "CLAUDE_CONFIG_DIR": str(tmp / "claude"), **extra}


def ro(db: Path = DB) -> sqlite3.Connection:
    """A read-only connection that creates nothing beside `db` (the tests' own look at it)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def digest(db: Path) -> dict[str, str]:
    """SHA-256 of the database and of its `-wal` (when present)."""
    out = {}
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            out[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def steps(session_id: str, db: Path = DB) -> list[dict[str, Any]]:
    """The session's `step-finish` parts' tokens, in message order (read with plain SQL)."""
    with ro(db) as conn:
        rows = conn.execute(
            "SELECT p.data, m.data AS message FROM part p JOIN message m ON m.id = p.message_id "
            "WHERE p.session_id = ? ORDER BY m.time_created, m.id, p.id", (session_id,)).fetchall()
    out = []
    for row in rows:
        part = json.loads(row["data"])
        if part.get("type") == "step-finish":
            message = json.loads(row["message"])
            out.append({**part["tokens"], "summary": bool(message.get("summary"))})
    return out


def session_row(session_id: str, db: Path = DB) -> dict[str, Any]:
    """The `session` row."""
    with ro(db) as conn:
        return dict(conn.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone())


def requests_log() -> list[dict[str, Any]]:
    """`requests.jsonl`: the fake's view, in order."""
    return [json.loads(line) for line in (FIX / "requests.jsonl").read_text(encoding="utf-8").splitlines()]


def empty_copy(dst: Path, src: Path = DB) -> None:
    """A WAL database with `src`'s schema, its `project` rows and nothing else."""
    with ro(src) as conn:
        ddl = [r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")]
        projects = conn.execute("SELECT * FROM project").fetchall()
    out = sqlite3.connect(dst)
    out.execute("PRAGMA journal_mode = WAL")
    for statement in ddl:
        out.execute(statement)
    for row in projects:
        out.execute(f"INSERT INTO project VALUES ({','.join('?' * len(row))})", tuple(row))
    out.commit()
    out.close()


def events(session_id: str, src: Path = DB) -> list[tuple[int, str, str]]:
    """`(seq, type, data)` of the session's events, in order."""
    with ro(src) as conn:
        return [(r["seq"], r["type"], r["data"]) for r in
                conn.execute("SELECT seq, type, data FROM event WHERE aggregate_id = ? ORDER BY seq", (session_id,))]


class Replayer:
    """Writes a session's events into `dst` (made by `empty_copy`) one transaction each, as
    OpenCode does; the session row's other columns come from the source's final row."""

    def __init__(self, dst: Path, session_id: str, src: Path = DB) -> None:
        self.conn = sqlite3.connect(dst, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA busy_timeout = 5000")
        self.session_id = session_id
        self.final = session_row(session_id, src)
        self.events = events(session_id, src)
        self.clock = 0

    def __iter__(self) -> Iterator[int]:
        """Apply each event; yields its seq after its transaction committed."""
        for seq, kind, data in self.events:
            self.apply(seq, kind, data)
            yield seq

    def close(self) -> None:
        self.conn.close()

    def apply(self, seq: int, kind: str, data: str) -> None:
        body = json.loads(data)
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        name = kind.rsplit(".", 1)[0]
        if name in ("session.created", "session.updated"):
            info = body["info"]
            tokens = info.get("tokens") or {}
            row = {**self.final, "title": info.get("title", self.final["title"]), "cost": info.get("cost", 0),
                   "tokens_input": tokens.get("input", 0), "tokens_output": tokens.get("output", 0),
                   "tokens_reasoning": tokens.get("reasoning", 0),
                   "tokens_cache_read": (tokens.get("cache") or {}).get("read", 0),
                   "tokens_cache_write": (tokens.get("cache") or {}).get("write", 0),
                   "time_updated": (info.get("time") or {}).get("updated", self.final["time_updated"])}
            c.execute(f"INSERT OR REPLACE INTO session ({','.join(row)}) VALUES ({','.join('?' * len(row))})", tuple(row.values()))
        elif name == "message.updated":
            info = dict(body["info"])
            mid = info.pop("id")
            info.pop("sessionID", None)
            created = (info.get("time") or {}).get("created", 0)
            c.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?,?,?,?,?) "
                      "ON CONFLICT(id) DO UPDATE SET time_updated = excluded.time_updated, data = excluded.data",
                      (mid, self.session_id, created, self._tick(created), json.dumps(info)))
        elif name == "message.part.updated":
            part = dict(body["part"])
            pid, mid = part.pop("id"), part.pop("messageID")
            part.pop("sessionID", None)
            when = body.get("time") or 0
            c.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?,?,?,?,?,?) "
                      "ON CONFLICT(id) DO UPDATE SET time_updated = excluded.time_updated, data = excluded.data",
                      (pid, mid, self.session_id, when, self._tick(when), json.dumps(part)))
        elif name == "message.removed":
            c.execute("DELETE FROM part WHERE message_id = ?", (body["messageID"],))
            c.execute("DELETE FROM message WHERE id = ?", (body["messageID"],))
        elif name == "message.part.removed":
            c.execute("DELETE FROM part WHERE id = ?", (body["partID"],))
        c.execute("INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?) ON CONFLICT(aggregate_id) DO UPDATE SET seq = excluded.seq",
                  (self.session_id, seq))
        c.execute("INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?,?,?,?,?)",
                  (f"evt_replay_{self.session_id}_{seq}", self.session_id, seq, kind, data))
        c.execute("COMMIT")

    def _tick(self, when: int) -> int:
        self.clock = max(self.clock + 1, int(when or 0))
        return self.clock
