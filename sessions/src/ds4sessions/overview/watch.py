"""Wake-ups for many session files at once: one watchdog observer on the folders that hold them.

`FolderWatcher(on_path)` watches a set of folders non-recursively (`watch(folders)` replaces the
set: new folders are scheduled, dropped ones unscheduled) and calls `on_path(path)` for every
created / modified / moved / deleted `*.jsonl` file event in them, and `on_folder(path)` (when
given) for every folder created or moved into them (where a new project's or a new day's
sessions will appear). Like
`ds4sessions.ingest.watch.SessionWatcher`, an event is only a wake-up: the consumer then reads the
file through its tailer (`Overview.poll([path])`). Folders that do not exist are skipped (the
overview's re-scan and its poll of live files cover them). `on_path` runs on watchdog's thread
and must be quick (e.g. add to a set and post a message).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable, Iterable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

log = logging.getLogger(__name__)


class _Events(FileSystemEventHandler):
    def __init__(self, on_path: Callable[[str], None], on_folder: Callable[[str], None] | None = None) -> None:
        self.on_path = on_path
        self.on_folder = on_folder

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            if self.on_folder is not None and event.event_type in ("created", "moved"):
                raw = getattr(event, "dest_path", "") or event.src_path
                path = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
                try:
                    self.on_folder(path)
                except Exception:  # a consumer bug must not stop the observer
                    log.exception("overview watcher callback failed")
            return
        if event.event_type in ("opened", "closed_no_write", "closed"):
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
            if path and path.endswith(".jsonl"):
                try:
                    self.on_path(path)
                except Exception:  # a consumer bug must not stop the observer
                    log.exception("overview watcher callback failed")


class FolderWatcher:
    """One observer over many folders (module doc)."""

    def __init__(self, on_path: Callable[[str], None], on_folder: Callable[[str], None] | None = None) -> None:
        self._handler = _Events(on_path, on_folder)
        self._observer = Observer()
        self._observer.daemon = True
        self._watches: dict[str, ObservedWatch] = {}
        self._lock = threading.Lock()
        self._started = False

    def watch(self, folders: Iterable[Path | str]) -> None:
        """Watch exactly `folders` (existing ones) from now on."""
        wanted = {str(f) for f in folders if Path(f).is_dir()}
        with self._lock:
            if not self._started:
                self._observer.start()
                self._started = True
            for folder in [f for f in self._watches if f not in wanted]:
                self._observer.unschedule(self._watches.pop(folder))
            for folder in wanted - set(self._watches):
                try:
                    self._watches[folder] = self._observer.schedule(self._handler, folder, recursive=False)
                except OSError as exc:  # e.g. inotify watch limit: the poll still covers it
                    log.warning("cannot watch %s: %s", folder, exc)

    @property
    def folders(self) -> int:
        """How many folders are watched."""
        return len(self._watches)

    def stop(self) -> None:
        """Stop the observer (idempotent)."""
        with self._lock:
            if self._started:
                self._observer.stop()
                self._observer.join(timeout=5)
                self._started = False
