"""The name of one OpenCode session: `PATH/opencode.db#ses_…` (a session handle).

OpenCode keeps every session in one SQLite database, so a session is not a file: ds4tui names
it by the database's path, `#`, and the session id (`session.id`, `ses_` + 26 characters in
OpenCode 1.18.33), e.g. `~/.local/share/opencode/opencode.db#ses_dae218f29ffe31ywUnSTsyilfI`.
Every command that takes a session file takes a handle (`ds4tui map --json HANDLE`), and
`ds4tui sessions` lists one per session. The registry asks `OpenCodeAgent.claims_handle` for a
path that is not a file (`ds4sessions.agents.registry.agent_for_handle`).
"""

from __future__ import annotations

import re
from pathlib import Path

SEPARATOR = "#"
"""Between the database's path and the session id."""

_SESSION_ID = re.compile(r"ses_[0-9A-Za-z_-]{1,120}\Z")
"""OpenCode's session ids: `ses_` then an ascending identifier (`Identifier.ascending`)."""


def split_handle(text: str | Path) -> tuple[Path, str] | None:
    """`(database path, session id)` of a handle `PATH#ses_…`, None when `text` is not one (no
    `#`, an empty path, or a fragment that is no OpenCode session id). The path is not checked."""
    db, sep, session_id = str(text).rpartition(SEPARATOR)
    if not sep or not db or _SESSION_ID.match(session_id) is None:
        return None
    return Path(db), session_id


def make_handle(db: str | Path, session_id: str) -> Path:
    """The handle of session `session_id` of the database `db` (`PATH#ses_…`), as a `Path`."""
    return Path(f"{db}{SEPARATOR}{session_id}")
