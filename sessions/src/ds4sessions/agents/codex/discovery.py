"""Where Codex keeps its rollouts, and a cheap listing of them (shared/docs/codex-format.md §1).

- Home: `$CODEX_HOME`, default `~/.codex` (codex-rs core `find_codex_home`).
- Rollouts: `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, and `archived_sessions/`
  (flat; `codex archive` moves a rollout there). When both hold the same file name, the
  `sessions/` copy wins (ccusage `adapter/codex/README.md`).
- Thread names: `session_index.jsonl` lines `{id, thread_name}` when present.
- Liveness: a rollout is live while a Codex process holds its thread's writer lock: Codex
  0.171's app server (a managed daemon the TUI starts) keeps `thread-writer-locks/<thread
  id>.lock` under the home flock()ed (exclusive) while the thread is loaded, i.e. while it is open
  in a TUI and for a while after the TUI quits (it unloads the thread later:
  `thread_unload_delay_secs`; still held 1 min after quitting, released and the file removed
  within 12 min in our run); `codex exec` holds it only while it runs (seen with the real CLI,
  `tests/agent-oracle/run_live_two.sh`). Linux: the lock is looked up in `/proc/locks` (read-only, never taken); elsewhere the
  lock file's presence counts. Failing that, a rollout is live when it was modified within
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

from ds4sessions.agents.base import CODEX, SessionInfo, mapped

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


def find_thread(thread_id: str, home: Path | None = None) -> Path | None:
    """The rollout of thread `thread_id` under `home` (its file name ends with the id), or None."""
    for path in rollout_files(home):
        if path.stem.endswith(thread_id):
            return path
    return None


def thread_names(home: Path | None = None) -> dict[str, str]:
    """Thread id → name from `session_index.jsonl` (later lines win); {} when absent or unreadable."""
    path = (home or codex_home()) / "session_index.jsonl"
    names: dict[str, str] = {}
    try:
        with path.open("rb") as f:
            for raw in f:
                try:
                    row = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(row, dict) and isinstance(row.get("id"), str) and isinstance(row.get("thread_name"), str):
                    names[row["id"]] = row["thread_name"]
    except OSError:
        return {}
    return names


def home_of(path: Path) -> Path | None:
    """The Codex home holding `path` (the folder above its `sessions/` or `archived_sessions/`
    ancestor), None when it is not under one."""
    for parent in Path(path).resolve().parents:
        if parent.name in ("sessions", "archived_sessions"):
            return parent.parent
    return None


def configured(key: str, home: Path | None = None) -> int | None:
    """A positive integer setting of `<home>/config.toml` (e.g. "model_context_window",
    "model_auto_compact_token_limit", tokens), None when absent, invalid or unreadable."""
    try:
        data = tomllib.loads(((home or codex_home()) / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def configured_window(home: Path | None = None) -> int | None:
    """`model_context_window` from `<home>/config.toml` (tokens), None when absent or unreadable."""
    return configured("model_context_window", home)


def _head_facts(head: bytes) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for raw in head.split(b"\n")[:-1] if not head.endswith(b"\n") else head.split(b"\n"):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):
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
            kinds = mapped(payload.get("internal_chat_message_metadata_passthrough")).get("content_item_kinds")
            content = payload.get("content") if isinstance(payload.get("content"), list) else []
            text = "".join(c.get("text", "") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
            if (kinds in (None, ["user.text"])) and text.strip() and not text.startswith(("<environment_context>", "<user_instructions>")):
                facts["title"] = " ".join(text.split())[:80]
    return facts


LOCKS_DIR = "thread-writer-locks"
"""Folder of Codex's per-thread writer locks under the home (`<thread id>.lock`)."""


def _held_flocks(proc_locks: Path = Path("/proc/locks")) -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every file someone holds a flock() on, from `/proc/locks`
    (`N: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF`, major/minor in hex); None when
    the file cannot be read (not Linux). Waiters (`N: -> FLOCK ...`) are skipped."""
    try:
        text = proc_locks.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    held: set[tuple[int, int, int]] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            held.add((int(major, 16), int(minor, 16), int(inode)))
        except ValueError:
            continue
    return held


def locked_threads(home: Path | None = None, proc_locks: Path = Path("/proc/locks")) -> set[str]:
    """Ids of the threads a running Codex holds open (module doc: `thread-writer-locks`)."""
    folder = (home or codex_home()) / LOCKS_DIR
    try:
        files = [p for p in folder.iterdir() if p.suffix == ".lock" and not p.name.startswith(".")]
    except OSError:
        return set()
    if not files:
        return set()
    held = _held_flocks(proc_locks)
    out: set[str] = set()
    for path in files:
        if held is None:
            out.add(path.stem)
            continue
        try:
            st = path.stat()
        except OSError:
            continue
        if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in held:
            out.add(path.stem)
    return out


def _open_turn(tail: bytes) -> bool:
    last = None
    for match in _TURN.finditer(tail):
        last = match.group(1)
    return last == b"task_started"


def describe(path: Path, names: dict[str, str] | None = None, now: float | None = None,
             locked: set[str] | None = None) -> SessionInfo | None:
    """A `SessionInfo` for one rollout, or None when it is unreadable or not a rollout. `locked`:
    the thread ids a running Codex holds open (`locked_threads`; live whatever the file's age)."""
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
    live = (thread is not None and thread in (locked or ())) or (
        (now - st.st_mtime) <= LIVE_SECONDS and _open_turn(tail))
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
    locked = locked_threads(home)
    infos = [info for path in rollout_files(home) if (info := describe(path, names, now, locked)) is not None]
    infos.sort(key=lambda i: i.modified, reverse=True)
    return infos


def iter_homes() -> Iterator[Path]:
    """The Codex home(s) searched (one today: `codex_home()`)."""
    yield codex_home()
