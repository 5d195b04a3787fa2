"""The one way ds4tui writes to a Pi session file: append-only, checked, journaled.

Rules (Pi session format §2, §4; bad input B03):

- Only appends. Never rewrites or truncates a byte it did not write: the file is opened
  `O_WRONLY | O_APPEND` (never `O_TRUNC`, never `O_CREAT`), the new lines go out in **one**
  `os.write()` of complete, `\\n`-terminated lines, then `os.fsync()`. Bytes before the old end
  stay identical. A short or failed write or fsync (a full disk, a file-size limit) is taken back
  under the lock (`write_whole`: the file is cut back to its old size, or our partial bytes cut
  out from under an agent line that landed after them), the journal record is marked
  `abandoned`, and the refusal (`write_failed`) says nothing was written (issue 30).
- An entry's `parentId` is the file's current leaf (its last entry, read from the file just
  before writing), never a label's target and never a cached leaf (B03). Only re-branching
  entries (a `branch_summary` anchored at an earlier entry, an undo that moves the leaf back)
  name another parent, explicitly.
- Ids: 8 lowercase hex characters (the first 8 of a random UUID), unique within the file, as
  Pi's `generateId` (§4). Timestamps: ISO-8601 UTC with milliseconds and `Z`.
- JSON as `JSON.stringify` writes it (`ds4core.jsjson.stringify`: compact, keys in JavaScript
  order, no ASCII escaping).

Refusals (`WriteRefused`, nothing written): the file is not a v3 Pi session (no header, or a
v1/v2 file that Pi rewrites on open), its last line is partial, it changed since the state the
user acted on (`Expected`: size and leaf id), the agent is mid-turn (`agent_busy`), the file grew
in the last `quiet_seconds`, or a process holds it open (`open_holders`) when the action refuses
that (collapse, compaction). `force=True` overrides only the last three (busy, recent growth,
open file); it never overrides a partial line, a changed file or a non-session.

Every write is recorded in a `Journal` (SQLite under `state_dir()`), with what undoes it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ds4core.jsjson import stringify
from ds4sessions.agents.pi.context import branch_path
from ds4sessions.agents.pi.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    CUSTOM_MESSAGE,
    MESSAGE,
    Entry,
)
from ds4sessions.agents.pi.reader import PiSession, PiSessionReader
from ds4sessions.safety import NotRegularFile, open_regular
from ds4sessions.steering.journal import Journal, JournalError, JournalRecord, serialize_entry, state_dir  # noqa: F401 (re-exported)

QUIET_SECONDS = 3.0
"""A file modified less than this many seconds ago is taken as being written by a running agent."""

CONTEXT_ENTRY_TYPES = frozenset({MESSAGE, COMPACTION, BRANCH_SUMMARY, CUSTOM_MESSAGE})


class WriteRefused(Exception):
    """A write was refused and nothing was written. `code` names the check (`not_a_session`,
    `migrated`, `partial_last_line`, `changed`, `leaf_changed`, `busy`, `recent_growth`,
    `open_by_process`, `locked`, `unknown_entry`, `nothing_to_do`, `not_undoable`, `read_only`,
    `journal`, `write_failed`: a short or failed write, taken back); `str(exc)` is
    a sentence for the user."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Expected:
    """The state the user acted on: file size in bytes and leaf id (None = do not check)."""

    size: int | None = None
    leaf_id: str | None = None


@dataclass(frozen=True)
class Holder:
    """A process that has the session file open: `pid` and its command name."""

    pid: int
    name: str


@dataclass(frozen=True)
class FileState:
    """A session file as read just before a write: `size` and `mtime` (Unix seconds) of the
    bytes read, the parsed `session` (whose `leaf_id` is the current leaf)."""

    path: Path
    size: int
    mtime: float
    session: PiSession

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: the id of the last entry in file order."""
        return self.session.leaf_id


@dataclass(frozen=True)
class WriteResult:
    """What one write appended: `entries` (as written), at byte `offset` (= old size), `length`
    bytes; `journal_id` is the journal row (None without a journal); `race`: None, or what happened
    when another writer's lines landed between our read and our write (see `append_entries`)."""

    path: Path
    offset: int
    length: int
    entries: tuple[dict[str, Any], ...]
    journal_id: int | None
    race: str | None = None

    @property
    def entry_ids(self) -> list[str]:
        """The ids of the appended entries, in order."""
        return [e["id"] for e in self.entries]

    def describe(self) -> str:
        """One line for the status bar / CLI: what was written where."""
        kinds = ", ".join(f"{e['type']} {e['id']}" for e in self.entries)
        journal = f" (journal #{self.journal_id})" if self.journal_id is not None else ""
        race = f"; {self.race}" if self.race else ""
        return f"appended {kinds} to {self.path} at byte {self.offset} ({self.length} bytes){journal}{race}"


def iso_now(now: float | None = None) -> str:
    """ISO-8601 UTC timestamp with milliseconds and `Z` (JavaScript `toISOString()`), for the
    Unix time `now` in seconds (default: the current time)."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_entry_id(taken: set[str] | Mapping[str, Any]) -> str:
    """A fresh entry id not in `taken`: the first 8 hex chars of a random UUID, or a whole UUID
    after 100 collisions (Pi's `generateId`, Pi session format §4)."""
    for _ in range(100):
        candidate = str(uuid.uuid4())[:8]
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())


def read_state(path: str | Path) -> FileState:
    """Read the whole session file once (binary) and parse it; a torn last line stays unparsed
    (`session.diagnostics.pending`/`end_offset` < `size` shows it). Raises OSError."""
    path = Path(path)
    with path.open("rb") as f:
        st = os.fstat(f.fileno())
        data = f.read()
    return FileState(path, len(data), st.st_mtime, _parse(path, data))


def _parse(path: Path, data: bytes) -> PiSession:
    reader = PiSessionReader(path)
    complete = data[: data.rfind(b"\n") + 1]
    lines = []
    offset = 0
    for line_no, line in enumerate(complete.split(b"\n")[:-1], start=1):
        lines.append((line_no, offset, line))
        offset += len(line) + 1
    reader.feed(lines)
    reader.set_pending_tail(len(data) - len(complete))
    return reader


def agent_busy(session: PiSession) -> str | None:
    """Why the agent looks mid-turn, or None when the last turn is finished.

    Looks at the last message-bearing entry on the branch of the file's leaf: a `user` message
    (the model is answering), a `toolResult` (the model has not replied to it yet), or an
    assistant message that made tool calls or stopped with `toolUse` (results pending). An
    aborted or errored assistant message ends the turn.
    """
    for entry in reversed(branch_path(session)):
        if entry.type not in CONTEXT_ENTRY_TYPES:
            continue
        role = entry.role
        if role == "user":
            return f"the last message ({entry.id}) is a user prompt: the agent is answering it"
        if role == "toolResult":
            return f"the last message ({entry.id}) is a tool result the model has not answered yet"
        if role == "assistant":
            message = entry.message or {}
            if message.get("stopReason") in ("aborted", "error"):
                return None
            calls = [
                b.get("id") for b in message.get("content") or () if isinstance(b, dict) and b.get("type") == "toolCall"
            ]
            if calls or message.get("stopReason") == "toolUse":
                return f"the last message ({entry.id}) has tool call(s) without results: {', '.join(map(str, calls))}"
        return None
    return None


def open_holders(path: str | Path) -> list[Holder]:
    """Other processes that have `path` open (this process excluded).

    Linux: scans `/proc/<pid>/fd/*` links (processes we may not inspect are skipped). Elsewhere:
    `lsof -t -- path` when `lsof` exists, else an empty list. Note: Pi 1.6.0 opens the file only
    for each append (`appendFileSync`), so a running but idle Pi is usually not seen here; the
    recent-growth check covers an agent that is writing.
    """
    path = Path(path)
    me = os.getpid()
    proc = Path("/proc")
    if (proc / "self" / "fd").is_dir():
        try:
            target = os.stat(path)
        except OSError:
            return []
        key = (target.st_dev, target.st_ino)
        real = os.path.realpath(path)
        holders = []
        for pid_dir in proc.iterdir():
            if not pid_dir.name.isdigit() or int(pid_dir.name) == me:
                continue
            try:
                for fd in (pid_dir / "fd").iterdir():
                    link = os.readlink(fd)
                    if link != real and os.path.basename(link) != path.name:
                        continue
                    st = os.stat(fd)
                    if (st.st_dev, st.st_ino) == key:
                        holders.append(Holder(int(pid_dir.name), _comm(pid_dir)))
                        break
            except OSError:
                continue
        return holders
    lsof = shutil.which("lsof")
    if lsof is None:
        return []
    out = subprocess.run([lsof, "-t", "--", str(path)], capture_output=True, text=True, timeout=10, check=False).stdout
    return [Holder(int(p), "") for p in out.split() if p.isdigit() and int(p) != me]


def _comm(pid_dir: Path) -> str:
    try:
        return (pid_dir / "comm").read_text().strip()
    except OSError:
        return ""


def describe_holders(holders: Sequence[Holder]) -> str:
    """`"pid 123 (node), pid 456"` for messages."""
    return ", ".join(f"pid {h.pid}" + (f" ({h.name})" if h.name else "") for h in holders)


Draft = dict[str, Any]
"""An entry to append without `id`/`timestamp`: `{"type": ..., fields...}`. A `parentId` key
names an explicit parent (re-branching); without it the parent is the current leaf (or, for the
second entry of a batch, the entry appended before it)."""


def append_entries(
    path: str | Path,
    build: Callable[[FileState], Sequence[Draft]],
    *,
    action: str,
    expected: Expected | None = None,
    refuse_when_open: bool = True,
    force: bool = False,
    journal: Journal | None = None,
    undo: Callable[[FileState, list[dict[str, Any]]], dict[str, Any]] | None = None,
    undoes: int | None = None,
    quiet_seconds: float = QUIET_SECONDS,
    now: float | None = None,
) -> WriteResult:
    """Check the file, build the entries from its state, journal the intent, append them in one
    write, fsync, verify where they landed.

    - `build(state)` returns the drafts (see `Draft`), or raises `WriteRefused`;
    - `action`: journal name (`pin`, `unpin`, `collapse`, `compaction`, `undo`);
    - `expected`: the state the user acted on (size in bytes, leaf id);
    - `refuse_when_open`: refuse while another process holds the file open (an agent that holds
      it would not see the change; the bridge is the way to steer it), unless `force`;
    - `undo(state, entries)` returns the journal's undo recipe (see `JournalRecord`);
    - `undoes`: the journal record this write undoes (marked undone);
    - `quiet_seconds`: a file modified more recently than this is refused unless `force` (or
      unless the file ends with ds4tui's own last journaled write);
    - `now`: Unix seconds for timestamps and the quiet check (tests).

    Race safety (issue 13): under the lock the file is read and the entries built; just before
    the write its size is checked again (grown: read and build again, at most
    `RACE_ATTEMPTS` times); the intent is journaled before the write (a journal that cannot record
    it means nothing is written: `WriteRefused("journal")`). After the write the bytes are looked
    up in the file: when another writer's lines landed in between (a lost race) and ours ended up
    as the last line, a `custom` `ds4tui.rejoin` entry re-attaches the branch to the other
    writer's last entry, so Pi still loads every line the agent wrote; `WriteResult.race` says so.

    Raises `WriteRefused` (nothing written; `write_failed` for a short or failed write, whose
    bytes were taken back: `write_whole`), `TornWrite` (an OSError: partial bytes that could not
    be taken back, never seen in the tests) or OSError (I/O). An advisory `flock` keeps two
    ds4tui writers apart (Pi takes no lock; its appends are `O_APPEND` too, so lines never mix).
    """
    path = Path(path)
    now = time.time() if now is None else now
    try:
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND)
    except NotRegularFile as err:
        raise WriteRefused("not_a_session", str(err)) from None
    except PermissionError:
        raise WriteRefused("read_only", f"{path} is not writable (permission denied); nothing was written") from None
    except OSError as err:
        if err.errno in (errno.EROFS, errno.EACCES):
            raise WriteRefused("read_only", f"{path} is on a read-only file system; nothing was written") from None
        raise
    journal_id: int | None = None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WriteRefused("locked", f"{path}: another ds4tui write is in progress") from None
        for _attempt in range(RACE_ATTEMPTS):
            state = _state_for(fd, path)
            quiet = quiet_seconds
            if journal is not None and _journal_call(journal.ends_with_our_write, path, state.size):
                quiet = 0.0  # the recent growth is our own last write
            check_writable(state, expected, refuse_when_open=refuse_when_open, force=force, quiet_seconds=quiet, now=now)
            drafts = build(state)
            if not drafts:
                raise WriteRefused("nothing_to_do", "nothing to write")
            entries = _materialize(state, drafts, now)
            data = b"".join(serialize_entry(e) for e in entries)
            st = os.fstat(fd)
            if journal is not None:
                journal_id = _journal_call(
                    journal.begin, path=path, action=action, offset=state.size, data=data, leaf_before=state.leaf_id,
                    entries=entries, undo=undo(state, entries) if undo else None, time_iso=iso_now(now),
                    undoes=undoes, dev=st.st_dev, ino=st.st_ino,
                )
            if os.fstat(fd).st_size == state.size:  # the tail is still the one we read: write now
                break
            if journal is not None and journal_id is not None:
                _journal_call(journal.abandon, journal_id, "the file grew while preparing the write")
                journal_id = None
        else:
            raise WriteRefused("busy", f"{path} kept growing while preparing the write; an agent is writing (try again)")
        if _before_write is not None:
            _before_write(path)
        failure = write_whole(fd, path, state.size, data)
        if failure is not None:
            if journal is not None and journal_id is not None:
                try:
                    journal.abandon(journal_id, f"nothing written: {failure}")
                except JournalError as err:  # the record stays pending; its bytes are not in the file
                    failure += f"; the journal could not mark #{journal_id} abandoned ({err})"
            raise WriteRefused(
                "write_failed", f"{path}: {failure}; nothing written (the file is back to its {state.size} bytes)"
            )
        landed, race = _verify_landing(fd, path, state, entries, data, now)
    finally:
        os.close(fd)
    if journal is not None and journal_id is not None:
        try:
            journal.finish(journal_id, offset=landed, note=race)
        except JournalError:
            pass  # the intent (with the bytes' hash) is recorded; undo checks the bytes themselves
    return WriteResult(path, landed, len(data), tuple(entries), journal_id, race)


class TornWrite(OSError):
    """A short or failed write whose bytes could not be taken back: `str(exc)` says which bytes
    of which file are partial, and how to remove them (never expected: see `write_whole`)."""


def write_whole(fd: int, path: Path, old_size: int, data: bytes) -> str | None:
    """Append `data` (complete lines) to the file `fd` (opened `O_APPEND`, locked by the caller)
    in one `os.write`, then `fsync`; None when all of it is on disk.

    On a short write (a full disk, a file-size limit), a failed write (ENOSPC, EFBIG, EIO,
    EDQUOT) or a failed `fsync`, whatever part of `data` reached the file is taken back
    (`take_back`: truncated to `old_size`, or cut out from under another writer's line that
    landed after it), so the file is byte-identical to before and the agent's next `O_APPEND`
    line starts on a line of its own (issue 30: the partial line stayed, and the agent's next
    line merged into it). Returns the reason (`"short write (738 of 2135 bytes)"`) in that case.
    Raises `TornWrite` only when the partial bytes could not be taken back.
    """
    written = 0
    try:
        written = os.write(fd, data)
        if written == len(data):
            os.fsync(fd)
            return None
        reason = f"short write ({written} of {len(data)} bytes: the disk is full or the file hit a size limit)"
    except OSError as err:
        reason = f"the write failed ({err.strerror or err})"
    take_back(fd, path, old_size, data[:written] if written else data)
    return reason


def take_back(fd: int, path: Path, old_size: int, ours: bytes) -> None:
    """Remove the bytes `ours` (a prefix of our write, or all of it when we do not know how much
    landed) from the end of the file `fd`, found at or after `old_size`; a no-op when they are not
    there. When another writer's bytes follow them (an agent's `O_APPEND` landed between our
    write and now), those are moved back over ours in place (no new blocks needed on a full
    disk) and the file is cut after them, re-checked until its size holds still. Raises
    `TornWrite` when the file cannot be put back."""
    for _attempt in range(RACE_ATTEMPTS):
        size = os.fstat(fd).st_size
        if size <= old_size or not ours:
            return
        with path.open("rb") as f:
            f.seek(old_size)
            grown = f.read(size - old_size)
        at = grown.find(ours)
        while at > 0 and grown[at - 1:at] != b"\n":  # ours starts a line (the old size ends with one)
            at = grown.find(ours, at + 1)
        if at < 0:
            return  # nothing of ours landed: leave the file alone
        start = old_size + at
        after = grown[at + len(ours):]
        try:
            if after:
                moved = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
                try:
                    if os.pwrite(moved, after, start) != len(after):
                        raise OSError(f"short write moving {len(after)} bytes")
                finally:
                    os.close(moved)
            if os.fstat(fd).st_size != size:
                continue  # yet another line landed: look again
            os.ftruncate(fd, start + len(after))
            os.fsync(fd)
            return
        except OSError as err:
            raise TornWrite(
                f"{path}: a failed write left {len(ours)} bytes of a partial line at byte {start}, and they could not be "
                f"removed ({err.strerror or err}); the file's bytes before {start} are intact"
            ) from None
    raise TornWrite(f"{path}: kept growing while a partial write was being removed at byte {old_size}")


RACE_ATTEMPTS = 20
_before_write: Callable[[Path], None] | None = None
"""Test seam: called between the last size check and the write (tests put a racing agent's
append here to make the lost-race path deterministic). None in normal use."""
"""How often `append_entries` re-reads a file that grew between reading and writing."""


def _journal_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a journal method; a `JournalError` becomes `WriteRefused("journal")` (nothing written)."""
    try:
        return fn(*args, **kwargs)
    except JournalError as err:
        raise WriteRefused("journal", str(err)) from None


def _verify_landing(
    fd: int, path: Path, state: FileState, entries: list[dict[str, Any]], data: bytes, now: float
) -> tuple[int, str | None]:
    """Find where `data` landed (at `state.size` unless another writer appended in between).
    Returns (offset, None) when it is where expected, else (offset, what happened), after
    re-attaching the branch to the other writer's last entry when our line became the last one."""
    with path.open("rb") as f:
        f.seek(state.size)
        if f.read(len(data)) == data:
            return state.size, None
        f.seek(state.size)
        grown = f.read()
    at = grown.find(data)
    if at < 0:
        raise OSError(f"{path}: the appended bytes cannot be found after the write (the file was rewritten?)")
    offset = state.size + at
    between = _entry_ids(grown[:at])
    message = (
        f"lost a race: {len(between)} line(s) of another writer landed at byte {state.size} before ours "
        f"(ours at byte {offset})"
    )
    if grown[at + len(data):].strip():
        return offset, message + "; the other writer's later lines keep its entries on the branch"
    rejoined = _rejoin(fd, path, state.size + at + len(data), between[-1] if between else state.leaf_id, entries, now)
    return offset, message + (f"; appended ds4tui.rejoin {rejoined} so the branch ends at the other writer's entries"
                              if rejoined else "; the branch could not be re-attached (see the file)")


REJOIN_CUSTOM_TYPE = "ds4tui.rejoin"


def _rejoin(fd: int, path: Path, end: int, parent: str | None, ours: list[dict[str, Any]], now: float) -> str | None:
    """Append a `custom` `ds4tui.rejoin` entry (never in context) whose parent is `parent`, while
    our write is still the file's last; retried when yet another line lands first. Returns its id."""
    if parent is None:
        return None
    taken = {e["id"] for e in ours}
    for _ in range(RACE_ATTEMPTS):
        entry = {"type": "custom", "id": new_entry_id(taken), "parentId": parent, "timestamp": iso_now(now),
                 "customType": REJOIN_CUSTOM_TYPE, "data": {"after": [e["id"] for e in ours]}}
        data = serialize_entry(entry)
        if os.fstat(fd).st_size != end:
            return None  # the other writer appended again: its own lines end the branch
        if write_whole(fd, path, end, data) is not None:
            return None  # (taken back: the race is still reported)
        with path.open("rb") as f:
            f.seek(end)
            grown = f.read()
        if grown.startswith(data):
            return entry["id"]
        at = grown.find(data)
        between = _entry_ids(grown[:at]) if at > 0 else []
        if grown[at + len(data):].strip() or not between:
            return entry["id"]
        parent, end = between[-1], end + at + len(data)
        taken.add(entry["id"])
    return None


def _entry_ids(data: bytes) -> list[str]:
    """The ids of the complete JSON entry lines in `data`, in order (lines without one skipped)."""
    ids = []
    for line in data.split(b"\n"):
        try:
            obj = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            ids.append(obj["id"])
    return ids


def _state_for(fd: int, path: Path) -> FileState:
    """Read the file the descriptor `fd` points at (same inode), up to its current size."""
    st = os.fstat(fd)
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_ino != st.st_ino:
            raise WriteRefused("changed", f"{path} was replaced while opening it")
        data = f.read(st.st_size)
    return FileState(path, len(data), st.st_mtime, _parse(path, data))


def check_writable(
    state: FileState,
    expected: Expected | None = None,
    *,
    refuse_when_open: bool = False,
    force: bool = False,
    quiet_seconds: float = QUIET_SECONDS,
    now: float | None = None,
) -> None:
    """Raise `WriteRefused` when `append_entries` would refuse to write to `state` (see the module
    docstring); used before a costly step (a summary request) and again at the write."""
    now = time.time() if now is None else now
    session, path = state.session, state.path
    if session.status != "session":
        raise WriteRefused("not_a_session", f"{path} is not a Pi session (no valid header); ds4tui never writes to it")
    if session.migrated:
        raise WriteRefused(
            "migrated",
            f"{path} is a version-{session.version:g} session; Pi rewrites it (with new random ids) when it "
            "opens it, so ds4tui does not append to it",
        )
    if state.size != session.end_offset:
        raise WriteRefused(
            "partial_last_line",
            f"{path} ends with a partial line ({state.size - session.end_offset} bytes without a newline): "
            "a writer was interrupted or is still writing",
        )
    if expected is not None and expected.size is not None and expected.size != state.size:
        raise WriteRefused(
            "changed", f"{path} changed since you looked at it ({expected.size} → {state.size} bytes); look again"
        )
    if expected is not None and expected.leaf_id is not None and expected.leaf_id != state.leaf_id:
        raise WriteRefused(
            "leaf_changed", f"{path}: the leaf moved since you looked at it ({expected.leaf_id} → {state.leaf_id})"
        )
    if force:
        return
    busy = agent_busy(session)
    if busy:
        raise WriteRefused("busy", f"the agent is mid-turn: {busy}; wait until the turn ends (or force)")
    age = now - state.mtime
    if 0 <= age < quiet_seconds:
        raise WriteRefused(
            "recent_growth",
            f"{path} was written {age:.1f} s ago; an agent may be working (wait {quiet_seconds:g} s or force)",
        )
    if refuse_when_open:
        holders = open_holders(path)
        if holders:
            raise WriteRefused(
                "open_by_process",
                f"{path} is open in {describe_holders(holders)}: a running agent keeps its own copy of the "
                "session and would not see this change (close it, or force)",
            )


def _materialize(state: FileState, drafts: Sequence[Draft], now: float) -> list[dict[str, Any]]:
    by_id = state.session.by_id
    taken: set[str] = set(by_id)
    parent = state.leaf_id
    entries = []
    stamp = iso_now(now)
    for draft in drafts:
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        explicit = "parentId" in draft
        parent_id = draft["parentId"] if explicit else parent
        if parent_id is not None and parent_id not in taken:
            raise WriteRefused("unknown_entry", f"parent entry {parent_id} is not in {state.path}")
        fields = {k: v for k, v in draft.items() if k not in ("type", "parentId")}
        entries.append({"type": draft["type"], "id": entry_id, "parentId": parent_id, "timestamp": stamp, **fields})
        parent = entry_id
    return entries


def entries_after(session: PiSession, entry_id: str) -> list[Entry] | None:
    """The entries after `entry_id` on the branch of the current leaf, or None when `entry_id` is
    not on that branch."""
    path = branch_path(session)
    for index, entry in enumerate(path):
        if entry.id == entry_id:
            return path[index + 1 :]
    return None
