"""The Textual app: a live dashboard of one Pi session's context window.

Data flow (design.md): a `SessionWatcher` (watchdog on the file's directory, plus a slow poll)
only wakes the app. Two exclusive thread workers, each a loop that coalesces requests (a burst of
appends is one more pass, the last request is never lost, and no thread waits on another):

- ingest: `SessionPipeline.snapshots()` (tailer → reader → context → chars-v1 counts, then the
  exact cl100k counts) and hands the newest snapshot to the derive worker;
- derive: `SessionPipeline.derive()` on the newest snapshot (plan, cache view, retrieval).

After each stage the worker builds the view model (`ds4tui.viewmodel.build`, pure, off the UI
thread) and posts it in one `ViewUpdated` message (`can_replace`: a newer one replaces an older
one still queued). The UI thread only renders it: each widget touches what changed.

Opened by `ds4tui PATH` on a large file, the first paint comes from a forked copy of the process
that read the file while this one imported Textual (`ds4tui.firstview`): its view model is
painted first, then the ingest worker reads the file as above.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from bisect import bisect_right
from operator import attrgetter
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from textual import events, on, work
from textual.geometry import Size
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker, WorkerState
from textual.widgets import DataTable, Footer, TabbedContent, TabPane, Tabs

from ds4core import pause
from ds4tui import viewmodel
from ds4tui.gcpace import GcPacer

from ds4core.models import ModelTable
from ds4sessions.ingest.live import Snapshot
from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4sessions.ingest.watch import SessionWatcher
from ds4tui.screens.view_keys import SHARED_BINDINGS, quitting, toggle_help
from ds4tui.widgets.cache import CacheCountdown, CachePanel
from ds4tui.widgets.manifest import ManifestView
from ds4tui.widgets.panels import CategoryList, DiagnosticsView, EntryInspector, SessionHeader, StatusLine, TurnList
from ds4tui.widgets.pixel_map import PixelMap
from ds4tui.widgets.retrieval import RetrievalView

if TYPE_CHECKING:
    from ds4tui.actions.steering import SteeringController
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
_FIRST_MESSAGE = attrgetter("first_message")


def _keep_forced(old: object, new: object) -> bool:
    """Two ingest requests merged: a forced pass (a re-read from byte 0) stays forced."""
    return bool(old) or bool(new)

MIN_MAP_HEIGHT = 20
"""Terminal rows below which the pixel map is hidden (the numbers stay)."""
NARROW_WIDTH = 100
"""Terminal columns below which the two panes stack."""
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


class FileChanged(Message):
    """The watcher saw the session file change (a wake-up only)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FileChanged)


class Ds4App(App[None]):
    """ds4tui's dashboard for one session file.

    `path` is the session file (it may not exist yet); `demo` shows a "demo" badge;
    `watch=False` disables the file watcher (tests drive `refresh_session()` themselves).
    """

    CSS_PATH = "styles/app.tcss"
    TITLE = "ds4tui"
    BINDINGS = [
        *SHARED_BINDINGS,  # q ? Esc o, as in the Claude Code and Codex views
        Binding("f", "toggle_follow", "Follow", id="follow", tooltip="Pause or resume live updates"),
        Binding("r", "refresh_session", "Refresh", id="refresh", tooltip="Re-read the session file now", show=False),
        Binding("m", "focus_map", "Map", id="focus-map", tooltip="Focus the pixel map (arrows move between cells)"),
        Binding("v", "toggle_map_view", "View", id="map-view", tooltip="Switch the map between what the agent sends and DS4's plan (▒ excluded, ◆ pinned)"),
        Binding("i", "toggle_inspector", "Inspector", id="inspector", tooltip="Show or hide the entry inspector"),
        Binding("p", "pin", "Pin", id="pin", tooltip="Pin or unpin the selected entry (a ds4:pin label; confirmed first)"),
        Binding("P", "pins", "Pins", id="pins", tooltip="List the pinned entries", show=False),
        Binding("c", "collapse", "Collapse", id="collapse", tooltip="Collapse finished turns into a summary (preview first)"),
        Binding("C", "compact", "Compact", id="compact", tooltip="Preview and trigger a cache-friendly compaction"),
        Binding("t", "show_tab('turns')", "Turns", id="tab-turns", tooltip="Show the turn list", show=False),
        Binding("M", "show_tab('manifest')", "Manifest", id="tab-manifest", tooltip="Show the DS4 plan: every item and why"),
        Binding("K", "show_tab('cache')", "Cache", id="tab-cache", tooltip="Show the prompt-cache history and DS4's cache-aware decision"),
        Binding("R", "show_tab('retrieval')", "Retrieval", id="tab-retrieval", tooltip="Show DS4's historical retrieval for the current request"),
        Binding("d", "show_tab('diagnostics')", "Diagnostics", id="tab-diagnostics", tooltip="Show problems found in the file", show=False),
    ]

    following: var[bool] = var(True)
    """Apply new snapshots as they arrive (False: paused; the tail still reads)."""

    process_ends_after = False
    """Set by the CLI (`launch.run_tui`) when the process ends as soon as the app returns: the
    collector's thresholds are then not restored at unmount (with them, the teardown ran full
    collections over a 50,000-turn session's objects: ~0.7 s of the time `q` took)."""

    def __init__(
        self,
        path: Path,
        *,
        demo: bool = False,
        models: ModelTable | None = None,
        watch: bool = True,
        config_file: Path | None = None,
        retrieval: bool = True,
        now: Callable[[], float] = time.time,
        first_view: FirstView | None = None,
    ) -> None:
        """`path`: the session file (it need not exist yet); `demo` shows the demo badge;
        `models`: the model table (default: bundled); `watch=False` disables the file watcher;
        `config_file` replaces the user's DS4 configuration; `retrieval=False` skips DS4's
        retrieval (no index is written); `now` is the clock (epoch seconds) for the prompt-cache
        countdown (tests inject a fixed one); `first_view`: a copy of the process reading
        `path` for the first paint (`ds4tui.firstview.start`; the app paints its view model,
        then reads the file itself)."""
        super().__init__()
        self._first_view = first_view
        self._slice: tuple[int, int] | None = (0, FIRST_SLICE_BYTES)
        """(generation, bytes) of the next slice of a session's first read; None: read to the end."""
        self._now = now
        self.session_path = Path(path)
        self.demo = demo
        self._models = models
        self._watch = watch
        self._config_file = config_file
        self._with_retrieval = retrieval
        self._pipeline = self._new_pipeline()
        self._session: tuple[SessionPipeline, int] = (self._pipeline, 0)
        """The pipeline the workers drive and its generation (swapped together)."""
        self._ingest_lock = threading.Lock()  # one ingest pass at a time (held by the worker only)
        self._derive_lock = threading.Lock()  # one derive pass at a time (held by the worker only)
        self._publish_lock = threading.Lock()  # the workers' newest snapshot / derived / view model
        self._ingest_requests = _Requests()
        self._derive_requests = _Requests()
        self._painted = threading.Condition()
        self._painted_version = -1  # the newest snapshot version the screen has painted (guarded by _painted)
        self._woken = False  # the watcher saw a change the UI thread has not started reading yet
        self._manifest_shown = False  # the Manifest tab is on screen (its plan items are made by the derive worker)
        self._posted_version = -1  # the newest snapshot version posted to the screen (guarded by _painted)
        self._derive_rest_until = 0.0  # time.monotonic() before which the next derive pass rests
        self._generation = 0
        self._built: tuple[Snapshot | None, Derived | None, viewmodel.ViewModel | None] = (None, None, None)
        self._watcher: SessionWatcher | None = None
        self.snapshot: Snapshot | None = None
        self.derived: Derived | None = None
        self.view: viewmodel.ViewModel = viewmodel.EMPTY
        """The view model on screen."""
        self._latest: ViewUpdated | None = None
        self._selected: int | None = None
        self._view_chosen = False  # the user (or DS4 detection) chose the map's view
        self._inspected: tuple = ()
        self._highlighted: int | None = None
        self._gc = GcPacer()
        """When Python's cyclic GC runs while the dashboard is open (`ds4tui.gcpace`)."""
        self._stale_tabs: dict[str, Callable[[], None]] = {}
        self._retired: list[tuple[object, ...]] = []
        """Updates of the hidden tabs (manifest, cache, retrieval, diagnostics), run when shown."""

    @cached_property
    def steering(self) -> SteeringController:
        """The steering actions (pin, pins, collapse, compact); the app implements its host.
        Made at the first action: the steering and bridge modules load then, not with the app
        (~45 ms of every start)."""
        from ds4tui.actions.steering import SteeringController

        return SteeringController(self)

    def _new_pipeline(self) -> SessionPipeline:
        return SessionPipeline(
            self.session_path, self._models, config_file=self._config_file, retrieval=self._with_retrieval
        )

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette offers every dashboard action (by its binding's description), plus
        Textual's own commands (theme, keys, screenshot, quit)."""
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.action != "quit":
                help_text = binding.tooltip or f"key: {binding.key_display or binding.key}"
                yield SystemCommand(binding.description, help_text, partial(self.run_action, binding.action))

    def compose(self) -> ComposeResult:
        with Horizontal(id="topbar"):
            yield SessionHeader(id="header")
            yield CacheCountdown(id="countdown", notify=True, now=self._now, compact=True)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PixelMap(id="map")
                with VerticalScroll(id="categories-scroll"):
                    yield CategoryList(id="categories")
            with Vertical(id="right"):
                with TabbedContent(id="tabs"):
                    with TabPane("Turns", id="turns"):
                        yield TurnList(id="turn-list")
                    with TabPane("Manifest", id="manifest"):
                        yield ManifestView(id="manifest-view")
                    with TabPane("Cache", id="cache"):
                        with VerticalScroll():
                            yield CachePanel(id="cache-panel")
                    with TabPane("Retrieval", id="retrieval"):
                        yield RetrievalView(id="retrieval-view")
                    with TabPane("Diagnostics", id="diagnostics"):
                        with VerticalScroll():
                            yield DiagnosticsView(id="diagnostics-view")
                with VerticalScroll(id="inspector-scroll"):
                    yield EntryInspector(id="inspector")
        yield StatusLine("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
        self._gc.start()
        self._apply_size_classes()
        self.query_one(SessionHeader).show(None, demo=self.demo, following=self.following)
        self.query_one(EntryInspector).update("Loading…")
        if self._watch:
            self._watcher = SessionWatcher(self.session_path, self._file_changed)
            self._watcher.start()
        if self._first_view is not None:
            self._await_first_view(self._first_view)  # then the app's own read (`on_first_view_ready`)
        else:
            self.refresh_session()
        self.set_interval(2.0, self._poll_bridge)

    @work(thread=True, group="first-view", exit_on_error=False)
    def _await_first_view(self, first_view: FirstView) -> None:
        """Wait (off the UI thread) for the forked copy's view model and post it."""
        view = first_view.result()
        self._first_view = None
        self.post_message(FirstViewReady(view))

    def on_first_view_ready(self, message: FirstViewReady) -> None:
        """Paint the copy's view model if nothing newer is on screen, then read the file (after
        that frame: the read would otherwise share the GIL with its paint)."""
        view = message.view
        if view is None or self.snapshot is not None or self._generation != 0 or not self.default_screen.query(CategoryList):
            self.refresh_session()
            return
        self._show_first_view(view)
        self._slice = None  # the whole session is on screen: no partial state after it
        self.call_after_refresh(self.refresh_session)

    def _show_first_view(self, view: viewmodel.ViewModel) -> None:
        """Render the header, legend, map and turn list of `view` (the copy's first view: no
        snapshot yet, so selections, the inspector and steering wait for the app's own read)."""
        self.view = view
        self.query_one(SessionHeader).show(view.header, demo=self.demo, following=self.following)
        self.query_one(CategoryList).show(view.legend)
        self.query_one(PixelMap).set_data(view.map)
        self.query_one(TurnList).show(view)
        self._apply_overlays()  # (no plan yet: the ds4 view's title says "planning…")
        # the newest turn, where the dashboard's own snapshot puts the cursor too (once this
        # frame is painted: the cursor's row is redrawn with the rest of the list)
        self.call_after_refresh(self._turns_to_newest)

    def _turns_to_newest(self) -> None:
        """Put the turn list's cursor on its last row, in view (no selection: no snapshot yet)."""
        turns = self.query_one(TurnList)
        if turns.row_count:
            with turns.prevent(TurnList.TurnHighlighted):
                turns.move_cursor(row=turns.row_count - 1)

    def _poll_bridge(self) -> None:
        """Show the bridge state of the open session (cheap: one small heartbeat file and a pid
        check, so it runs on the UI thread, every 2 s and with each snapshot). Imports only the
        status module: the bridge's facade (`channel`) loads the steering and planner modules,
        ~100 ms inside the first paint."""
        from ds4sessions.bridge import status as bridge

        snap = self.snapshot
        header = self.query_one_optional(SessionHeader) if self.screen_stack else None
        if snap is None or not snap.reader.session_id or header is None:
            return  # nothing open yet, or the app is closing (its widgets are gone)
        try:
            text = bridge.status(snap.reader.session_id).header
        except ValueError:
            text = "bridge: n/a"
        header.set_bridge(text)
        countdown = self.query_one(CacheCountdown).state
        if countdown is not None and countdown.status != self.query_one(PixelMap).cache_status:
            self._apply_overlays()  # the cache went cold (or warm) since the last overlay

    def on_unmount(self) -> None:
        if self._first_view is not None:
            self._first_view.cancel()
        if self._watcher is not None:
            self._watcher.stop()
        sys.setswitchinterval(getattr(self, "_switch_interval", sys.getswitchinterval()))
        if self.process_ends_after:
            gc.disable()  # the process ends next (`launch.leave`): no full collections of a large heap meanwhile
        else:
            self._gc.stop()
        self._mark_painted(1 << 62)  # release a derive worker waiting for a paint

    def on_resize(self, event: events.Resize) -> None:
        # the event's size: the app's own `size` still says the previous one while this runs
        self._apply_size_classes(event.size)
        self.query_one(PixelMap).reset_scale()  # a new terminal size: choose the map scale afresh

    def _apply_size_classes(self, size: Size | None = None) -> None:
        size = size or self.size
        self.default_screen.set_class(size.width < NARROW_WIDTH, "-narrow")
        self.default_screen.set_class(size.height < MIN_MAP_HEIGHT, "-no-map")
        self.query_one(PixelMap).fit_height = size.width >= NARROW_WIDTH  # map above its legend
        if not getattr(self, "_inspector_sized", False):
            self._inspector_sized = True  # a short stacked screen starts without the inspector (`i` shows it)
            self.default_screen.set_class(size.width < NARROW_WIDTH and size.height < 30, "-no-inspector")

    # --- ingest -----------------------------------------------------------------------------

    def _file_changed(self) -> None:
        """The watcher's wake-up (on its thread): a derive pass pauses at once (not after the UI
        thread gets the GIL to handle the message), then the UI thread starts the read."""
        self._woken = True
        pause.request()
        self.post_message(FileChanged())

    def on_file_changed(self, _: FileChanged) -> None:
        self.refresh_session()

    def refresh_session(self, force: bool = False) -> None:
        """Read the file's new lines and show them (fast counts first, then exact cl100k, then
        the derived views), in the ingest worker; a request while it runs is one more pass."""
        started = self._ingest_requests.request(force, _keep_forced)
        self._woken = False  # the ingest loop runs now (`_derive_may_run`)
        if not started:
            with self._painted:
                self._painted.notify_all()  # the running loop stops waiting to prepare (`_prepare_next`)
        # a derive pass pauses at its next pause point until this line is read and painted
        pause.request()
        if started:
            self._ingest_worker()

    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def _ingest_worker(self) -> None:
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
                        self.call_from_thread(self.status, f"cannot read {pipeline.path}: {reason}", error=True)
                        continue
                if limit is not None and self._slice == sliced:
                    self._slice = (generation, min(2 * limit, MAX_SLICE_BYTES)) if snap is not None and snap.unread_bytes else None
                if snap is not None and snap.unread_bytes:
                    # a slice of the first read: painted first (then the next one), never planned
                    self._ingest_requests.request(False, _keep_forced)  # (a forced request waiting stays forced)
                    with self._painted:
                        self._painted.wait_for(
                            lambda: self._painted_version >= snap.version or generation != self._generation,
                            timeout=DERIVE_WAIT_S,
                        )
                    continue
                if snap is not None and self._derive_requests.request((pipeline, generation, snap)):
                    self._derive_worker()
                if snap is not None:
                    self._prepare_next(pipeline, generation, snap)
        except BaseException:
            self._ingest_requests.stopped()
            raise

    @work(thread=True, exclusive=True, group="derive", exit_on_error=False)
    def _derive_worker(self) -> None:
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
                        self._painted.wait_for(lambda: generation != self._generation, timeout=min(rest, DERIVE_REST_MAX_S))
                    self._painted.wait_for(
                        lambda: self._painted_version >= snap.version or generation != self._generation,  # type: ignore[attr-defined]
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
                    self._gc.at_checkpoint()

                def pause_hook() -> None:
                    # inside a stage (`ds4core.pause.pause_point`, every few hundred items): the
                    # same wait, asked for by `refresh_session` (a line to read)
                    if pause.take_request():
                        with self._painted:
                            self._painted.wait_for(may_run, timeout=DERIVE_WAIT_S)

                with self._derive_lock, pause.hooked(pause_hook):
                    for derived in pipeline.derive(snap, now=self._now(), checkpoint=checkpoint):  # type: ignore[arg-type]
                        if derived.plan is not None and self._manifest_shown:
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
                self._gc.after_pass()
                self._derive_rest_until = time.monotonic() + (took if took > DERIVE_REST_FROM_S else 0.0)
        except BaseException:
            self._derive_requests.stopped()
            raise

    def _prepare_next(self, pipeline: SessionPipeline, generation: int, snap: Snapshot) -> None:
        """Once the screen has painted `snap` and no other line waits, copy what the next append
        extends (`LiveSession.prepare`, a few ms at 10,000 turns), so that append reaches the
        screen in O(new) (the derive pass waits meanwhile: this worker still runs)."""
        with self._painted:
            self._painted.wait_for(
                lambda: self._painted_version >= snap.version or generation != self._generation
                or self._ingest_requests.pending(),
                timeout=DERIVE_WAIT_S,
            )
        if generation != self._generation or self._ingest_requests.pending():
            return
        with self._ingest_lock:
            if self._session[1] == generation:
                pipeline.prepare()

    def _derive_may_run(self, generation: int) -> bool:
        """Whether a derive pass of `generation` may go on (call with `_painted` held): no line
        is being read and the screen has painted the newest snapshot posted (or the session
        was switched away from)."""
        if generation != self._generation:
            return True
        return not self._woken and not self._ingest_requests.running() and self._painted_version >= self._posted_version

    def _publish(self, generation: int, *, snapshot: Snapshot | None = None, derived: Derived | None = None) -> None:
        """Build the view model of the workers' newest snapshot and derived views (on the
        calling worker's thread) and post it to the UI thread."""
        if generation != self._generation:
            return  # a session switched away from
        with self._publish_lock:
            snap, last_derived, previous = self._built
            snap = snapshot or snap
            last_derived = derived or last_derived
            if snap is None:
                return
            view = viewmodel.build(snap, last_derived, previous=previous)
            self._built = (snap, last_derived, view)
        if snapshot is not None:
            with self._painted:
                self._posted_version = max(self._posted_version, snapshot.version)
        self.post_message(ViewUpdated(snap, last_derived, view, generation))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One place where a failed worker becomes a visible error (never a silent stop)."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.status(f"{event.worker.group or 'worker'} failed: {type(error).__name__}: {error}", error=True)

    def on_view_updated(self, message: ViewUpdated) -> None:
        if message.generation != self._generation:
            return
        self._latest = message
        if not self.default_screen.query(CategoryList):
            return  # the app is closing: its widgets are gone
        if self.following or self.snapshot is None:
            self._show(message)
        else:
            self._mark_painted(message.snapshot.version)  # paused: nothing to paint, derive on

    def _show(self, message: ViewUpdated) -> None:
        """Render `message`'s view model: each widget touches only what changed."""
        before, view = self.view, message.view
        previous_derived = self.derived
        first = self.snapshot is None
        shown = len(self.snapshot.context.messages) if self.snapshot is not None else 0
        # The previous snapshot and view are freed after this frame is painted, not during it
        # (at 10,000 turns, freeing a snapshot's per-message lists takes milliseconds).
        self._retire(self.snapshot, previous_derived, before)
        self.snapshot, self.derived, self.view = message.snapshot, message.derived, view
        snap = message.snapshot
        if first or before.header.session_id != view.header.session_id:
            self._poll_bridge()  # a new session (or the first snapshot): its bridge now (then every 2 s)
        # (after the forked copy's first view, `before` has the same version as this first
        # snapshot: what only a snapshot draws, e.g. the diagnostics, is drawn now)
        new_version = first or before.version != view.version
        if new_version or before.header != view.header:
            self.query_one(SessionHeader).show(view.header, demo=self.demo, following=self.following)
        if view.legend is not before.legend:
            self.query_one(CategoryList).show(view.legend)
        pixel_map = self.query_one(PixelMap)
        if not view.map.same_data(before.map):
            pixel_map.set_data(view.map)
        self.query_one(TurnList).show(view)
        if new_version:
            self._tab_update("diagnostics", partial(self.query_one(DiagnosticsView).show, snap))
        derived = message.derived
        if derived is not None and derived is not previous_derived and derived.version == snap.version:
            self._show_derived(derived, previous_derived)
        elif self.derived is None:  # nothing derived yet: say what the cache view waits for
            self.query_one(CacheCountdown).waiting("reading…" if snap.unread_bytes else "after the plan…")
        self._apply_overlays()  # after the cache panels: the boundary takes the countdown's status
        newest = len(snap.context.messages) - 1
        follow = self.following and self._selected is not None and self._selected == shown - 1 < newest
        if self._selected is None or self._selected > newest or follow:
            # the newest message stays selected while following (the user did not move away)
            self._selected = newest if newest >= 0 else None
        if follow:
            # the inspector and the turn cursor move to the new message in the next frame: this
            # one paints the line in the map, legend, turns and header first (the inspector's
            # redraw of a new message doubled the frame: ~4 ms at 1,000 turns)
            self.call_after_refresh(self._follow_selected)
        elif self._selected is not None:
            self._select_message(self._selected, sync_turns=True, refresh=False)
        else:
            self.query_one(EntryInspector).show(snap, None)
        self.call_after_refresh(self._mark_painted, snap.version)

    def _follow_selected(self) -> None:
        """Show the selected message (the newest, while following) in the inspector and the
        turn list's cursor (after the frame that painted the append)."""
        snap = self.snapshot
        if snap is not None and self._selected is not None and self._selected < len(snap.context.messages):
            self._select_message(self._selected, sync_turns=True, refresh=False)

    def _mark_painted(self, version: int) -> None:
        """The screen has painted snapshot `version`: a waiting derive pass may start."""
        with self._painted:
            if version > self._painted_version:
                self._painted_version = version
            self._painted.notify_all()

    def _show_derived(self, derived: Derived, previous: Derived | None) -> None:
        if not self._view_chosen and self.snapshot is not None:
            from ds4sessions.derive.ds4config import ds4_active

            self._view_chosen = True
            if ds4_active(derived.config, self.snapshot.reader.cwd):
                self.query_one(PixelMap).set_view("ds4")
        errors = dict(derived.errors)
        if derived.plan is not None and (previous is None or previous.plan is not derived.plan):
            self._tab_update("manifest", partial(self.query_one(ManifestView).show, derived.plan, rows=self.view.manifest_rows or ()))
        if previous is None or previous.cache is not derived.cache:
            self._tab_update("cache", partial(self.query_one(CachePanel).show, derived.cache))
            self.query_one(CacheCountdown).show(derived.cache)
        if (derived.retrieval is not None or "retrieval" in errors) and (previous is None or previous.retrieval is not derived.retrieval):
            self._tab_update("retrieval", partial(self.query_one(RetrievalView).show, derived.retrieval))
        for stage, error in derived.errors:
            if previous is None or (stage, error) not in previous.errors:
                self.notify(f"{stage}: {error}", title="ds4tui", severity="error", timeout=8)

    def _retire(self, *values: object) -> None:
        """Keep `values` until the screen has painted (then drop them: freeing happens there)."""
        if not self._retired:
            self.call_after_refresh(self._retired.clear)
        self._retired.append(values)

    def _tab_update(self, tab: str, update: Callable[[], None]) -> None:
        """Run `update` (a hidden tab's redraw) now when tab `tab` is shown, else when it is next
        shown (only the newest waits): an append redraws what is on screen only."""
        if self.query_one(TabbedContent).active == tab:
            self._stale_tabs.pop(tab, None)
            update()
        else:
            self._retire(self._stale_tabs.get(tab))
            self._stale_tabs[tab] = update

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._manifest_shown = event.pane.id == "manifest"
        update = self._stale_tabs.pop(event.pane.id or "", None)
        if update is not None:
            update()

    def _apply_overlays(self) -> None:
        """Mark on the map what the plan excludes or pins and where the cached prefix ends; the
        boundary takes the countdown's cache status (it ticks while the session is idle)."""
        overlays = self.view.map.overlays
        status = None
        if self.derived is not None and self.derived.cache is not None:
            state = self.query_one(CacheCountdown).state
            status = state.status if state is not None else None
        self.query_one(PixelMap).set_overlays(
            excluded=overlays.excluded, pinned=overlays.pinned, cached_end=overlays.cached_end, cache_status=status,
            planned=self.view.plan is not None or self.view.version == 0,
        )

    # --- selection --------------------------------------------------------------------------

    @on(PixelMap.CellSelected)
    def _cell_selected(self, event: PixelMap.CellSelected) -> None:
        if self.snapshot is None:
            return
        if event.message_index is None:
            self.query_one(EntryInspector).show_cell(self.snapshot, event.category, event.map.tokens_per_cell)
            return
        self._select_message(event.message_index, sync_turns=True)

    @on(TurnList.TurnHighlighted)
    def _turn_highlighted(self, event: TurnList.TurnHighlighted) -> None:
        if self.snapshot is None or not event.key:
            return
        self._select_message(int(event.key), sync_turns=False)

    @on(ManifestView.EntrySelected)
    @on(RetrievalView.EntrySelected)
    def _entry_selected(self, event: ManifestView.EntrySelected | RetrievalView.EntrySelected) -> None:
        snap = self.snapshot
        if snap is None or event.entry_id is None:
            return
        tab = "manifest" if isinstance(event, ManifestView.EntrySelected) else "retrieval"
        tabs = self.query_one_optional(TabbedContent) if self.screen_stack else None
        if tabs is None or tabs.active != tab:  # the app is closing, or
            return  # a table filling in a hidden tab is not the user's choice
        ids = snap.context.message_entry_ids
        if event.entry_id in ids:
            self._select_message(ids.index(event.entry_id), sync_turns=True, sync_manifest=False)
        else:  # not in the context (dropped by a compaction or on another branch)
            self.query_one(PixelMap).highlight_message(None)
            self.query_one(EntryInspector).show_entry(snap, event.entry_id)

    def _select_message(self, index: int, *, sync_turns: bool, sync_manifest: bool = True, refresh: bool = True) -> None:
        """Select context message `index`: inspector, map highlight, manifest and turn cursors.
        `refresh=False` (a new snapshot) redraws only what the new snapshot changed."""
        snap = self.snapshot
        if snap is None:
            return
        changed = self._selected != index
        self._selected = index
        messages = snap.context.messages
        entry_id = snap.context.message_entry_ids[index] if index < len(snap.context.message_entry_ids) else None
        # the inspector shows the message's counts calibrated as the map counts them: redraw when
        # the estimator (chars-v1 → cl100k) or the calibration changes too
        calibration = (snap.best.counter, self.view.calibration.factor)
        shown = (id(messages[index]) if index < len(messages) else None, snap.context.labels.get(entry_id or ""), entry_id, calibration)
        if refresh or changed or shown != self._inspected:
            self._inspected = shown
            self.query_one(EntryInspector).show(snap, index)
        if refresh or changed or self._highlighted != index:
            self._highlighted = index
            self.query_one(PixelMap).highlight_message(index)
        if sync_manifest and (refresh or changed) and entry_id and self.derived is not None and self.derived.plan is not None:
            self.query_one(ManifestView).select_entry(entry_id)
        if sync_turns:
            turns = self.view.turns
            if turns and turns[-1].first_message <= index:  # the usual case: the last turn
                row = len(turns) - 1
            else:
                row = bisect_right(turns, index, key=_FIRST_MESSAGE) - 1
            table = self.query_one(TurnList)
            if 0 <= row < table.row_count and table.cursor_row != row:
                with table.prevent(TurnList.TurnHighlighted):
                    table.move_cursor(row=row)
            elif 0 <= row < table.row_count:
                table.scroll_to_cursor()  # (already there, e.g. from the first view: keep it in view)

    # --- steering (the controller's host) ---------------------------------------------------

    def status(self, text: str, *, error: bool = False) -> None:
        """Report on the status line (the session's path shortened to its name, so the reason
        fits) and in a notification (in full)."""
        short = text.replace(str(self.session_path), self.session_path.name)
        self.query_one(StatusLine).report(short, error=error)
        self.notify(text, title="ds4tui", severity="error" if error else "information", timeout=6)

    def selected_entry_id(self) -> str | None:
        """The entry id of the selected context message (None: nothing selected)."""
        snap = self.snapshot
        if snap is None or self._selected is None or self._selected >= len(snap.context.message_entry_ids):
            return None
        return snap.context.message_entry_ids[self._selected]

    def select_entry(self, entry_id: str | None) -> None:
        """Select `entry_id`: its context message, or the entry from the file when it is not in
        the context (None: nothing)."""
        snap = self.snapshot
        if entry_id is None or snap is None:
            return
        ids = snap.context.message_entry_ids
        if entry_id in ids:
            self._select_message(ids.index(entry_id), sync_turns=True)
        else:
            self.query_one(EntryInspector).show_entry(snap, entry_id)

    def action_pin(self) -> None:
        """Pin or unpin the selected entry (a `ds4:pin` label), after confirmation."""
        self.steering.pin()

    def action_pins(self) -> None:
        """List the pinned entries; choosing one selects it."""
        self.steering.pins()

    def action_collapse(self) -> None:
        """Collapse the last N finished turns into a branch summary, after a preview."""
        self.steering.collapse()

    def action_compact(self) -> None:
        """Preview Pi's compaction and, on confirmation, request the summary and append it."""
        self.steering.compact()

    # --- actions ----------------------------------------------------------------------------

    def action_toggle_follow(self) -> None:
        """Pause or resume applying updates (reading continues in the background)."""
        self.following = not self.following
        if self.following and self._latest is not None:
            self._show(self._latest)
        self.query_one(SessionHeader).show(self.view.header, demo=self.demo, following=self.following)
        self.notify("following the session" if self.following else "paused: updates are held")

    def action_refresh_session(self) -> None:
        """Read the whole session file again from its start and rebuild (`LiveSession.refresh`
        with `force`): what the tail cannot see, e.g. a rewrite in place of the same size. A
        notice says what was read when the pass ends (`re-read NAME: 12.3 MiB, 4,512 lines`)."""
        self.refresh_session(force=True)
        self._reread_notice(self._generation)

    @work(group="reread-notice", exclusive=True, exit_on_error=False)
    async def _reread_notice(self, generation: int) -> None:
        """Wait (on the UI loop, without blocking it) for the ingest pass to end, then notify
        from the newest snapshot what it knows (its size and lines; nothing is counted here)."""
        import asyncio

        from ds4tui.screens.view_keys import reread_text

        deadline = time.monotonic() + 120
        while self._ingest_requests.running() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        snap = self._built[0]
        if snap is None or generation != self._generation:
            return  # unreadable (the status line says why), or another session now
        name = snap.session.session_name or snap.path.name
        self.notify(reread_text(name, snap.file_size, snap.session.last_line_no), timeout=4)

    def action_toggle_inspector(self) -> None:
        """Show or hide the entry inspector (more room for the tabs)."""
        self.default_screen.toggle_class("-no-inspector")

    def action_toggle_map_view(self) -> None:
        """Switch the map between what the agent sends and DS4's plan."""
        pixel_map = self.query_one(PixelMap)
        self._view_chosen = True
        pixel_map.set_view("ds4" if pixel_map.view == "agent" else "agent")  # the map's title names it

    def action_focus_map(self) -> None:
        """Move focus to the pixel map (arrows move the cell cursor)."""
        self.query_one(PixelMap).focus()

    def action_show_tab(self, tab: str) -> None:
        """Switch the right-hand tabs and move the focus into the tab (its table, when any)."""
        self.query_one(TabbedContent).active = tab
        pane = self.query_one(f"#{tab}", TabPane)
        focusable = [w for w in pane.query("DataTable, TurnList, Input") if w.focusable]
        tables = [w for w in focusable if isinstance(w, (DataTable, TurnList))]
        target = (tables or focusable or [None])[0]
        if target is None:
            # A tab with nothing to focus (cache, diagnostics): focus the tab bar, so the focus
            # does not stay on a widget of the hidden tab (which would switch back to it).
            target = self.query_one(TabbedContent).query_one(Tabs)
        target.focus()

    def action_help(self) -> None:
        """Show or hide the key bindings panel."""
        toggle_help(self)

    def action_open_session(self) -> None:
        """The home screen (every session of every agent); Enter opens one, Esc comes back.
        Nothing while the app quits (`q` then `o`)."""
        from ds4tui.screens.home import HomeScreen

        if quitting(self):
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.open_choice(path)

        self.push_screen(HomeScreen(now=self._now), chosen)

    def open_choice(self, path: Path) -> None:
        """Open a session chosen on the home screen: a Pi session in this dashboard; another
        agent's (Claude Code, Codex) ends this app with the path as its result, and the CLI opens
        that agent's read-only view (`ds4tui.cli.open_any`)."""
        from ds4sessions.agents.registry import agent_for_path

        try:
            agent = agent_for_path(Path(path))
        except OSError:
            agent = None
        if agent is not None and agent.name != "pi":
            self.exit(result=Path(path))
            return
        self.switch_session(Path(path))

    def switch_session(self, path: Path) -> None:
        """Show another session file. The UI forgets the old one at once; the new pipeline is
        installed in a worker (it waits there, not on the UI thread, for a pass of the old
        session's workers to end) and its first snapshot follows as usual."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._generation += 1
        self._slice = (self._generation, FIRST_SLICE_BYTES)  # its first read in slices
        with self._painted:
            self._painted_version = -1  # the new session's versions start again
            self._posted_version = -1  # (else a derive pass of the new session waits at each checkpoint)
            self._painted.notify_all()
        self.session_path = Path(path)
        self.demo = False
        self.snapshot = None
        self.derived = None
        self.view = viewmodel.EMPTY
        self._latest = None
        self._selected = None
        self._view_chosen = False
        self.query_one(PixelMap).set_view("agent")
        self._inspected = ()
        self._highlighted = None
        self.query_one(SessionHeader).show(self.view.header, demo=self.demo, following=self.following)
        self._open_session(self.session_path, self._generation)

    @work(thread=True, exclusive=True, group="switch", exit_on_error=False)
    def _open_session(self, path: Path, generation: int) -> None:
        pipeline = SessionPipeline(path, self._models, config_file=self._config_file, retrieval=self._with_retrieval)
        with self._ingest_lock, self._derive_lock, self._publish_lock:
            if generation != self._generation:
                return  # switched again meanwhile
            self._pipeline = pipeline
            self._session = (pipeline, generation)
            self._built = (None, None, None)
        self.call_from_thread(self._start_watching, generation)

    def _start_watching(self, generation: int) -> None:
        if generation != self._generation:
            return
        if self._watch:
            self._watcher = SessionWatcher(self.session_path, self._file_changed)
            self._watcher.start()
        self.refresh_session()


def home_app(path: Path, *, lead_s: float | None = None, notify_idle: bool = False, **options: object):  # type: ignore[no-untyped-def]
    """The dashboard app for `path` that opens on the home screen (`ds4tui home`); `options` go
    to `Ds4App`. Esc from the home screen shows the dashboard of `path`. `lead_s`: the expiry notice's lead
    (seconds; default `ds4tui.screens.home.DEFAULT_LEAD_S`)."""
    from ds4tui.screens.home import DEFAULT_LEAD_S, HomeScreen

    lead_s = DEFAULT_LEAD_S if lead_s is None else lead_s

    class HomeFirst(Ds4App):
        CSS_PATH = str(Path(__file__).parent / str(Ds4App.CSS_PATH))  # relative to app.py

        def on_ready(self) -> None:
            def chosen(choice: Path | None) -> None:
                if choice is not None:
                    self.open_choice(choice)

            screen = HomeScreen(now=self._now, lead_s=lead_s, notify_idle=notify_idle)
            screen.notifier.enabled = lead_s > 0
            self.push_screen(screen, chosen)

    return HomeFirst(path, **options)  # type: ignore[arg-type]
