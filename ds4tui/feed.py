"""`SessionFeed`: the dashboard's scheduler. The app renders; the feed schedules (issue 28).

One feed per dashboard owns, for the session on screen:

- the pipeline (`ds4sessions.derive.pipeline.SessionPipeline`, for any agent) and its generation
  (a switch to another file starts a new one; work of an older one is dropped);
- two exclusive thread workers, each a loop that coalesces requests (a burst of appends is one
  more pass, the last request is never lost, no thread waits on another):
  ingest (`SessionPipeline.snapshots`: tailer → reader → counts) and derive
  (`SessionPipeline.derive`: plan, cache view, retrieval); after each stage the worker builds the
  view model (`ds4tui.viewmodel.build`, pure, off the UI thread) and posts it in one
  `ViewUpdated` (a newer one replaces an older one still queued);
- the paint handshake: the screen says which snapshot version it painted (`painted`); the
  derive pass waits for that paint (and rests after a long pass), pauses at its pause points
  while a line is being read (`ds4core.pause`: the feed installs the hook and makes the
  requests), and `LiveSession.prepare` runs once the screen painted and nothing waits;
- the process-wide knobs while it runs (`ds4sessions.runtime`): the GC pacer (collections
  between paints) and the thread switch interval. Nothing else in the app sets them.

It only posts messages to its `target` (the dashboard screen) and never touches a widget:
`ViewUpdated`, `FirstViewReady` (the forked copy's first view, `ds4tui.firstview`),
`FileChanged` (the watcher's wake-up: the target calls `refresh`) and `FeedStatus` (a file that
cannot be read).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from textual.message import Message

from ds4core import pause
from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4sessions.ingest.snapshot import Snapshot
from ds4sessions.runtime import GcPacer
from ds4tui import viewmodel

if TYPE_CHECKING:
    from textual.app import App

    from ds4sessions.ingest.watch import SessionWatcher
    from ds4tui.firstview import FirstView

DERIVE_WAIT_S = 0.25
"""The longest the derive worker waits for the screen to paint a new snapshot before it plans."""
DERIVE_REST_FROM_S = 0.05
"""A derive pass longer than this (seconds) is followed by a rest as long as the pass."""
DERIVE_REST_MAX_S = 2.0
"""The longest rest between two derive passes (seconds)."""
SWITCH_INTERVAL_S = 0.001
"""Python's thread switch interval while the dashboard runs (default 5 ms): the UI thread gets
the GIL back from a worker within a millisecond, so a long derive pass delays a frame less."""
FIRST_SLICE_BYTES = 4 << 20
"""A session's first read (with nothing on screen yet) is made in slices: this many bytes first,
painted as the session was at that point (the header says "reading N%"), then slices twice as
large each time up to `MAX_SLICE_BYTES`, until the end of the file. The 82 MB bench session
shows its first slice at 0.7 s and a 246 MB one at 0.8–1.1 s, instead of after the whole read."""
MAX_SLICE_BYTES = 16 << 20
"""The largest slice of a first read (bytes): the progress moves every ~1 s (64 MiB slices held
each step ~3.4 s on a 250 MB session, a new-user trial)."""


@dataclass
class ViewUpdated(Message):
    """A new state to show (posted from a worker): the snapshot, the derived views of the latest
    snapshot that has them (possibly an older version), the view model of the two, and the
    session `generation` (a switch to another file starts a new one; older ones are dropped)."""

    snapshot: Snapshot
    derived: Derived | None
    view: viewmodel.ViewModel
    generation: int

    def can_replace(self, message: Message) -> bool:
        """A newer state replaces an older one still in the queue."""
        return isinstance(message, ViewUpdated)


class FirstViewReady(Message):
    """The forked copy's view model for the first paint (`ds4tui.firstview`), or None."""

    def __init__(self, view: viewmodel.ViewModel | None) -> None:
        super().__init__()
        self.view = view


class FileChanged(Message):
    """The watcher saw the session file change (a wake-up only: the target calls `refresh`)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FileChanged)


class FeedStatus(Message):
    """Something the user must read on the status line (e.g. the file cannot be read)."""

    def __init__(self, text: str, error: bool = False) -> None:
        super().__init__()
        self.text = text
        self.error = error


def _keep_forced(old: object, new: object) -> bool:
    """Two ingest requests merged: a forced pass (a re-read from byte 0) stays forced."""
    return bool(old) or bool(new)


class _Requests:
    """Coalesced requests for one worker loop: `request(value)` records the newest value and
    says whether a worker must be started (none running); the loop calls `take()` until it says
    there is nothing left (then the loop is marked stopped, atomically, so a request arriving at
    that moment starts a new worker: none is ever lost) and `stopped()` when it ends early."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = False
        self._running = False
        self._value: object = None

    def request(self, value: object = None, merge: Callable[[object, object], object] | None = None) -> bool:
        with self._lock:
            self._value = merge(self._value, value) if (merge is not None and self._pending) else value
            self._pending = True
            if self._running:
                return False
            self._running = True
            return True

    def take(self) -> tuple[bool, object]:
        with self._lock:
            if not self._pending:
                self._running = False
                return False, None
            self._pending = False
            value, self._value = self._value, None
            return True, value

    def pending(self) -> bool:
        """True when a request is waiting for the loop's next `take()`."""
        with self._lock:
            return self._pending

    def running(self) -> bool:
        """True from a request that starts a loop until that loop's `take()` finds nothing."""
        with self._lock:
            return self._running

    def stopped(self) -> None:
        with self._lock:
            self._running = False
            self._pending = False


class SessionFeed:
    """Schedules the ingest and derive work of one dashboard (see the module doc).

    `app` runs the workers (`App.run_worker`); `target` receives the messages (the dashboard
    screen). `models`, `config_file`, `retrieval` go to each `SessionPipeline`; `now` is the
    clock (epoch seconds) of the cache views; `watch=False` starts no file watcher (tests drive
    `refresh` themselves). Call `start`, then `refresh`/`switch`/`painted` from the UI thread;
    `stop` at unmount."""

    def __init__(self, app: App[Any], target: Any, path: Path, *, models: Any = None, config_file: Path | None = None,
                 retrieval: bool = True, now: Callable[[], float] = time.time, watch: bool = True) -> None:
        self.app = app
        self.target = target
        self.path = Path(path)
        self._models = models
        self._config_file = config_file
        self.with_retrieval = retrieval
        self._now = now
        self._watch = watch
        self.pipeline = self._new_pipeline(self.path)
        self._session: tuple[SessionPipeline, int] = (self.pipeline, 0)
        """The pipeline the workers drive and its generation (swapped together)."""
        self.generation = 0
        self._slice: tuple[int, int] | None = (0, FIRST_SLICE_BYTES)
        """(generation, bytes) of the next slice of a session's first read; None: read to the end."""
        self._ingest_lock = threading.Lock()  # one ingest pass at a time (held by the worker only)
        self._derive_lock = threading.Lock()  # one derive pass at a time (held by the worker only)
        self._publish_lock = threading.Lock()  # the workers' newest snapshot / derived / view model
        self._ingest_requests = _Requests()
        self._derive_requests = _Requests()
        self._painted = threading.Condition()
        self._painted_version = -1  # the newest snapshot version the screen has painted (guarded by _painted)
        self._posted_version = -1  # the newest snapshot version posted to the screen (guarded by _painted)
        self._woken = False  # the watcher saw a change the UI thread has not started reading yet
        self.manifest_shown = False  # the Manifest tab is on screen (its plan items are made by the derive worker)
        self._derive_rest_until = 0.0  # time.monotonic() before which the next derive pass rests
        self._built: tuple[Snapshot | None, Derived | None, viewmodel.ViewModel | None] = (None, None, None)
        self._watcher: SessionWatcher | None = None
        self._first_view: FirstView | None = None
        self._pacer = GcPacer()
        self._switch_saved: float | None = None

    def _new_pipeline(self, path: Path) -> SessionPipeline:
        return SessionPipeline(path, self._models, config_file=self._config_file, retrieval=self.with_retrieval)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self, first_view: FirstView | None = None) -> None:
        """Set the process knobs, start the watcher, then read: the forked copy's first view
        first when there is one (`FirstViewReady`; the target calls `after_first_view`)."""
        import sys

        self._switch_saved = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_saved, SWITCH_INTERVAL_S))
        self._pacer.start()
        self._start_watcher()
        if first_view is not None:
            self._first_view = first_view
            self.app.run_worker(partial(self._await_first_view, first_view), thread=True, group="first-view",
                                exit_on_error=False)
        else:
            self.refresh()

    def _await_first_view(self, first_view: FirstView) -> None:
        """Wait (off the UI thread) for the forked copy's view model and post it."""
        view = first_view.result()
        self._first_view = None
        self.target.post_message(FirstViewReady(view))

    def after_first_view(self, painted: bool) -> None:
        """The target showed the first view (`painted`: the whole session is on screen, so the
        first read needs no slices) or skipped it; now the feed reads the file itself."""
        if painted:
            self._slice = None
            self.app.call_after_refresh(self.refresh)
        else:
            self.refresh()

    def stop(self, *, process_ends: bool = False) -> None:
        """Stop the watcher and the first view's copy, restore the knobs (`process_ends`: the
        process ends next, so the collector stays off: `GcPacer.end_of_process`), and release a
        derive worker waiting for a paint."""
        import sys

        if self._first_view is not None:
            self._first_view.cancel()
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._switch_saved is not None:
            sys.setswitchinterval(self._switch_saved)
            self._switch_saved = None
        if process_ends:
            GcPacer.end_of_process()
        else:
            self._pacer.stop()
        self.painted(1 << 62)

    def _start_watcher(self) -> None:
        if self._watch:
            from ds4sessions.ingest.watch import SessionWatcher

            self._watcher = SessionWatcher(self.path, self._file_changed)
            self._watcher.start()

    def _file_changed(self) -> None:
        """The watcher's wake-up (on its thread): a derive pass pauses at once (not after the UI
        thread gets the GIL to handle the message), then the UI thread starts the read."""
        self._woken = True
        pause.request()
        self.target.post_message(FileChanged())

    def switch(self, path: Path) -> None:
        """Show another session file (of any agent). The generation moves on at once (the UI
        drops older work); the new pipeline is installed in a worker (it waits there, not on the
        UI thread, for a pass of the old session's workers to end), then the new session is read
        in slices and watched."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self.generation += 1
        generation = self.generation
        self._slice = (generation, FIRST_SLICE_BYTES)  # its first read in slices
        with self._painted:
            self._painted_version = -1  # the new session's versions start again
            self._posted_version = -1  # (else a derive pass of the new session waits at each checkpoint)
            self._painted.notify_all()
        self.path = Path(path)
        self.app.run_worker(partial(self._open_session, self.path, generation), thread=True, exclusive=True,
                            group="switch", exit_on_error=False)

    def _open_session(self, path: Path, generation: int) -> None:
        pipeline = self._new_pipeline(path)
        with self._ingest_lock, self._derive_lock, self._publish_lock:
            if generation != self.generation:
                return  # switched again meanwhile
            self.pipeline = pipeline
            self._session = (pipeline, generation)
            self._built = (None, None, None)
        self.app.call_from_thread(self._start_watching, generation)

    def _start_watching(self, generation: int) -> None:
        if generation != self.generation:
            return
        self._start_watcher()
        self.refresh()

    # --- the paint handshake ------------------------------------------------------------------

    def painted(self, version: int) -> None:
        """The screen has painted snapshot `version`: a waiting derive pass may start."""
        with self._painted:
            if version > self._painted_version:
                self._painted_version = version
            self._painted.notify_all()

    def ingest_running(self) -> bool:
        """True while an ingest pass runs or waits (e.g. a re-read from byte 0)."""
        return self._ingest_requests.running()

    def newest_snapshot(self) -> Snapshot | None:
        """The newest snapshot the workers made (possibly not painted yet)."""
        return self._built[0]

    # --- ingest ---------------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        """Read the file's new lines and show them (fast counts first, then exact cl100k, then
        the derived views), in the ingest worker; a request while it runs is one more pass.
        `force`: read the whole file again from byte 0."""
        started = self._ingest_requests.request(force, _keep_forced)
        self._woken = False  # the ingest loop runs now (`_derive_may_run`)
        if not started:
            with self._painted:
                self._painted.notify_all()  # the running loop stops waiting to prepare (`_prepare_next`)
        # a derive pass pauses at its next pause point until this line is read and painted
        pause.request()
        if started:
            self.app.run_worker(self._ingest_loop, thread=True, exclusive=True, group="ingest", exit_on_error=False)

    def _ingest_loop(self) -> None:
        try:
            while True:
                more, force = self._ingest_requests.take()
                if not more:
                    with self._painted:
                        self._painted.notify_all()  # a paused derive pass may go on (`_derive_may_run`)
                    return
                with self._ingest_lock:
                    pipeline, generation = self._session
                    sliced = self._slice
                    limit = sliced[1] if sliced is not None and sliced[0] == generation else None
                    try:
                        snap = None
                        for snap in pipeline.snapshots(force=bool(force), limit=limit):
                            self._publish(generation, snapshot=snap)
                    except OSError as exc:
                        reason = exc.strerror or str(exc)
                        self.target.post_message(FeedStatus(f"cannot read {pipeline.path}: {reason}", error=True))
                        continue
                if limit is not None and self._slice == sliced:
                    self._slice = (generation, min(2 * limit, MAX_SLICE_BYTES)) if snap is not None and snap.unread_bytes else None
                if snap is not None and snap.unread_bytes:
                    # a slice of the first read: painted first (then the next one), never planned
                    self._ingest_requests.request(False, _keep_forced)  # (a forced request waiting stays forced)
                    with self._painted:
                        self._painted.wait_for(
                            lambda: self._painted_version >= snap.version or generation != self.generation,
                            timeout=DERIVE_WAIT_S,
                        )
                    continue
                if snap is not None and self._derive_requests.request((pipeline, generation, snap)):
                    self.app.run_worker(self._derive_loop, thread=True, exclusive=True, group="derive", exit_on_error=False)
                if snap is not None:
                    self._prepare_next(pipeline, generation, snap)
        except BaseException:
            self._ingest_requests.stopped()
            raise

    def _prepare_next(self, pipeline: SessionPipeline, generation: int, snap: Snapshot) -> None:
        """Once the screen has painted `snap` and no other line waits, copy what the next append
        extends (`LiveSession.prepare`, a few ms at 10,000 turns), so that append reaches the
        screen in O(new) (the derive pass waits meanwhile: this worker still runs)."""
        with self._painted:
            self._painted.wait_for(
                lambda: self._painted_version >= snap.version or generation != self.generation
                or self._ingest_requests.pending(),
                timeout=DERIVE_WAIT_S,
            )
        if generation != self.generation or self._ingest_requests.pending():
            return
        with self._ingest_lock:
            if self._session[1] == generation:
                pipeline.prepare()

    # --- derive ---------------------------------------------------------------------------------

    def _derive_loop(self) -> None:
        try:
            while True:
                more, job = self._derive_requests.take()
                if not more:
                    return
                pipeline, generation, snap = job  # type: ignore[misc]
                # What the user waits for first is the appended line on screen: the derived views
                # (plan, cache, retrieval) start once the screen has painted this snapshot (or
                # after DERIVE_WAIT_S), so they do not take the GIL from that paint.
                # A long pass (a large session) then rests as long as it ran, so at most half the
                # time goes to deriving and an append landing meanwhile has the CPU to itself.
                with self._painted:
                    rest = self._derive_rest_until - time.monotonic()
                    if rest > 0:
                        self._painted.wait_for(lambda: generation != self.generation, timeout=min(rest, DERIVE_REST_MAX_S))
                    self._painted.wait_for(
                        lambda: self._painted_version >= snap.version or generation != self.generation,  # type: ignore[attr-defined]
                        timeout=DERIVE_WAIT_S,
                    )
                if self._derive_requests.pending():
                    continue  # a newer snapshot arrived while resting: derive that one
                started = time.monotonic()
                may_run = partial(self._derive_may_run, generation)

                def checkpoint() -> None:
                    # between stages: a line being read, or a newer snapshot on its way to the
                    # screen, goes first; then the young garbage of the stages so far is
                    # collected (nothing waits)
                    pause.take_request()
                    with self._painted:
                        self._painted.wait_for(may_run, timeout=DERIVE_WAIT_S)
                    self._pacer.at_checkpoint()

                def pause_hook() -> None:
                    # inside a stage (`ds4core.pause.pause_point`, every few hundred items): the
                    # same wait, asked for by `refresh` (a line to read)
                    if pause.take_request():
                        with self._painted:
                            self._painted.wait_for(may_run, timeout=DERIVE_WAIT_S)

                with self._derive_lock, pause.hooked(pause_hook):
                    for derived in pipeline.derive(snap, now=self._now(), checkpoint=checkpoint):  # type: ignore[arg-type]
                        if derived.plan is not None and self.manifest_shown:
                            derived.plan.items  # noqa: B018 - the manifest is on screen: its rows are made here, not in the paint
                        self._publish(generation, derived=derived)
                        if self._derive_requests.pending():
                            break  # a newer snapshot waits: its pass replaces the rest of this one
                took = time.monotonic() - started
                # The pass's garbage is gone by reference counting; what it built and keeps (plan
                # and manifest items, groups, view rows: ~18,000 tracked objects at 1,000 turns)
                # is traversed once by a young collection, here, at a moment the screen is not
                # painting, instead of inside some later paint.
                checkpoint()
                self._pacer.after_pass()
                self._derive_rest_until = time.monotonic() + (took if took > DERIVE_REST_FROM_S else 0.0)
        except BaseException:
            self._derive_requests.stopped()
            raise

    def _derive_may_run(self, generation: int) -> bool:
        """Whether a derive pass of `generation` may go on (call with `_painted` held): no line
        is being read and the screen has painted the newest snapshot posted (or the session
        was switched away from)."""
        if generation != self.generation:
            return True
        return not self._woken and not self._ingest_requests.running() and self._painted_version >= self._posted_version

    def _publish(self, generation: int, *, snapshot: Snapshot | None = None, derived: Derived | None = None) -> None:
        """Build the view model of the workers' newest snapshot and derived views (on the
        calling worker's thread) and post it to the target."""
        if generation != self.generation:
            return  # a session switched away from
        with self._publish_lock:
            snap, last_derived, previous = self._built
            snap = snapshot or snap
            last_derived = derived or last_derived
            if snap is None:
                return
            view = viewmodel.build(snap, last_derived, previous=previous,
                                   today=dt.datetime.fromtimestamp(self._now()).date())
            self._built = (snap, last_derived, view)
        if snapshot is not None:
            with self._painted:
                self._posted_version = max(self._posted_version, snapshot.version)
        self.target.post_message(ViewUpdated(snap, last_derived, view, generation))
