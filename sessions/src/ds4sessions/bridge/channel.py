"""The ds4tui bridge: steer a running Pi through a Pi extension instead of writing the file.

A Pi that has a session open keeps it in memory; an entry another process appends is not seen
until the session is reopened. The bridge extension (`ds4sessions/bridge/ds4tui-bridge.ts`, installed into
`<agentDir>/extensions/`) runs inside Pi and applies ds4tui's commands through Pi's own API, so
Pi itself appends the entries and its next request carries the change. See docs/bridge.md.

Channel, per session: `<agentDir>/ds4tui/<session-id>/`

- `inbox.jsonl` (ds4tui appends): `{"v": 1, "id", "kind": "pin"|"unpin"|"collapse"|"compact",
  "args", "leafId", "time", "deadline"}` (times in Unix ms);
- `outbox.jsonl` (the bridge appends): `{"v": 1, "id", "kind", "status":
  "applied"|"refused"|"failed", "reason", "entryIds", "leafBefore", "leafAfter", "time"}`;
- `heartbeat.json` (the bridge rewrites about once a second): `{"v": 1, "pid", "sessionId",
  "sessionFile", "leafId", "idle", "mode", "processed", "pending", "time", "timeMs"}`;
- `requests.jsonl` (the bridge appends, one line per provider request): time, provider/model,
  cache retention, system-prompt and tool-schema chars-v1 token estimates and SHA-256 hashes,
  per-message chars-v1 tokens and DS4 fingerprints (`ds4core.cache_policy.message_fingerprint`
  of the message as stored);
- `<command-id>.private.json` (ds4tui writes, mode 0600): a command's text arguments (the
  collapse summary, compaction instructions), named in the command's `args.privateFile` with its `args.privateSha256`;
  the bridge deletes it once it has answered the command (ds4tui, when the command times out).

No message content stays in the channel.

Commands apply only while the agent is idle, in inbox order, each once, and only when Pi's leaf
is still the `leafId` ds4tui saw; a command not started by its `deadline` is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ds4core.models import ModelInfo

from ds4sessions.agents.pi.discovery import agent_dir
from ds4sessions.agents.pi.reader import PiSession
from ds4sessions.safety import open_in, pid_is_agent, private_dir, read_in
from ds4sessions.steering.steer import PIN_PREFIX, CollapsePlan, is_pin, plan_collapse
from ds4sessions.steering.writer import Expected, FileState, WriteRefused, read_state

EXTENSION_FILE = "ds4tui-bridge.ts"
"""File name of the extension, in the repository (`bridge/pi/`) and in `<agentDir>/extensions/`."""
STALE_SECONDS = 5.0
"""A heartbeat older than this (seconds) is stale; the bridge rewrites it about every second."""
FUTURE_TOLERANCE = 2.0
"""A heartbeat more than this many seconds in the future is not trusted (clock skew allowance)."""
KINDS = ("pin", "unpin", "collapse", "compact")
PROTOCOL_VERSION = 1
_SESSION_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


class BridgeUnavailable(Exception):
    """No live bridge answers for the session (not installed, Pi not running, stale heartbeat);
    the caller falls back to the direct writer. `str(exc)` says which."""


class BridgeTimeout(Exception):
    """The bridge did not answer a command in time. The command carried a deadline equal to the
    timeout, so it is refused if it had not started; one that had started (a compaction waiting
    for its model) may still complete, and its result will appear in the outbox."""


def extension_source() -> Path:
    """The extension file shipped with ds4tui: `$DS4TUI_BRIDGE_SOURCE`, else the copy inside this
    package (`ds4sessions/bridge/ds4tui-bridge.ts`, in a checkout and in an installed wheel alike).
    Raises FileNotFoundError when none exists."""
    env = os.environ.get("DS4TUI_BRIDGE_SOURCE")
    if env:
        path = Path(env).expanduser()
    else:
        path = Path(__file__).resolve().parent / EXTENSION_FILE
    if not path.is_file():
        raise FileNotFoundError(f"the bridge extension is not at {path} (set DS4TUI_BRIDGE_SOURCE to its path)")
    return path


def installed_path(agent: Path | None = None) -> Path:
    """Where `install` puts the extension: `<agentDir>/extensions/ds4tui-bridge.ts` (a location Pi
    auto-discovers; Pi extensions doc, "Extension Locations")."""
    return (agent or agent_dir()) / "extensions" / EXTENSION_FILE


@dataclass(frozen=True)
class InstallResult:
    """`path` written; `previous`: "none" (new), "same" (identical file was there) or "replaced"."""

    path: Path
    previous: str

    def describe(self) -> str:
        """One line for the CLI."""
        what = {"none": "installed", "same": "already installed (unchanged)", "replaced": "updated"}[self.previous]
        return f"{what}: {self.path} (Pi loads it at its next start or /reload)"


def install(agent: Path | None = None) -> InstallResult:
    """Copy the extension into `<agentDir>/extensions/` (folders created). Raises
    FileNotFoundError (no source) or OSError."""
    source = extension_source()
    target = installed_path(agent)
    data = source.read_bytes()
    previous = "none"
    if target.exists():
        previous = "same" if target.read_bytes() == data else "replaced"
    if previous != "same":
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return InstallResult(target, previous)


def uninstall(agent: Path | None = None) -> Path | None:
    """Remove the installed extension; returns the removed path, or None when it was not
    installed. A running Pi keeps the loaded copy until it restarts or reloads. The channel
    folders stay (`<agentDir>/ds4tui/`; remove them with `purge_channels`)."""
    target = installed_path(agent)
    if not target.exists():
        return None
    target.unlink()
    return target


def purge_channels(agent: Path | None = None) -> Path | None:
    """Delete every channel folder (`<agentDir>/ds4tui/`); returns it, or None when absent."""
    root = (agent or agent_dir()) / "ds4tui"
    if not root.exists():
        return None
    shutil.rmtree(root)
    return root


def channel_dir(session_id: str, agent: Path | None = None) -> Path:
    """The session's channel folder `<agentDir>/ds4tui/<session-id>/`. Raises ValueError for a
    session id Pi would not accept (`[A-Za-z0-9]` at both ends, `[A-Za-z0-9._-]` inside; Pi
    session format §1), so no header can point the channel elsewhere."""
    if not _SESSION_ID.fullmatch(session_id or ""):
        raise ValueError(f"not a Pi session id: {session_id!r}")
    return (agent or agent_dir()) / "ds4tui" / session_id


# --------------------------------------------------------------------------------------------
# Heartbeat and status


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
    try:  # no symlink, no FIFO, inside the channel dir (ds4sessions.safety)
        return Heartbeat.from_json(json.loads(read_in(channel_dir(session_id, agent), "heartbeat.json", 1 << 20)))
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError):
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


# --------------------------------------------------------------------------------------------
# Commands


@dataclass(frozen=True)
class Command:
    """One inbox line: `id` (unique), `kind` (one of `KINDS`), `args`, the `leaf_id` the user saw,
    `time` and `deadline` in Unix ms."""

    id: str
    kind: str
    args: dict[str, Any]
    leaf_id: str | None
    time: int
    deadline: int

    def to_json(self) -> dict[str, Any]:
        """The inbox line's object."""
        return {
            "v": PROTOCOL_VERSION, "id": self.id, "kind": self.kind, "args": self.args, "leafId": self.leaf_id,
            "time": self.time, "deadline": self.deadline,
        }


@dataclass(frozen=True)
class CommandResult:
    """One outbox line: `status` `applied` | `refused` | `failed`, the bridge's `reason`, the ids
    of the entries Pi appended (`entry_ids`, file order), Pi's leaf before and after."""

    id: str
    kind: str
    status: str
    reason: str
    entry_ids: tuple[str, ...] = ()
    leaf_before: str | None = None
    leaf_after: str | None = None
    time: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def applied(self) -> bool:
        """True when Pi applied the command."""
        return self.status == "applied"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CommandResult:
        """From an outbox line."""
        return cls(
            id=str(data["id"]), kind=str(data.get("kind", "")), status=str(data.get("status", "failed")),
            reason=str(data.get("reason", "")), entry_ids=tuple(data.get("entryIds") or ()),
            leaf_before=data.get("leafBefore"), leaf_after=data.get("leafAfter"), time=str(data.get("time", "")),
            raw=dict(data),
        )

    def describe(self) -> str:
        """One line for the status bar: names the path taken (the bridge) and the outcome."""
        if self.applied:
            ids = ", ".join(self.entry_ids) or "no entries"
            return f"via Pi bridge: {self.kind} applied ({self.reason}); Pi appended {ids}"
        return f"via Pi bridge: {self.kind} {self.status}: {self.reason}"


def submit(
    session_id: str,
    kind: str,
    args: Mapping[str, Any],
    leaf_id: str | None,
    *,
    private: Mapping[str, Any] | None = None,
    agent: Path | None = None,
    deadline_seconds: float = 30.0,
) -> Command:
    """Append one command to the session's inbox (one `O_APPEND` write of a whole line) and return
    it. `leaf_id`: the leaf the user acted on (the bridge refuses the command when Pi's leaf
    differs). `private`: arguments holding text (a summary, the user's instructions), written to a 0600 side file the
    bridge reads, checks against its SHA-256 and deletes, so they never sit in the inbox. The
    bridge refuses the command when it has not started within `deadline_seconds`. Raises
    ValueError (unknown kind) or OSError."""
    if kind not in KINDS:
        raise ValueError(f"unknown bridge command kind {kind!r} (one of {', '.join(KINDS)})")
    folder = channel_dir(session_id, agent)
    private_dir(folder.parent)  # 0700, whatever the umask (ds4sessions.safety)
    private_dir(folder)
    now = int(time.time() * 1000)
    command_id = uuid.uuid4().hex
    args = dict(args)
    if private:
        text = json.dumps(dict(private), separators=(",", ":"))  # ASCII: hashes the same bytes in Node
        side = folder / f"{command_id}.private.json"
        fd = open_in(folder, side.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        args["privateFile"] = side.name
        args["privateSha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    command = Command(command_id, kind, args, leaf_id, now, now + int(deadline_seconds * 1000))
    line = (json.dumps(command.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    fd = open_in(folder, "inbox.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return command


def read_results(session_id: str, agent: Path | None = None) -> dict[str, CommandResult]:
    """Every result in the session's outbox, by command id (complete lines only)."""
    try:
        data = read_in(channel_dir(session_id, agent), "outbox.jsonl")
    except (OSError, ValueError):  # absent, a symlink, a FIFO: no results
        return {}
    results = {}
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            result = CommandResult.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
            continue
        results[result.id] = result
    return results


def wait_result(
    session_id: str, command_id: str, *, agent: Path | None = None, timeout: float = 30.0, poll: float = 0.1
) -> CommandResult:
    """Wait up to `timeout` seconds for the command's result. Raises BridgeTimeout (and then
    deletes the command's private side file, if the bridge has not)."""
    end = time.monotonic() + timeout
    while True:
        result = read_results(session_id, agent).get(command_id)
        if result is not None:
            return result
        if time.monotonic() >= end:
            (channel_dir(session_id, agent) / f"{command_id}.private.json").unlink(missing_ok=True)
            raise BridgeTimeout(f"the Pi bridge did not answer command {command_id} within {timeout:g} s")
        time.sleep(poll)


def send_command(
    session_id: str,
    kind: str,
    args: Mapping[str, Any],
    leaf_id: str | None,
    *,
    private: Mapping[str, Any] | None = None,
    agent: Path | None = None,
    timeout: float = 30.0,
) -> CommandResult:
    """Send one command to the live bridge and wait for its result (`timeout` seconds; the
    command's deadline is the same). Raises BridgeUnavailable (no live bridge: nothing was sent),
    BridgeTimeout, ValueError, OSError."""
    state = status(session_id, agent)
    if not state.live:
        raise BridgeUnavailable(f"{state.header}: {state.reason}")
    command = submit(session_id, kind, args, leaf_id, private=private, agent=agent, deadline_seconds=timeout)
    return wait_result(session_id, command.id, agent=agent, timeout=timeout)


# --------------------------------------------------------------------------------------------
# Steering actions through the bridge (same plans and refusals as the direct writer)


def pin_label(session: PiSession, entry_id: str, *, clear: bool = False, note: str | None = None) -> str | None:
    """The label text `ds4sessions.steering.steer.pin` would write for `entry_id` (None = clear the label):
    `ds4:pin`, then `note` or the existing plain label; unpinning keeps the text after `ds4:pin`.
    Raises WriteRefused (`unknown_entry`, `nothing_to_do`) as `steer.pin` does."""
    if entry_id not in session.by_id:
        raise WriteRefused("unknown_entry", f"no entry {entry_id} in the session")
    current = session.labels.get(entry_id)
    if clear:
        if not is_pin(current):
            raise WriteRefused("nothing_to_do", f"entry {entry_id} is not pinned")
        rest = (current or "").strip()[len(PIN_PREFIX) :].strip()
        return rest or None
    if is_pin(current):
        raise WriteRefused("nothing_to_do", f"entry {entry_id} is already pinned ({current})")
    suffix = note if note is not None else current
    return f"{PIN_PREFIX} {suffix.strip()}" if suffix and suffix.strip() else PIN_PREFIX


def collapse_args(plan: CollapsePlan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `collapse` command's (args, private args) for a confirmed plan: the tree move's target
    (`anchorId`) and the entries it summarises (`spanEntryIds`; the bridge cancels the move when
    Pi's span differs); privately, ds4tui's deterministic `summary` and its `details`."""
    args = {"anchorId": plan.anchor_id, "spanEntryIds": list(plan.span_entry_ids)}
    return args, {"summary": plan.entry["summary"], "details": plan.entry.get("details", {})}


def _checked_state(path: str | Path, expected: Expected | None) -> FileState:
    """The file as read now, after checking that its leaf (the leaf sent) is still the leaf the
    user saw (`expected.leaf_id`; WriteRefused `leaf_changed` otherwise, as the
    direct writer). The bridge checks again against Pi's in-memory leaf."""
    state = read_state(path)
    if state.session.session_id is None:
        raise WriteRefused("not_a_session", f"{path} is not a Pi session (no header id)")
    if expected is not None and expected.leaf_id is not None and expected.leaf_id != state.leaf_id:
        raise WriteRefused(
            "leaf_changed", f"{path}: the leaf moved since you looked at it ({expected.leaf_id} → {state.leaf_id})"
        )
    return state


def bridge_pin(
    path: str | Path,
    entry_id: str,
    *,
    clear: bool = False,
    note: str | None = None,
    expected: Expected | None = None,
    agent: Path | None = None,
    timeout: float = 15.0,
) -> CommandResult:
    """Pin (or with `clear`, unpin) `entry_id` through the live bridge (`pi.setLabel`).
    `expected.leaf_id` is the leaf the user saw (default: the file's leaf now; `expected.size` is
    not used: Pi checks the leaf). Raises WriteRefused (`leaf_changed`, `nothing_to_do`,
    `unknown_entry`), BridgeUnavailable, BridgeTimeout."""
    state = _checked_state(path, expected)
    label = pin_label(state.session, entry_id, clear=clear, note=note)
    args: dict[str, Any] = {"targetId": entry_id}
    if label is not None:
        args["label"] = label
    kind = "unpin" if clear else "pin"
    return send_command(str(state.session.session_id), kind, args, state.leaf_id, agent=agent, timeout=timeout)


def bridge_collapse(
    path: str | Path,
    turns: int,
    *,
    expected: Expected | None = None,
    model: ModelInfo | None = None,
    agent: Path | None = None,
    timeout: float = 15.0,
) -> CommandResult:
    """Collapse the last `turns` finished turns through the live bridge: Pi moves its leaf to the
    plan's anchor and appends a `branch_summary` holding ds4tui's summary (no model call).
    Raises WriteRefused (`leaf_changed`; `cannot_collapse`, as `steer.plan_collapse`),
    BridgeUnavailable, BridgeTimeout."""
    state = _checked_state(path, expected)
    args, private = collapse_args(plan_collapse(state, turns, model))
    return send_command(
        str(state.session.session_id), "collapse", args, state.leaf_id, private=private, agent=agent, timeout=timeout
    )


def bridge_compact(
    path: str | Path,
    *,
    instructions: str | None = None,
    expected: Expected | None = None,
    agent: Path | None = None,
    timeout: float = 180.0,
) -> CommandResult:
    """Compact through the live bridge (`ctx.compact` with the user's `instructions`; Pi, or a
    compaction extension, makes the summary call). Raises WriteRefused (`leaf_changed`),
    BridgeUnavailable, BridgeTimeout."""
    state = _checked_state(path, expected)
    private = {"instructions": instructions} if instructions else None
    return send_command(
        str(state.session.session_id), "compact", {}, state.leaf_id, private=private, agent=agent, timeout=timeout
    )


# --------------------------------------------------------------------------------------------
# Request metadata


@dataclass(frozen=True)
class RequestMessage:
    """One message of a provider request: `role`, chars-v1 `tokens`, DS4 fingerprint `fp`."""

    role: str | None
    tokens: int
    fp: str


@dataclass(frozen=True)
class RequestMeta:
    """One provider request as the bridge saw it (no content).

    `seq` (1-based per Pi process), `time` (ISO), `leaf_id` (Pi's leaf when sent), `provider`,
    `model`, `api`, `cache_retention` (`short`/`long`), `system_tokens` and `tool_tokens`
    (chars-v1: DS4's `fixedTokens` = their sum), `system_hash`/`tools_hash` (SHA-256),
    `tool_names`, `messages` (the transcript sent, system messages included), `payload_bytes`.
    """

    seq: int
    time: str
    leaf_id: str | None
    provider: str | None
    model: str | None
    api: str | None
    cache_retention: str | None
    system_tokens: int
    system_hash: str
    tool_tokens: int
    tools_hash: str
    tool_names: tuple[str, ...]
    messages: tuple[RequestMessage, ...]
    payload_bytes: int

    @property
    def fixed_tokens(self) -> int:
        """System prompt + tool schema tokens (DS4 `fixedTokens`, chars-v1)."""
        return self.system_tokens + self.tool_tokens

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestMeta:
        """From a `requests.jsonl` line. Raises KeyError/TypeError/ValueError when malformed."""
        system, tools = data.get("system") or {}, data.get("tools") or {}
        return cls(
            seq=int(data["seq"]), time=str(data.get("time", "")), leaf_id=data.get("leafId"),
            provider=data.get("provider"), model=data.get("model"), api=data.get("api"),
            cache_retention=data.get("cacheRetention"), system_tokens=int(system.get("tokens", 0)),
            system_hash=str(system.get("hash", "")), tool_tokens=int(tools.get("tokens", 0)),
            tools_hash=str(tools.get("hash", "")), tool_names=tuple(tools.get("names") or ()),
            messages=tuple(RequestMessage(m.get("role"), int(m.get("tokens", 0)), str(m["fp"])) for m in data.get("messages") or ()),
            payload_bytes=int((data.get("payload") or {}).get("bytes", 0)),
        )


def read_requests(session_id: str, agent: Path | None = None) -> list[RequestMeta]:
    """Every request line of the session, oldest first (malformed or torn lines skipped)."""
    try:
        data = read_in(channel_dir(session_id, agent), "requests.jsonl")
    except (OSError, ValueError):  # absent, a directory, a symlink, unreadable: no metadata
        return []
    out = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            obj = json.loads(line)
            if isinstance(obj, dict):
                out.append(RequestMeta.from_json(obj))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
            continue  # a malformed line is skipped, never fatal
    return out


def prefix_change(previous: RequestMeta, current: RequestMeta) -> int | None:
    """Index of the first message of `current` whose fingerprint differs from `previous` at the
    same position ("prefix changed at message N"); None when `current` extends `previous`
    unchanged. A changed system prompt or tool schema counts as a change at message 0."""
    if previous.system_hash != current.system_hash or previous.tools_hash != current.tools_hash:
        return 0
    for index, (old, new) in enumerate(zip(previous.messages, current.messages)):
        if old.fp != new.fp:
            return index
    if len(current.messages) < len(previous.messages):
        return len(current.messages)
    return None
