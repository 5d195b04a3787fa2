"""Where Codex keeps its rollouts, and a cheap listing of them (shared/docs/codex-format.md §1).

- Home: `$CODEX_HOME`, default `~/.codex` (codex-rs core `find_codex_home`).
- Rollouts: `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, and `archived_sessions/`
  (flat; `codex archive` moves a rollout there). When both hold the same file name, the
  `sessions/` copy wins (ccusage `adapter/codex/README.md`).
- Thread names: `session_index.jsonl` lines `{id, thread_name}` when present.
- Liveness: Codex writes no pid file we know of; a rollout is live when it was modified within
  `LIVE_SECONDS` and its last `task_started` has no later `task_complete`/`turn_aborted`
  (read from the file's tail).
- Configuration: `config.toml` `model_context_window` (the full window the user configured).
"""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from pathlib import Path
from typing import Any, Iterator

from ds4sessions.agents.base import CODEX, SessionInfo

HEAD_BYTES = 256 * 1024
"""Bytes read from a rollout's start for its listing (meta, first prompt)."""

TAIL_BYTES = 64 * 1024
"""Bytes read from a rollout's end for liveness."""

LIVE_SECONDS = 120.0
"""A rollout modified within this many seconds, with a turn still open, is live."""

_ROLLOUT = re.compile(r"^rollout-.*\.jsonl$")
_TURN = re.compile(rb'"type"\s*:\s*"(task_started|task_complete|turn_aborted)"')


def codex_home() -> Path:
    """`$CODEX_HOME` (with `~` expanded) or `~/.codex`."""
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def rollout_files(home: Path | None = None) -> list[Path]:
    """Every rollout under `home` (default `codex_home()`): `sessions/**/rollout-*.jsonl`, then
    `archived_sessions/rollout-*.jsonl` whose file name is not already under `sessions/`."""
    home = home or codex_home()
    found: dict[str, Path] = {}
    live_root = home / "sessions"
    if live_root.is_dir():
        for path in sorted(live_root.rglob("rollout-*.jsonl")):
            if path.is_file() and _ROLLOUT.match(path.name):
                found.setdefault(path.name, path)
    archive = home / "archived_sessions"
    if archive.is_dir():
        for path in sorted(archive.rglob("rollout-*.jsonl")):
            if path.is_file() and _ROLLOUT.match(path.name):
                found.setdefault(path.name, path)
    return list(found.values())


def thread_names(home: Path | None = None) -> dict[str, str]:
    """Thread id → name from `session_index.jsonl` (later lines win); {} when absent or unreadable."""
    path = (home or codex_home()) / "session_index.jsonl"
    names: dict[str, str] = {}
    try:
        with path.open("rb") as f:
            for raw in f:
                try:
                    row = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("id"), str) and isinstance(row.get("thread_name"), str):
                    names[row["id"]] = row["thread_name"]
    except OSError:
        return {}
    return names


def configured_window(home: Path | None = None) -> int | None:
    """`model_context_window` from `<home>/config.toml` (tokens), None when absent or unreadable."""
    try:
        data = tomllib.loads(((home or codex_home()) / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    value = data.get("model_context_window")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _head_facts(head: bytes) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for raw in head.split(b"\n")[:-1] if not head.endswith(b"\n") else head.split(b"\n"):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        payload = row.get("payload") if isinstance(row.get("payload"), dict) else {}
        kind = row.get("type")
        if kind == "session_meta" and "meta" not in facts:
            facts["meta"] = payload
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            facts["model"] = payload["model"]
        elif kind == "response_item" and "title" not in facts and payload.get("type") == "message" and payload.get("role") == "user":
            kinds = (payload.get("internal_chat_message_metadata_passthrough") or {}).get("content_item_kinds")
            content = payload.get("content") if isinstance(payload.get("content"), list) else []
            text = "".join(c.get("text", "") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
            if (kinds in (None, ["user.text"])) and text.strip() and not text.startswith(("<environment_context>", "<user_instructions>")):
                facts["title"] = " ".join(text.split())[:80]
    return facts


def _open_turn(tail: bytes) -> bool:
    last = None
    for match in _TURN.finditer(tail):
        last = match.group(1)
    return last == b"task_started"


def describe(path: Path, names: dict[str, str] | None = None, now: float | None = None) -> SessionInfo | None:
    """A `SessionInfo` for one rollout, or None when it is unreadable or not a rollout."""
    try:
        st = path.stat()
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
            if st.st_size > TAIL_BYTES:
                f.seek(st.st_size - TAIL_BYTES)
            tail = f.read(TAIL_BYTES) if st.st_size > HEAD_BYTES else head
    except OSError:
        return None
    facts = _head_facts(head)
    meta = facts.get("meta")
    if not isinstance(meta, dict):
        return None
    thread = meta.get("id") if isinstance(meta.get("id"), str) else None
    source = meta.get("source") if isinstance(meta.get("source"), dict) else {}
    spawn = ((source.get("subagent") or {}) if isinstance(source.get("subagent"), dict) else {}).get("thread_spawn") or {}
    parent = meta.get("forked_from_id") or (spawn.get("parent_thread_id") if isinstance(spawn, dict) else None) or meta.get("parent_thread_id")
    now = time.time() if now is None else now
    live = (now - st.st_mtime) <= LIVE_SECONDS and _open_turn(tail)
    title = (names or {}).get(thread or "") or facts.get("title")
    return SessionInfo(
        agent=CODEX, path=path, session_id=thread, modified=st.st_mtime, size=st.st_size,
        project=meta.get("cwd") if isinstance(meta.get("cwd"), str) else None, title=title, live=live,
        parent=parent if isinstance(parent, str) else None, model=facts.get("model"),
    )


def discover(home: Path | None = None, now: float | None = None) -> list[SessionInfo]:
    """Every rollout under `home` (default `codex_home()`), newest first (by mtime)."""
    home = home or codex_home()
    names = thread_names(home)
    infos = [info for path in rollout_files(home) if (info := describe(path, names, now)) is not None]
    infos.sort(key=lambda i: i.modified, reverse=True)
    return infos


def iter_homes() -> Iterator[Path]:
    """The Codex home(s) searched (one today: `codex_home()`)."""
    yield codex_home()
