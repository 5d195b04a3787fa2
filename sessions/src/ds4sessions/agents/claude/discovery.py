"""Where Claude Code keeps its transcripts, and which sessions are live.

- Roots: every entry of `$CLAUDE_CONFIG_DIR` (a comma list; each replaces `~/.claude`), then
  `~/.claude`, then `~/.config/claude` (ccusage `adapter/claude/README.md`; the sample's
  MAIN:39 names `<config dir>/projects/…`). Transcripts: `<root>/projects/<escaped cwd>/<sessionId>.jsonl`.
- Subagents: `<root>/projects/<escaped cwd>/<sessionId>/subagents/agent-<id>.jsonl` with a
  `.meta.json` `{agentType, description, toolUseId, spawnDepth}` (sample SUB); listed as their own
  sessions whose `parent` is the session id.
- Live: `<root>/sessions/<pid>.json` `{sessionId, …}` names a running session
  (StackOneHQ/stack-nudge PR #61); live when that pid is alive, else when the transcript was
  modified within `RECENT_SECONDS`.
- The escaped folder name is lossy (`/` and `.` → `-`), so the project is the `cwd` of the rows.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Mapping

from ds4sessions.agents.base import CLAUDE_CODE, SessionInfo

RECENT_SECONDS = 120.0
"""A transcript modified this recently counts as live when no pid record names it."""
HEAD_SCAN_BYTES = 256 * 1024
"""Bytes of a transcript's start and end read to list it (cwd, title, model): cheap listing."""


def config_roots(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Claude Code's config folders in search order, without duplicates (existing or not)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    roots: list[Path] = []
    for part in (env.get("CLAUDE_CONFIG_DIR") or "").split(","):
        if part.strip():
            roots.append(Path(part.strip()).expanduser())
    roots += [home / ".claude", home / ".config" / "claude"]
    seen: set[Path] = set()
    out = []
    for root in roots:
        if root not in seen:
            seen.add(root)
            out.append(root)
    return out


def pid_alive(pid: int) -> bool:
    """True when a process with `pid` exists (signal 0)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def live_session_ids(roots: list[Path]) -> set[str]:
    """Session ids named by `sessions/<pid>.json` files whose pid is alive."""
    ids: set[str] = set()
    for root in roots:
        folder = root / "sessions"
        try:
            files = list(folder.glob("*.json"))
        except OSError:
            continue
        for file in files:
            try:
                pid = int(file.stem)
                data = json.loads(file.read_text(encoding="utf-8"))
            except (ValueError, OSError):
                continue
            if isinstance(data, dict) and isinstance(data.get("sessionId"), str) and pid_alive(pid):
                ids.add(data["sessionId"])
    return ids


def _scan(path: Path, size: int) -> dict[str, str | None]:
    """cwd, title (ai-title/summary, else the first prompt), model, session id from the file's
    first and last `HEAD_SCAN_BYTES`."""
    found: dict[str, str | None] = {"cwd": None, "title": None, "prompt": None, "model": None, "sessionId": None}
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_SCAN_BYTES)
            tail = b""
            if size > 2 * HEAD_SCAN_BYTES:
                f.seek(size - HEAD_SCAN_BYTES)
                tail = f.read()
    except OSError:
        return found
    for raw in (head + b"\n" + tail).splitlines():
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        if isinstance(row.get("cwd"), str):
            found["cwd"] = found["cwd"] or row["cwd"]
        if isinstance(row.get("sessionId"), str):
            found["sessionId"] = found["sessionId"] or row["sessionId"]
        if row.get("type") in ("ai-title", "summary", "custom-title"):
            t = row.get("aiTitle") or row.get("title") or row.get("summary") or row.get("customTitle")
            if isinstance(t, str) and t.strip():
                found["title"] = t.strip()
        msg = row.get("message") if isinstance(row.get("message"), dict) else {}
        if row.get("type") == "assistant" and isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
            found["model"] = msg["model"]
        if row.get("type") == "user" and found["prompt"] is None and not row.get("isMeta") and not row.get("isCompactSummary"):
            c = msg.get("content")
            text = c if isinstance(c, str) else None
            if isinstance(c, list):
                text = next((b.get("text") for b in c if isinstance(b, dict) and b.get("type") == "text"), None)
            if isinstance(text, str) and text.strip() and not text.startswith("<"):
                found["prompt"] = text.strip().splitlines()[0][:200]
    return found


def discover(env: Mapping[str, str] | None = None, home: Path | None = None, now: float | None = None) -> list[SessionInfo]:
    """Every Claude Code transcript (main sessions and subagents) under `config_roots`, newest first."""
    roots = config_roots(env, home)
    live_ids = live_session_ids(roots)
    now = time.time() if now is None else now
    infos: list[SessionInfo] = []
    seen: set[Path] = set()
    for root in roots:
        projects = root / "projects"
        if not projects.is_dir():
            continue
        candidates = [*projects.glob("*/*.jsonl"), *projects.glob("*/*/subagents/agent-*.jsonl")]
        for path in candidates:
            try:
                real = path.resolve()
                st = path.stat()
            except OSError:
                continue
            if real in seen or not path.is_file():
                continue
            seen.add(real)
            facts = _scan(path, st.st_size)
            parent = None
            title = facts["title"] or facts["prompt"]
            if path.parent.name == "subagents":
                parent = path.parent.parent.name
                meta = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
                try:
                    data = json.loads(meta.read_text(encoding="utf-8"))
                    if isinstance(data, dict) and isinstance(data.get("description"), str):
                        title = f"[{data.get('agentType', 'subagent')}] {data['description']}"
                except (OSError, ValueError):
                    pass
            sid = facts["sessionId"] or (parent or path.stem)
            live = (parent is None and sid in live_ids) or (now - st.st_mtime) < RECENT_SECONDS
            infos.append(SessionInfo(agent=CLAUDE_CODE, path=path, session_id=sid, modified=st.st_mtime,
                                     size=st.st_size, project=facts["cwd"], title=title, live=live,
                                     parent=parent, model=facts["model"]))
    infos.sort(key=lambda i: i.modified, reverse=True)
    return infos


def subagent_meta(path: Path) -> dict[str, object] | None:
    """The `.meta.json` beside a subagent transcript (`agentType`, `description`, `toolUseId`,
    `spawnDepth`), None when absent or unreadable."""
    meta = path.with_name(path.name[: -len(".jsonl")] + ".meta.json") if path.name.endswith(".jsonl") else None
    if meta is None:
        return None
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def subagents_of(path: Path) -> list[Path]:
    """Subagent transcripts of the main transcript `path` (`<sessionId>/subagents/agent-*.jsonl`)."""
    folder = path.with_suffix("") / "subagents"
    try:
        return sorted(folder.glob("agent-*.jsonl"))
    except OSError:
        return []
