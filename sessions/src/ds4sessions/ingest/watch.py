"""Wake-ups for a session file: file system events plus a fallback poll.

`SessionWatcher` only says "the file may have changed"; the `Tailer` does the work (design.md,
"The path of one appended line": the watchdog event is a wake-up only). Two sources:

* **Events**: a watchdog `Observer` on the file's *directory* (non-recursive), so creation and a
  rename over the path are seen as well as appends. Any created / modified / moved (from or to)
  / deleted event naming the file wakes the consumer.
* **Fallback poll**: every `poll_interval` seconds a thread stats the file (one `os.stat`) and
  wakes the consumer when its device, inode, size or mtime changed. Some file systems (network
  mounts, some container overlays) deliver no inotify events; this keeps them live.

A missing directory is not watched through an ancestor (a recursive watch on, say, the home
folder would be costly and noisy): the poll thread checks for the directory at each tick and
schedules the event watch once it exists (and again if it is deleted and re-created). Until then
the fallback poll alone notices the file.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

log = logging.getLogger(__name__)

_WAKE_EVENTS = frozenset({EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_DELETED})


class SessionWatcher:
    """Calls `on_change()` when the session file at `path` may have changed.

    - `path`: the session file; it and its directory may not exist yet. A session that is not a
      file (a handle, e.g. `DB#ID`: `agents.registry`) is watched through the files its plug-in
      names (`agents.registry.watched_files`: a database and its write-ahead log), all in the
      directory of the first; `files` holds what is watched.
    - `on_change`: a wake-up with no arguments; the consumer then calls `Tailer.poll()`. It may
      be called when no line changed (e.g. a write that completed no line) and one call may
      stand for many changes.
    - `poll_interval`: seconds between fallback polls (> 0; default 1.0). It is also how soon a
      directory created after `start()` gets its event watch.
    - `use_events`: False skips the watchdog observer and relies on the poll alone (for file
      systems known to deliver no events).

    Threading: `on_change` runs on watchdog's observer thread or on the poll thread, never on
    the caller's; calls are serialized (never two at once). It must be quick and must marshal
    any work to the consumer's own thread (e.g. Textual's `App.call_from_thread` or
    `post_message`). An exception raised by `on_change` is logged and does not stop the watcher.

    Lifecycle: `start()` once, `stop()` (idempotent) joins the threads; or use it as a context
    manager. No `on_change` call is made for the state at `start()`: the consumer polls once
    itself.

    Raises ValueError for `poll_interval <= 0`, RuntimeError when started twice.
    """

    def __init__(
        self,
        path: Path,
        on_change: Callable[[], None],
        *,
        poll_interval: float = 1.0,
        use_events: bool = True,
    ) -> None:
        """Prepare the watcher; no thread starts and no file is touched until `start()`."""
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval}")
        self.path = Path(path).absolute()
        from ds4sessions.agents.registry import watched_files

        self.files = tuple(Path(f).absolute() for f in watched_files(self.path))
        self.poll_interval = poll_interval
        self._on_change = on_change
        self._observer: BaseObserver | None = Observer() if use_events else None
        self._handler = _FileEvents({str(f) for f in self.files}, self._wake)
        self._watch: ObservedWatch | None = None
        self._watched_dir: tuple[int, int] | None = None  # (st_dev, st_ino) of the watched dir
        self._wake_lock = threading.Lock()
        self._stopping = threading.Event()
        self._poller: threading.Thread | None = None

    def start(self) -> None:
        """Start the observer (watching the directory if it exists) and the poll thread."""
        if self._poller is not None or self._stopping.is_set():
            raise RuntimeError("SessionWatcher can be started only once")
        if self._observer is not None:
            self._observer.start()
            self._ensure_watch(self._observer)
        self._poller = threading.Thread(
            target=self._poll_loop,
            args=(self._signatures(),),  # taken now: a change right after start() is seen
            name=f"SessionWatcher poll {self.path.name}",
            daemon=True,
        )
        self._poller.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and join both threads (waiting at most `timeout` seconds each). Idempotent.

        May be called from `on_change` (the calling thread is then not joined).
        """
        self._stopping.set()
        if self._poller is None:
            return
        _join(self._poller, timeout)  # first: it may schedule watches on the observer
        if self._observer is not None:
            self._observer.stop()
            _join(self._observer, timeout)

    def __enter__(self) -> SessionWatcher:
        """Start the watcher; `with SessionWatcher(...) as w:` stops it on exit."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the watcher."""
        self.stop()

    def _wake(self) -> None:
        """Call `on_change` once, serialized, never letting its exception kill a thread."""
        if self._stopping.is_set():
            return
        with self._wake_lock:
            try:
                self._on_change()
            except Exception:
                log.exception("SessionWatcher on_change failed for %s", self.path)

    def _signatures(self) -> tuple[tuple[int, int, int, int] | None, ...]:
        return tuple(_signature(f) for f in self.files)

    def _poll_loop(self, last: tuple[tuple[int, int, int, int] | None, ...]) -> None:
        """Every `poll_interval` s: keep the directory watch current; wake on a changed stat.

        `last`: the files' `_signature`s when `start()` ran.
        """
        while not self._stopping.wait(self.poll_interval):
            if self._observer is not None:
                self._ensure_watch(self._observer)
            current = self._signatures()
            if current != last:
                last = current
                self._wake()

    def _ensure_watch(self, observer: BaseObserver) -> None:
        """Watch the file's directory if it exists; follow its deletion and re-creation.

        Runs on the starting thread once, then on the poll thread only. A directory that cannot
        be watched (e.g. the inotify watch limit is reached) is logged once and left to the poll.
        """
        directory = _signature(self.files[0].parent)
        ident = directory[:2] if directory is not None else None
        if ident == self._watched_dir:
            return
        if self._watch is not None:
            observer.unschedule(self._watch)
            self._watch = None
        self._watched_dir = ident
        if ident is None:
            return
        try:
            self._watch = observer.schedule(self._handler, str(self.files[0].parent), recursive=False)
        except OSError as err:  # the directory vanished again, or no inotify watch is left
            log.warning("SessionWatcher cannot watch %s (%s); polling only", self.files[0].parent, err)


class _FileEvents(FileSystemEventHandler):
    """Forwards watchdog events that name one of the files (as source or destination) to `wake`."""

    def __init__(self, paths: set[str], wake: Callable[[], None]) -> None:
        """`paths`: the files' absolute paths as strings, as the observer reports them."""
        super().__init__()
        self._paths = paths
        self._wake = wake

    def on_any_event(self, event: FileSystemEvent) -> None:
        """Wake on created / modified / moved / deleted events naming one of the files."""
        if event.event_type not in _WAKE_EVENTS:
            return
        names = {os.fsdecode(event.src_path), os.fsdecode(event.dest_path)}
        if not names.isdisjoint(self._paths):
            self._wake()


def _join(thread: threading.Thread, timeout: float) -> None:
    """Join `thread` (at most `timeout` seconds) unless it is the calling thread."""
    if thread is not threading.current_thread() and thread.is_alive():
        thread.join(timeout)


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    """(st_dev, st_ino, size in bytes, mtime in ns) of `path`, or None when it is absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
