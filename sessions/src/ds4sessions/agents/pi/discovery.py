"""Where Pi keeps its sessions, and a cheap listing of them (Pi session format §1).

- Agent dir: `$PI_CODING_AGENT_DIR` (a leading `~` expanded) or `~/.pi/agent`.
- Sessions: `<agentDir>/sessions/--<encoded cwd>--/*.jsonl`, or flat in a custom folder given by
  `$PI_CODING_AGENT_SESSION_DIR`.
- A file is a session when its first parsable line is `{"type":"session","id":<string>}`; Pi
  scans at most 1 MiB for it. "Newest" = the most recently modified file.

Listing never parses message bodies: it reads the header, then scans raw lines for the few entry
types it shows (session name, model) with a byte test before any JSON parsing (bad input B13).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ds4core.models import ModelTable

from ds4sessions.ingest.limits import MAX_DEPTH, OversizedLine, iter_lines, json_depth
from ds4sessions.safety import file_kind, open_regular

HEADER_SCAN_BYTES = 1 << 20
"""Bytes scanned for the header line, as Pi does during discovery (1 MiB)."""

_LISTED_TYPES = re.compile(rb'"type"\s*:\s*"(session_info|model_change)"')
"""Entry types the listing parses (any JSON spacing); other lines are only counted."""


def agent_dir() -> Path:
    """Pi's agent directory: `$PI_CODING_AGENT_DIR` (with `~` expanded) or `~/.pi/agent`."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def session_roots() -> list[Path]:
    """Folders that may hold session files: the custom session dir (flat) and/or
    `<agentDir>/sessions` (one sub-folder per cwd)."""
    roots = []
    custom = os.environ.get("PI_CODING_AGENT_SESSION_DIR")
    if custom:
        roots.append(Path(custom).expanduser())
    roots.append(agent_dir() / "sessions")
    return roots


@dataclass(frozen=True)
class SessionInfo:
    """One discovered session file: path, header fields, name, model, counts.

    `size` in bytes, `modified` as a Unix time in seconds, `entries` = non-header lines that
    look like entries (complete lines starting with `{`).
    """

    path: Path
    session_id: str
    cwd: str
    started: str
    modified: float
    size: int
    name: str | None
    model: str | None
    entries: int


def read_header(path: Path) -> dict | None:
    """The session header of `path` (first parsable JSON line within 1 MiB), or None when the
    file is not a Pi session (unreadable, no header, or a first object that is not a header)."""
    try:  # a FIFO or device in the sessions folder is never opened for reading (NotRegularFile)
        with os.fdopen(open_regular(path), "rb") as f:
            chunk = f.read(HEADER_SCAN_BYTES)
    except OSError:
        return None
    for raw in chunk.split(b"\n"):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw) if json_depth(raw) <= MAX_DEPTH else None
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str):
            return obj
        return None
    return None


def _iter_files() -> Iterator[Path]:
    for root in session_roots():
        if not root.is_dir():
            continue
        yield from root.glob("*.jsonl")
        yield from root.glob("*/*.jsonl")


def describe(path: Path) -> SessionInfo | None:
    """A `SessionInfo` for one file, or None when it is not a session. Reads the file once,
    parsing only header, `session_info` and `model_change` lines (and assistant lines' model
    field when no model_change exists)."""
    header = read_header(path)
    if header is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    name = None
    model = None
    entries = 0
    try:
        f = os.fdopen(open_regular(path), "rb")
    except OSError:
        return None
    with f:
        for _line_no, _offset, raw, complete in iter_lines(f):  # lines capped: bounded memory
            if not complete or not raw.startswith(b"{") or isinstance(raw, OversizedLine):
                continue
            entries += 1
            if _LISTED_TYPES.search(raw, 0, 200):
                try:
                    obj = json.loads(raw) if json_depth(raw) <= MAX_DEPTH else None
                except (ValueError, RecursionError):
                    continue
                if not isinstance(obj, dict):
                    continue
                if obj.get("type") == "session_info":
                    name = str(obj.get("name") or "").strip() or None
                elif obj.get("type") == "model_change":
                    model = f"{obj.get('provider')}/{obj.get('modelId')}"
    return SessionInfo(
        path=path, session_id=header["id"], cwd=str(header.get("cwd", "")), started=str(header.get("timestamp", "")),
        modified=st.st_mtime, size=st.st_size, name=name, model=model, entries=max(entries - 1, 0),
    )


def unreadable_sessions() -> list[tuple[Path, str]]:
    """`*.jsonl` files under the session roots that cannot be read, with the reason (the
    listing leaves them out; callers say so)."""
    out = []
    for p in _iter_files():
        try:
            os.close(open_regular(p))
        except OSError as exc:
            out.append((p, exc.strerror or str(exc)))
    return out


def list_sessions() -> list[SessionInfo]:
    """Every session under the session roots, newest (by mtime) first."""
    infos = [info for p in _iter_files() if (info := describe(p)) is not None]
    return sorted(infos, key=lambda i: i.modified, reverse=True)


def skipped_files() -> list[str]:
    """One line per `*.jsonl` under the session roots that is not a regular file (a FIFO, a
    device, a socket, a directory): "`path`: skipped, a FIFO (named pipe)". Such files are never
    opened (`read_header` refuses them); this names them so the skip is visible. Only `stat`s."""
    out = []
    for p in _iter_files():
        try:
            kind = file_kind(os.stat(p).st_mode)
        except OSError:
            continue
        if kind is not None:
            out.append(f"{p}: skipped, {kind}")
    return out


def newest_session() -> Path | None:
    """The most recently modified session file (header-checked), or None when there is none."""
    candidates = []
    for p in _iter_files():
        try:
            candidates.append((p.stat().st_mtime, p))
        except OSError:
            continue
    for _, p in sorted(candidates, reverse=True):
        if read_header(p) is not None:
            return p
    return None


def load_model_table(base: ModelTable | None = None) -> ModelTable:
    """The bundled model table with `<agentDir>/models.json` applied when present; problems with
    that file become `warnings` on the returned table (never an exception)."""
    table = base or ModelTable.bundled()
    path = agent_dir() / "models.json"
    if not path.exists():
        return table
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        table = table.with_user_models({"providers": {}}, origin=str(path))
        table.warnings = [f"{path}: unreadable ({exc}); using the bundled model table"]
        return table
    return table.with_user_models(data, origin=str(path))
