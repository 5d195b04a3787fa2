"""Where Gemini CLI keeps its sessions, and a cheap listing of them (shared/docs/gemini-cli-format.md;
Gemini CLI 0.61.0 sources cited per rule).

- Home: `$GEMINI_CLI_HOME` when set, else the user's home (packages/core/src/utils/paths.ts
  `homedir()`); the CLI's folder is `<home>/.gemini` (`Storage.getGlobalGeminiDir`), or
  `<home>/.cache/.gemini` under macOS's `sandbox-exec` (`Storage.getGlobalRuntimeDir`): both
  are searched.
- Sessions: `<gemini dir>/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<sessionId[:8]>.jsonl`
  (chatRecordingService.ts `initialize`: the UTC minute the file was started); `<project>` is the
  short name `projects.json` maps the project root to (`ProjectRegistry`; older CLIs used the
  root's SHA-256, which they migrate), and `tmp/<project>/.project_root` names the root too.
- Subagents: `chats/<parentSessionId>/<agentSessionId>.jsonl` (header `kind: "subagent"`),
  listed as sessions of their own whose `parent` is the folder's name.
- Like the CLI's own session list (packages/cli/src/utils/sessionUtils.ts `getAllSessionFiles`),
  a main file without resumable content (only a header and the session context: what a resume in
  a later minute leaves in a new file before it appends to the old one) is not listed.
- Live: modified within `LIVE_SECONDS` (the CLI records no pid).
- Settings: `<gemini dir>/settings.json` `model.compressionThreshold` (a fraction of the window;
  `Config.getCompressionThreshold`), read by `compression_setting`. The CLI also merges system and
  workspace settings; only the user's file is read here.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from ds4sessions.agents.base import SessionInfo

GEMINI_CLI = "gemini-cli"
"""This agent's id in every `--json` output's `"agent"`."""

HEAD_BYTES = 256 * 1024
"""Bytes read from a session's start for its listing (header, first prompt, model)."""

TAIL_BYTES = 64 * 1024
"""Bytes read from a session's end for its listing (the last model, the last update)."""

LIVE_SECONDS = 120.0
"""A session file modified within this many seconds is live."""

SESSION_FILE = re.compile(r"^session-.*\.jsonl$")
IGNORED_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")
"""User texts the CLI does not count as resumable content (sessionUtils `isIgnoredUserContent`)."""


def cli_home(env: Mapping[str, str] | None = None) -> Path:
    """`$GEMINI_CLI_HOME` (with `~` expanded) or the user's home."""
    env = os.environ if env is None else env
    value = env.get("GEMINI_CLI_HOME")
    return Path(value).expanduser() if value else Path.home()


def gemini_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """The CLI's folders that exist: `<home>/.gemini`, then `<home>/.cache/.gemini`."""
    home = cli_home(env)
    return [d for d in (home / ".gemini", home / ".cache" / ".gemini") if d.is_dir()]


def dir_of(path: Path) -> Path | None:
    """The CLI folder holding the session `path` (the parent of its `tmp/`), None when not under one."""
    for parent in Path(path).resolve().parents:
        if parent.name == "tmp":
            return parent.parent
    return None


def projects(gemini_dir: Path) -> dict[str, str]:
    """Short name → project root, from `projects.json` (`{"projects": {root: short}}`) and the
    `tmp/<short>/.project_root` files; {} when neither is readable."""
    out: dict[str, str] = {}
    try:
        data = json.loads((gemini_dir / "projects.json").read_text(encoding="utf-8"))
        for root, short in (data.get("projects") or {}).items() if isinstance(data, dict) else ():
            if isinstance(root, str) and isinstance(short, str):
                out[short] = root
    except (OSError, ValueError, AttributeError):
        pass
    try:
        folders = list((gemini_dir / "tmp").iterdir())
    except OSError:
        folders = []
    for folder in folders:
        if folder.name in out:
            continue
        try:
            root = (folder / ".project_root").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if root:
            out[folder.name] = root
    return out


def compression_setting(gemini_dir: Path | None) -> float | None:
    """`model.compressionThreshold` of `<gemini_dir>/settings.json` (a fraction in (0, 1]), None
    when absent, invalid or unreadable (the CLI then uses its default)."""
    if gemini_dir is None:
        return None
    try:
        data = json.loads((gemini_dir / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    model = data.get("model") if isinstance(data, dict) else None
    value = model.get("compressionThreshold") if isinstance(model, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1
    return float(value) if ok else None


def session_files(gemini_dir: Path) -> Iterator[tuple[Path, str | None]]:
    """(file, parent session id) of every session under `<gemini_dir>/tmp/*/chats/`: main files
    (`session-*.jsonl`, parent None) and subagent files (`<parent id>/*.jsonl`)."""
    try:
        folders = sorted((gemini_dir / "tmp").iterdir())
    except OSError:
        return
    for folder in folders:
        chats = folder / "chats"
        try:
            children = sorted(chats.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_file() and SESSION_FILE.match(child.name):
                yield child, None
            elif child.is_dir():
                try:
                    subs = sorted(p for p in child.iterdir() if p.suffix == ".jsonl" and p.is_file())
                except OSError:
                    continue
                for sub in subs:
                    yield sub, child.name


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def scan(data: bytes) -> dict[str, Any]:
    """Listing facts from some complete lines of a session: `sessionId`, `kind`, `summary`, the
    first prompt (`prompt`), the last `model`, and whether it holds resumable content (a user
    prompt, a reply, a tool call: chatRecordingService.ts `isResumableMessageRecord`)."""
    facts: dict[str, Any] = {"sessionId": None, "kind": None, "summary": None, "prompt": None, "model": None,
                             "resumable": False}
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(row, dict):
            continue
        if isinstance(row.get("sessionId"), str) and isinstance(row.get("projectHash"), str) and "id" not in row:
            facts["sessionId"] = facts["sessionId"] or row["sessionId"]
            facts["kind"] = row.get("kind") if isinstance(row.get("kind"), str) else facts["kind"]
            if isinstance(row.get("summary"), str):
                facts["summary"] = row["summary"]
            continue
        update = row.get("$set")
        if isinstance(update, dict):
            if isinstance(update.get("summary"), str):
                facts["summary"] = update["summary"]
            messages = update.get("messages")
            rows = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        elif isinstance(row.get("id"), str):
            rows = [row]
        else:
            continue
        for message in rows:
            kind = message.get("type")
            text = _text(message.get("content")).strip()
            if kind == "user" and text and not text.startswith(IGNORED_PREFIXES):
                facts["resumable"] = True
                if facts["prompt"] is None:
                    facts["prompt"] = " ".join(text.split())[:200]
            elif kind == "gemini":
                if text or message.get("toolCalls") or message.get("thoughts"):
                    facts["resumable"] = True
                if isinstance(message.get("model"), str):
                    facts["model"] = message["model"]
    return facts


def describe(path: Path, parent: str | None = None, names: Mapping[str, str] | None = None,
             now: float | None = None) -> SessionInfo | None:
    """A `SessionInfo` for one session file, None when unreadable, not a Gemini CLI session, or a
    main file without resumable content (module doc)."""
    try:
        st = path.stat()
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
            tail = b""
            if st.st_size > HEAD_BYTES:
                f.seek(max(st.st_size - TAIL_BYTES, HEAD_BYTES))
                tail = f.read(TAIL_BYTES).partition(b"\n")[2]
    except OSError:
        return None
    if len(head) == HEAD_BYTES:
        head = head[: head.rfind(b"\n") + 1]
    facts = scan(head)
    if tail:
        late = scan(tail)
        facts["model"] = late["model"] or facts["model"]
        facts["summary"] = late["summary"] or facts["summary"]
        facts["resumable"] = facts["resumable"] or late["resumable"] or st.st_size > 2 * HEAD_BYTES
    if facts["sessionId"] is None:
        return None
    if parent is None and not facts["resumable"]:
        return None
    now = time.time() if now is None else now
    short = path.parent.parent.name if parent is None else path.parent.parent.parent.name
    project = (names or {}).get(short) or short
    title = facts["prompt"] if parent is not None else facts["summary"] or facts["prompt"]  # (a subagent's summary is its result)
    return SessionInfo(agent=GEMINI_CLI, path=path, session_id=facts["sessionId"], modified=st.st_mtime,
                       size=st.st_size, project=project, title=title.strip().splitlines()[0][:200] if title else None,
                       live=(now - st.st_mtime) <= LIVE_SECONDS, parent=parent, model=facts["model"])


def discover(env: Mapping[str, str] | None = None, now: float | None = None) -> list[SessionInfo]:
    """Every Gemini CLI session under `gemini_dirs(env)` (main sessions and subagents), newest first."""
    infos: list[SessionInfo] = []
    seen: set[Path] = set()
    for gemini_dir in gemini_dirs(env):
        names = projects(gemini_dir)
        for path, parent in session_files(gemini_dir):
            try:
                real = path.resolve()
            except OSError:
                continue
            if real in seen:
                continue
            seen.add(real)
            info = describe(path, parent, names, now)
            if info is not None:
                infos.append(info)
    infos.sort(key=lambda i: i.modified, reverse=True)
    return infos


def project_of(path: Path, gemini_dir: Path) -> str | None:
    """The project root of the session `path` under `<gemini_dir>/tmp/<project>/chats/`
    (`projects`), None when unknown."""
    try:
        short = Path(path).resolve().relative_to((gemini_dir / "tmp").resolve()).parts[0]
    except (ValueError, IndexError, OSError):
        return None
    return projects(gemini_dir).get(short)


def subagent_parent(path: Path) -> str | None:
    """The parent session id of a subagent file (`chats/<parent>/<agent>.jsonl`), else None."""
    path = Path(path)
    return path.parent.name if path.parent.parent.name == "chats" else None
