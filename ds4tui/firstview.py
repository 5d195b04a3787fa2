"""The first paint of a session read on the other core (issue 14).

Opening a session, the dashboard's process spends ~0.3 s importing Textual and laying out its
widgets before it can paint anything, and then reads the file (0.16 s for the 30 MB `99-large`
sample, ~0.3 s while it shares the GIL with the first layouts). `start` forks a copy of the
process before Textual is imported: the copy reads the file the way the dashboard's own first
read does (`LiveSession.refresh(force=True)`: the chars-v1 snapshot), builds its view model
(`viewmodel.build(snapshot)`), and sends it back, pickled, through a pipe. The dashboard paints
that view (header, legend, map, turn list) as soon as its screen is up, then reads the file
itself (`Ds4App._show_first_view`): its own snapshot, equal to the copy's, replaces it, and
everything that needs the session (the inspector, selections, the plan, the cache) starts
from there. The copy never writes the session file and holds no lock; it exits after sending.

On a 2-core machine the read then runs beside the imports instead of after them. It is done
twice (once in each process): only for files of `MIN_BYTES` to `MAX_BYTES` (a small file reads
in milliseconds; a very large one would hold two copies of its parsed lines at once, and the
dashboard reads it in slices instead, painting each: `Ds4App._slice`).
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import stat
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

MIN_BYTES = 1 << 20
"""Smaller files are read by the dashboard alone (a few milliseconds: less than the fork)."""

MAX_BYTES = 64 << 20
"""Larger files are read by the dashboard alone: the copy's parsed lines would double the
memory of the open while both exist (~3× the file each)."""

WAIT_S = 5.0
"""How long the dashboard waits for the copy before it reads the file without it (seconds)."""


class FirstView:
    """A forked copy of this process reading `path` for the first paint (`start`). `result()`
    waits for its view model; `cancel()` stops it. Either reaps the copy."""

    def __init__(self, pid: int, fd: int, path: Path) -> None:
        """`pid`: the copy; `fd`: the read end of the pipe it writes to; `path`: the session."""
        self.pid = pid
        self.path = path
        self._fd: int | None = fd
        self._reaped = False
        self._lock = threading.Lock()

    def result(self, timeout: float = WAIT_S) -> Any | None:
        """The copy's view model (`ds4tui.viewmodel.ViewModel`), or None when it failed, sent
        nothing valid or took longer than `timeout` seconds (then it is stopped). Blocks (the
        GIL is released while it waits); call it once, from a worker thread."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return None
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        ok = False
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    break  # too slow: the dashboard reads the file itself
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    ok = True
                    break
                chunks.append(chunk)
        except OSError:
            ok = False
        finally:
            os.close(fd)
            self._reap(kill=not ok)
        if not ok or not chunks:
            return None
        try:
            view = pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 - a torn or foreign message: no first view, nothing else
            return None
        from ds4tui.viewmodel import ViewModel

        return view if type(view) is ViewModel else None

    def cancel(self) -> None:
        """Stop the copy and reap it (a `result` waiting on another thread then returns None
        at once: the pipe closes)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
            self._reap(kill=True)
        else:
            self._kill()

    def _kill(self) -> None:
        with self._lock:
            if not self._reaped:
                try:
                    os.kill(self.pid, 9)
                except OSError:
                    pass

    def _reap(self, kill: bool) -> None:
        if kill:
            self._kill()
        with self._lock:  # (a `_kill` meanwhile must not reach another process given this pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self._reaped = True


def first_view(path: Path, models: Any = None) -> Any:
    """The view model the dashboard's first read of `path` paints: `viewmodel.build` of
    the agent's live session `refresh(force=True)` (Pi: chars-v1 counts), without the fields kept
    for the next append (`_turn_inputs`, `_message_ids`, `_times`, `_lineage`: the dashboard's
    own read rebuilds them). Equal to the dashboard's first view model of the same bytes (every
    compared field; the map's `MapIndex`, compared by identity, indexes the same segments).
    Raises OSError as `LiveSession.refresh` does."""
    from ds4sessions.derive.pipeline import agent_of
    from ds4tui import viewmodel

    snap = agent_of(Path(path)).live(Path(path), models).refresh(force=True)
    view = viewmodel.build(snap)
    return replace(view, _turn_inputs=(), _message_ids=(), _times=((), False, None), _lineage=None)


def start(path: Path, models: Any = None, *, threads_ok: bool = False) -> FirstView | None:
    """Fork a copy of this process that computes `first_view(path, models)` and sends it back
    (`FirstView.result`), or None when that does not apply: no `os.fork` (Windows), threads
    already running (a fork copies only the calling thread), `path` not a regular file of
    `MIN_BYTES` to `MAX_BYTES`, or no pipe or process to be had. Call it before Textual is
    imported: the copy then reads while this process imports. `threads_ok` forks even with
    other threads running (tests: a lock another thread holds stays held in the copy, which
    then never answers and is stopped after `WAIT_S`)."""
    if not hasattr(os, "fork") or (threading.active_count() != 1 and not threads_ok):
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or not MIN_BYTES <= info.st_size <= MAX_BYTES:
        return None
    # both processes need these: imported once, before the fork
    import ds4sessions.derive.pipeline  # noqa: F401
    import ds4sessions.agents.pi.live  # noqa: F401
    import ds4tui.viewmodel  # noqa: F401

    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the copy: read, send, exit (no teardown, no atexit, no buffered output)
        status = 1
        try:
            os.close(read_fd)
            gc.disable()  # a short-lived process: the collector would only add time
            data = pickle.dumps(first_view(Path(path), models), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
            status = 0
        except BaseException:  # noqa: BLE001 - the dashboard reads the file itself
            pass
        finally:
            os._exit(status)
    os.close(write_fd)
    return FirstView(pid, read_fd, Path(path))
