"""Commands to a running Pi through the bridge: the inbox/outbox protocol (`submit`, `read_results`,
`wait_result`, `send_command`) and the steering actions built on it (`bridge_pin`,
`bridge_collapse`, `bridge_compact`: the same plans and refusals as the direct writer).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ds4core.models import ModelInfo

from ds4sessions.agents.pi.reader import PiSession
from ds4sessions.steering.steer import PIN_PREFIX, CollapsePlan, is_pin, plan_collapse
from ds4sessions.steering.writer import Expected, FileState, WriteRefused, read_state

from ds4sessions.bridge.status import channel_dir, status

KINDS = ("pin", "unpin", "collapse", "compact")
PROTOCOL_VERSION = 1


class BridgeUnavailable(Exception):
    """No live bridge answers for the session (not installed, Pi not running, stale heartbeat);
    the caller falls back to the direct writer. `str(exc)` says which."""


class BridgeTimeout(Exception):
    """The bridge did not answer a command in time. The command carried a deadline equal to the
    timeout, so it is refused if it had not started; one that had started (a compaction waiting
    for its model) may still complete, and its result will appear in the outbox."""




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
    folder.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    command_id = uuid.uuid4().hex
    args = dict(args)
    if private:
        text = json.dumps(dict(private), separators=(",", ":"))  # ASCII: hashes the same bytes in Node
        side = folder / f"{command_id}.private.json"
        fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        args["privateFile"] = side.name
        args["privateSha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    command = Command(command_id, kind, args, leaf_id, now, now + int(deadline_seconds * 1000))
    line = (json.dumps(command.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(folder / "inbox.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return command


def read_results(session_id: str, agent: Path | None = None) -> dict[str, CommandResult]:
    """Every result in the session's outbox, by command id (complete lines only)."""
    path = channel_dir(session_id, agent) / "outbox.jsonl"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    results = {}
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            result = CommandResult.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
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
