"""A session's bridge channel folder, the bridge's heartbeat, and whether it can steer now
(`status`: live / stale / not running / not installed).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from ds4sessions.agents.pi.discovery import agent_dir

from ds4sessions.bridge.install import EXTENSION_FILE, installed_path
from ds4sessions.safety import pid_is_agent, read_in

STALE_SECONDS = 5.0
"""A heartbeat older than this (seconds) is stale; the bridge rewrites it about every second."""
FUTURE_TOLERANCE = 2.0
"""A heartbeat more than this many seconds in the future is not trusted (clock skew allowance)."""
_SESSION_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def channel_dir(session_id: str, agent: Path | None = None) -> Path:
    """The session's channel folder `<agentDir>/ds4tui/<session-id>/`. Raises ValueError for a
    session id Pi would not accept (`[A-Za-z0-9]` at both ends, `[A-Za-z0-9._-]` inside; Pi
    session format §1), so no header can point the channel elsewhere."""
    if not _SESSION_ID.fullmatch(session_id or ""):
        raise ValueError(f"not a Pi session id: {session_id!r}")
    return (agent or agent_dir()) / "ds4tui" / session_id





PID_MAX = 2**22
"""The largest process id Linux hands out (`/proc/sys/kernel/pid_max` is at most 4,194,304 =
2**22; macOS and the BSDs stay below 100,000): a heartbeat pid must be in 2 .. PID_MAX."""
_COUNT_MAX = 2**53
"""Counts (`processed`, `pending`) are JavaScript numbers: integers up to 2**53."""
_TIME_MS_MAX = 8.64e15
"""The largest JavaScript Date in Unix milliseconds (ECMAScript §21.4.1.1)."""


class BadHeartbeat(ValueError):
    """`heartbeat.json` holds a field of a type or range the bridge never writes; `str(exc)`
    names the field and what it holds (e.g. `pid: 99999999999999999999999 is not a process id`)."""


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_int(data: Mapping[str, Any], key: str, low: int, high: int, default: int | None = None) -> int:
    value = data.get(key, default)
    if type(value) is float and value.is_integer():  # JSON numbers: 1.0 is 1
        value = int(value)
    if type(value) is not int or not low <= value <= high:
        raise BadHeartbeat(f"{key}: {_short(value)} is not an integer in {low}..{high}")
    return value


def _check_optional_str(data: Mapping[str, Any], key: str, limit: int = 4096) -> str | None:
    value = data.get(key)
    if value is not None and (type(value) is not str or len(value) > limit):
        raise BadHeartbeat(f"{key}: {_short(value)} is not a string (or null)")
    return value


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
        """From `heartbeat.json` (written by ds4tui-bridge.ts `beat()`), every field type- and
        range-checked where it enters (issue 30): `pid` an integer in 2..`PID_MAX` (a huge pid made
        `os.kill` raise OverflowError), `sessionId` a Pi session id, `sessionFile`/`leafId`/`mode`
        strings or null, `idle` a boolean, `processed`/`pending` integers in 0..2**53, `timeMs` a
        finite number within JavaScript's date range. Raises `BadHeartbeat` (a ValueError) naming
        the field, or KeyError/TypeError when `data` is not an object with `pid`/`timeMs`."""
        if not isinstance(data, Mapping):
            raise BadHeartbeat(f"not a JSON object but {type(data).__name__}")
        for key in ("pid", "sessionId", "timeMs"):
            if key not in data:
                raise BadHeartbeat(f"no {key}")
        session_id = data["sessionId"]
        if type(session_id) is not str or not _SESSION_ID.fullmatch(session_id):
            raise BadHeartbeat(f"sessionId: {_short(session_id)} is not a Pi session id")
        idle = data.get("idle", False)
        if type(idle) is not bool:
            raise BadHeartbeat(f"idle: {_short(idle)} is not a boolean")
        time_ms = data["timeMs"]
        if type(time_ms) not in (int, float) or not math.isfinite(time_ms) or not 0 <= time_ms <= _TIME_MS_MAX:
            raise BadHeartbeat(f"timeMs: {_short(time_ms)} is not a time in Unix milliseconds")
        return cls(
            pid=_check_int(data, "pid", 2, PID_MAX), session_id=session_id,
            session_file=_check_optional_str(data, "sessionFile"), leaf_id=_check_optional_str(data, "leafId"),
            idle=idle, mode=_check_optional_str(data, "mode", 64),
            processed=_check_int(data, "processed", 0, _COUNT_MAX, 0),
            pending=_check_int(data, "pending", 0, _COUNT_MAX, 0), time_ms=int(time_ms),
        )


def read_heartbeat(session_id: str, agent: Path | None = None) -> Heartbeat | None:
    """The session's heartbeat, or None when there is none (or it is unreadable or malformed)."""
    return load_heartbeat(session_id, agent)[0]


def load_heartbeat(session_id: str, agent: Path | None = None) -> tuple[Heartbeat | None, str | None]:
    """(the session's heartbeat, None), or (None, why it is not used): None when there is no
    heartbeat file, else one sentence (unreadable, not JSON, a field out of range)."""
    try:  # no symlink, no FIFO, inside the channel dir (ds4sessions.safety)
        raw = read_in(channel_dir(session_id, agent), "heartbeat.json", 1 << 20)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as err:
        return None, f"heartbeat.json is unreadable ({err})"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None, "heartbeat.json is not JSON"
    try:
        return Heartbeat.from_json(data), None
    except (BadHeartbeat, KeyError, TypeError) as err:
        return None, f"heartbeat.json is malformed ({err}); not trusted"


def _pid_alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie (exited but not yet reaped). A pid
    outside 1..`PID_MAX` (or not an int) is not a process: False, never OverflowError."""
    if type(pid) is not int or not 0 < pid <= PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError, OSError):
        return False
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
    beat, problem = load_heartbeat(session_id, agent) if session_id else (None, None)
    if beat is None:
        if problem is not None:
            return BridgeStatus("stale", installed, None, None, problem)
        if not installed:
            return BridgeStatus("not installed", False, None, None, f"no {EXTENSION_FILE} in {installed_path(agent).parent}")
        return BridgeStatus(
            "not running", True, None, None,
            "installed, but no Pi has run the bridge for this session (start or /reload Pi)",
        )
    now = time.time() if now is None else now
    age = now - beat.time_ms / 1000
    if age < -FUTURE_TOLERANCE:
        return BridgeStatus("stale", installed, beat, None, f"heartbeat from the future ({-age:.0f} s ahead); not trusted")
    age = max(0.0, age)
    if beat.pid <= 1 or not _pid_alive(beat.pid):
        return BridgeStatus("stale", installed, beat, age, f"Pi (pid {beat.pid}) is no longer running")
    if age > stale_after:
        return BridgeStatus("stale", installed, beat, age, f"last heartbeat {age:.0f} s ago (Pi pid {beat.pid})")
    if pid_is_agent(beat.pid) is False:
        return BridgeStatus("stale", installed, beat, age, f"pid {beat.pid} is not a Pi (Node) process; heartbeat not trusted")
    return BridgeStatus("live", installed, beat, age, f"Pi pid {beat.pid} ({beat.mode}), heartbeat {age:.1f} s ago")
