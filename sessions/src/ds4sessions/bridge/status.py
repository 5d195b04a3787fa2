"""A session's bridge channel folder, the bridge's heartbeat, and whether it can steer now
(`status`: live / stale / not running / not installed).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from ds4sessions.agents.pi.discovery import agent_dir

from ds4sessions.bridge.install import EXTENSION_FILE, installed_path

STALE_SECONDS = 5.0
"""A heartbeat older than this (seconds) is stale; the bridge rewrites it about every second."""
_SESSION_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def channel_dir(session_id: str, agent: Path | None = None) -> Path:
    """The session's channel folder `<agentDir>/ds4tui/<session-id>/`. Raises ValueError for a
    session id Pi would not accept (`[A-Za-z0-9]` at both ends, `[A-Za-z0-9._-]` inside; Pi
    session format §1), so no header can point the channel elsewhere."""
    if not _SESSION_ID.fullmatch(session_id or ""):
        raise ValueError(f"not a Pi session id: {session_id!r}")
    return (agent or agent_dir()) / "ds4tui" / session_id





@dataclass(frozen=True)
class Heartbeat:
    """The bridge's last heartbeat: Pi's `pid`, the session, Pi's in-memory `leaf_id`, whether the
    agent was `idle`, Pi's `mode` (tui, rpc, json, print), commands `processed` and `pending`,
    `time_ms` (Unix ms of the beat)."""

    pid: int
    session_id: str
    session_file: str | None
    leaf_id: str | None
    idle: bool
    mode: str | None
    processed: int
    pending: int
    time_ms: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Heartbeat:
        """From `heartbeat.json`. Raises KeyError/TypeError/ValueError when malformed."""
        return cls(
            pid=int(data["pid"]), session_id=str(data["sessionId"]), session_file=data.get("sessionFile"),
            leaf_id=data.get("leafId"), idle=bool(data.get("idle")), mode=data.get("mode"),
            processed=int(data.get("processed", 0)), pending=int(data.get("pending", 0)), time_ms=int(data["timeMs"]),
        )


def read_heartbeat(session_id: str, agent: Path | None = None) -> Heartbeat | None:
    """The session's heartbeat, or None when there is none (or it is unreadable)."""
    path = channel_dir(session_id, agent) / "heartbeat.json"
    try:
        return Heartbeat.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _pid_alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie (exited but not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS, BSD): the signal check is all there is


@dataclass(frozen=True)
class BridgeStatus:
    """Whether the bridge can steer a session now.

    `state`: `live` (a heartbeat younger than `STALE_SECONDS` from a running process), `stale`
    (a heartbeat exists but is old or its process is gone), `not running` (installed, but no
    bridge has run for this session), `not installed`. `installed` says whether the extension is
    in `<agentDir>/extensions/` (a bridge loaded with `pi -e` is live without it). `age` is the
    heartbeat's age in seconds (None without one); `reason` one sentence.
    """

    state: str
    installed: bool
    heartbeat: Heartbeat | None
    age: float | None
    reason: str

    @property
    def live(self) -> bool:
        """True when commands can go through the bridge."""
        return self.state == "live"

    @property
    def header(self) -> str:
        """The dashboard header text: `bridge: live`, `bridge: stale`, `bridge: not running`,
        `bridge: not installed`."""
        return f"bridge: {self.state}"


def status(
    session_id: str | None, agent: Path | None = None, *, now: float | None = None, stale_after: float = STALE_SECONDS
) -> BridgeStatus:
    """The bridge's state for `session_id` (None: only whether it is installed). `now` in Unix
    seconds (tests)."""
    agent = agent or agent_dir()
    installed = installed_path(agent).is_file()
    beat = read_heartbeat(session_id, agent) if session_id else None
    if beat is None:
        if not installed:
            return BridgeStatus("not installed", False, None, None, f"no {EXTENSION_FILE} in {installed_path(agent).parent}")
        return BridgeStatus(
            "not running", True, None, None,
            "installed, but no Pi has run the bridge for this session (start or /reload Pi)",
        )
    now = time.time() if now is None else now
    age = max(0.0, now - beat.time_ms / 1000)
    if not _pid_alive(beat.pid):
        return BridgeStatus("stale", installed, beat, age, f"Pi (pid {beat.pid}) is no longer running")
    if age > stale_after:
        return BridgeStatus("stale", installed, beat, age, f"last heartbeat {age:.0f} s ago (Pi pid {beat.pid})")
    return BridgeStatus("live", installed, beat, age, f"Pi pid {beat.pid} ({beat.mode}), heartbeat {age:.1f} s ago")
