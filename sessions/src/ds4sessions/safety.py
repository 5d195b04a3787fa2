"""Shared-machine safety: private state folders and files, safe opening of input files, redaction.

Promises (docs/reliability.md):

- ds4tui's own folders (the state dir, the retrieval index folder, the bridge channel dirs) are
  0700 and its files (journal, retrieval index, channel files) 0600, whatever the umask: created
  with that mode and `chmod`ed again when they already exist and belong to us.
- An input path is checked with `os.stat` before it is opened, and opened with `O_NONBLOCK`
  then checked with `fstat`: a FIFO, a character/block device (`/dev/zero`), a socket or a
  directory is refused by name (`NotRegularFile`) and never read, so it cannot hang or fill the
  memory.
- Secrets never reach a message: `redact()` removes URL credentials (`user:key@`), secret-looking
  query parameters (`?key=`, `api_key`, `token`, `sig`, …) and `Authorization`/`x-api-key`
  header values.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a directory, not a regular file; `str(exc)`
    says which, e.g. `/dev/zero: a character device, not a session file`."""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def file_kind(mode: int) -> str | None:
    """None for a regular file, else what it is (`"a FIFO (named pipe)"`, `"a socket"`, …)."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: str | Path, mode: int) -> OSError | None:
    """None for a regular file; else the error to raise: `IsADirectoryError` for a directory,
    `NotRegularFile` naming what it is for a FIFO, device or socket."""
    kind = file_kind(mode)
    if kind is None:
        return None
    if stat.S_ISDIR(mode):
        return IsADirectoryError(errno.EISDIR, "Is a directory; give a session .jsonl file", str(path))
    return NotRegularFile(f"{path}: {kind}, not a session file; refused")


def check_regular(path: str | Path) -> os.stat_result:
    """`os.stat(path)` when it is a regular file; raises `NotRegularFile` (FIFO, device, socket,
    directory) or the OSError of `stat` (FileNotFoundError, PermissionError)."""
    st = os.stat(path)
    err = not_regular(path, st.st_mode)
    if err is not None:
        raise err
    return st


def open_regular(path: str | Path, flags: int = os.O_RDONLY) -> int:
    """Open a regular file without blocking and return the descriptor (the caller closes it).

    `stat` first (a FIFO is never opened), then `open(flags | O_NONBLOCK | O_CLOEXEC)` and an
    `fstat` of what was opened (the path may have been swapped in between); `O_NONBLOCK` is then
    cleared. Raises `NotRegularFile` or OSError.
    """
    check_regular(path)
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        err = not_regular(path, os.fstat(fd).st_mode)
        if err is not None:
            raise err
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


class UnsafeDir(PermissionError):
    """A folder ds4tui keeps private state in (journal, indexes, channel files) belongs to another
    user or is writable by others, so someone else could swap its files (e.g. the journal that
    `journal undo` acts on). `str(exc)` is one sentence naming the folder and the way out."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)

    def __str__(self) -> str:
        return str(self.strerror)


def check_private_dir(path: str | Path, st: os.stat_result | None = None) -> None:
    """Raise `UnsafeDir` when the existing folder `path` belongs to another user, or its group
    or others may write to it (mode & 0o022; a folder of ours that is only readable by others is
    fine: `private_dir` makes it 0700). Raises OSError when it cannot be `stat`ed."""
    st = os.stat(path) if st is None else st
    if st.st_uid != os.getuid():
        raise UnsafeDir(
            f"{path} belongs to another user (uid {st.st_uid}); ds4tui keeps its journal and indexes only in a "
            "folder of your own (set DS4TUI_STATE_DIR, or fix the owner)"
        )
    if st.st_mode & 0o022:
        who = "others" if st.st_mode & 0o002 else "its group"
        raise UnsafeDir(
            f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o}), so someone else could replace "
            f"ds4tui's journal or indexes; refused (chmod 700 {path})"
        )


def private_dir(path: str | Path) -> Path:
    """Create `path` (and missing parents) and make it 0700 (umask-independent); returns it.

    An existing folder must be this user's and not writable by its group or others
    (`check_private_dir`: `UnsafeDir` otherwise, issue 30); it is then `chmod`ed to 0700. Raises
    OSError (e.g. PermissionError for an unwritable parent)."""
    path = Path(path)
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    st = os.stat(path)
    check_private_dir(path, st)
    if stat.S_IMODE(st.st_mode) != PRIVATE_DIR_MODE:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path


def private_file(path: str | Path) -> Path:
    """Make sure `path` exists as a 0600 regular file of ours, not a symlink (created empty when
    absent, `O_NOFOLLOW`); returns it. For databases: SQLite gives its `-wal`/`-shm`/`-journal`
    files the main file's mode. Raises OSError (ELOOP for a symlink)."""
    path = Path(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE_MODE)
    try:
        st = os.fstat(fd)
        kind = file_kind(st.st_mode)
        if kind is not None:
            raise NotRegularFile(f"{path}: {kind}, not a file ds4tui can use")
        if stat.S_IMODE(st.st_mode) != PRIVATE_FILE_MODE and st.st_uid == os.getuid():
            os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return path


def remove_non_files(paths: list[Path]) -> list[str]:
    """Remove each of `paths` that exists but is not a regular file of this user: a symbolic link
    (removed, never followed), a FIFO, socket or device node, a folder (removed with its
    contents), a file of another user. For derived files only (indexes, caches: rebuilt on use),
    inside a folder `check_private_dir` accepted. Returns what was removed, as
    `"<path> (a symbolic link)"`. Raises OSError."""
    import shutil

    removed = []
    for candidate in paths:
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            kind = "a symbolic link"
        elif stat.S_ISREG(st.st_mode):
            if st.st_uid == os.getuid():
                continue
            kind = f"a file of another user (uid {st.st_uid})"
        elif stat.S_ISDIR(st.st_mode):
            kind = "a folder"
        else:
            kind = file_kind(st.st_mode) or "not a regular file"
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(candidate)
        else:
            os.unlink(candidate)
        removed.append(f"{candidate} ({kind})")
    return removed


_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#]+@")
_SECRET_QUERY = re.compile(
    r"(?P<key>[?&;](?:api[_-]?key|key|token|access[_-]?token|auth|sig|signature|secret|password|pass|pwd|code)=)[^&#\s'\"]+",
    re.IGNORECASE,
)
_AUTH_HEADER = re.compile(
    r"(?P<name>\b(?:authorization|proxy-authorization|x-api-key|api-key|x-goog-api-key)\b['\"]?\s*[:=]\s*['\"]?)"
    r"(?:(?:bearer|basic|token)\s+)?[^\s'\",}]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(?P<name>bearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}\b")


def redact(text: str) -> str:
    """`text` with secrets replaced by `***`: URL credentials (`https://user:key@host` →
    `https://***@host`), secret query parameters (`?key=…`, `api_key=…`, `token=…`),
    `Authorization:`/`x-api-key:` values, `Bearer …` tokens and `sk-…` style keys."""
    text = _URL_USERINFO.sub(r"\g<scheme>***@", text)
    text = _SECRET_QUERY.sub(r"\g<key>***", text)
    text = _AUTH_HEADER.sub(r"\g<name>***", text)
    text = _BEARER.sub(r"\g<name>***", text)
    return _KEY_LIKE.sub("***", text)


def printable(text: str) -> str:
    """`text` safe to encode as UTF-8: lone surrogates (valid in JSON `\\ud800`, not in UTF-8)
    become `\\ud800` escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def inside(folder: str | Path, name: str) -> Path:
    """`folder / name` when `name` is one plain file name (no `/`, not `.`/`..`, no NUL) whose
    path stays inside `folder` after resolving; raises ValueError otherwise."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"not a plain file name inside {folder}: {name!r}")
    path = Path(folder) / name
    if Path(os.path.realpath(path)).parent != Path(os.path.realpath(folder)):
        raise ValueError(f"{path} leads outside {folder}")
    return path


def open_in(folder: str | Path, name: str, flags: int, mode: int = PRIVATE_FILE_MODE) -> int:
    """Open `folder/name` without following a symlink (`O_NOFOLLOW`, `O_NONBLOCK`), checked to be
    inside `folder` (`inside`) and a regular file; a created file gets `mode` (0600) whatever
    the umask. Returns the descriptor. Raises ValueError, `NotRegularFile` or OSError (ELOOP for a
    planted symlink)."""
    path = inside(folder, name)
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        st = os.fstat(fd)
        if file_kind(st.st_mode) is not None:
            raise NotRegularFile(f"{path}: {file_kind(st.st_mode)}, not a channel file")
        if flags & os.O_CREAT and stat.S_IMODE(st.st_mode) != mode and st.st_uid == os.getuid():
            os.fchmod(fd, mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_in(folder: str | Path, name: str, limit: int = 64 << 20) -> bytes:
    """The bytes of `folder/name` (at most `limit`), opened as `open_in` does (no symlink, no
    FIFO, inside the folder). Raises FileNotFoundError, ValueError or OSError."""
    fd = open_in(folder, name, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


AGENT_PROGRAMS = ("node", "pi", "bun", "deno", "tsx", "nodejs")
"""Program names a Pi process runs as (its launcher is a Node script: `node …/pi`)."""


def pid_is_agent(pid: int) -> bool | None:
    """Whether process `pid` looks like a coding agent (Pi runs under Node): its
    `/proc/<pid>/cmdline` names `node`/`pi`/`bun`/`deno`/`tsx`, or a path holding
    `pi-coding-agent`, among its first three arguments. None when `/proc` cannot tell (no
    `/proc`, another user's process)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read(1 << 16).split(b"\0")
    except FileNotFoundError:
        return False if os.path.isdir("/proc/self") else None
    except OSError:
        return None
    for arg in argv[:3]:
        text = os.fsdecode(arg)
        base = os.path.basename(text).lower()
        if base in AGENT_PROGRAMS or base.split(".")[0] in AGENT_PROGRAMS or "pi-coding-agent" in text:
            return True
    return False
