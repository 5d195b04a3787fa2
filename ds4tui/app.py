"""The Textual app: a live dashboard of one Pi session's context window.

Data flow (design.md): a `SessionWatcher` (watchdog on the file's directory, plus a slow poll)
only wakes the app; a thread worker runs `LiveSession.refresh()` (tailer → reader → context →
counts) and posts one immutable `Snapshot` in a `SessionUpdated` message (`can_replace`, so a
burst of appends coalesces); the UI thread sets it and each widget redraws from it. The exact
cl100k counts follow in a second message from the same worker.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker, WorkerState
from textual.widgets import DataTable, Footer, TabbedContent, TabPane, Tabs

from ds4core.models import ModelTable
from ds4sessions.ingest.live import Snapshot
from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4sessions.ingest.watch import SessionWatcher
from ds4tui.widgets.cache import CacheCountdown, CachePanel
from ds4tui.widgets.manifest import ManifestView
from ds4tui.widgets.panels import CategoryList, DiagnosticsView, EntryInspector, SessionHeader, TurnList
from ds4tui.widgets.pixel_map import PixelMap
from ds4tui.actions.steering import StatusLine, SteeringMixin
from ds4tui.widgets.retrieval import RetrievalView

MIN_MAP_HEIGHT = 20
"""Terminal rows below which the pixel map is hidden (the numbers stay)."""
NARROW_WIDTH = 100
"""Terminal columns below which the two panes stack."""


@dataclass
class SessionUpdated(Message):
    """A new snapshot of the session (posted from the ingest worker)."""

    snapshot: Snapshot

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot replaces an older one still in the queue."""
        return isinstance(message, SessionUpdated)


@dataclass
class DerivedUpdated(Message):
    """New derived views (plan, cache, retrieval) for a snapshot version."""

    derived: Derived

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DerivedUpdated)


class FileChanged(Message):
    """The watcher saw the session file change (a wake-up only)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FileChanged)


class Ds4App(SteeringMixin, App[None]):
    """ds4tui's dashboard for one session file.

    `path` is the session file (it may not exist yet); `demo` shows a "demo" badge;
    `watch=False` disables the file watcher (tests drive `refresh_session()` themselves).
    """

    CSS_PATH = "styles/app.tcss"
    TITLE = "ds4tui"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave ds4tui (the session file is never touched)"),
        Binding("question_mark", "help", "Help", key_display="?", id="help", tooltip="Show or hide the key bindings"),
        Binding("o", "open_session", "Open", id="open", tooltip="Pick another Pi session"),
        Binding("f", "toggle_follow", "Follow", id="follow", tooltip="Pause or resume live updates"),
        Binding("r", "refresh_session", "Refresh", id="refresh", tooltip="Re-read the session file now"),
        Binding("m", "focus_map", "Map", id="focus-map", tooltip="Focus the pixel map (arrows move between cells)"),
        Binding("i", "toggle_inspector", "Inspector", id="inspector", tooltip="Show or hide the entry inspector"),
        Binding("p", "pin", "Pin", id="pin", tooltip="Pin or unpin the selected entry (a ds4:pin label; confirmed first)"),
        Binding("P", "pins", "Pins", id="pins", tooltip="List the pinned entries"),
        Binding("c", "collapse", "Collapse", id="collapse", tooltip="Collapse finished turns into a summary (preview first)"),
        Binding("C", "compact", "Compact", id="compact", tooltip="Preview and trigger a cache-friendly compaction"),
        Binding("t", "show_tab('turns')", "Turns", id="tab-turns", tooltip="Show the turn list"),
        Binding("M", "show_tab('manifest')", "Manifest", id="tab-manifest", tooltip="Show the DS4 plan: every item and why"),
        Binding("K", "show_tab('cache')", "Cache", id="tab-cache", tooltip="Show the prompt-cache history and DS4's cache-aware decision"),
        Binding("R", "show_tab('retrieval')", "Retrieval", id="tab-retrieval", tooltip="Show DS4's historical retrieval for the current request"),
        Binding("d", "show_tab('diagnostics')", "Diagnostics", id="tab-diagnostics", tooltip="Show problems found in the file"),
    ]

    following: var[bool] = var(True)
    """Apply new snapshots as they arrive (False: paused; the tail still reads)."""

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
    ) -> None:
        """`path`: the session file (it need not exist yet); `demo` shows the demo badge;
        `models`: the model table (default: bundled); `watch=False` disables the file watcher;
        `config_file` replaces the user's DS4 configuration; `retrieval=False` skips DS4's
        retrieval (no index is written); `now` is the clock (epoch seconds) for the prompt-cache
        countdown (tests inject a fixed one)."""
        super().__init__()
        self._now = now
        self.session_path = Path(path)
        self.demo = demo
        self._models = models
        self._watch = watch
        self._config_file = config_file
        self._with_retrieval = retrieval
        self._pipeline = self._new_pipeline()
        self._lock = threading.Lock()
        self._watcher: SessionWatcher | None = None
        self.snapshot: Snapshot | None = None
        self.derived: Derived | None = None
        self._latest: Snapshot | None = None
        self._selected: int | None = None

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
            yield CacheCountdown(id="countdown", notify=True, now=self._now)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PixelMap(id="map")
                with VerticalScroll(id="categories-scroll"):
                    yield CategoryList(id="categories")
            with Vertical(id="right"):
                with TabbedContent(id="tabs"):
                    with TabPane("Turns", id="turns"):
                        yield TurnList(id="turn-list", cursor_type="row", zebra_stripes=True)
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
        self._apply_size_classes()
        self.query_one(SessionHeader).show(None, demo=self.demo, following=self.following)
        self.query_one(EntryInspector).update("Loading…")
        if self._watch:
            self._watcher = SessionWatcher(self.session_path, lambda: self.post_message(FileChanged()))
            self._watcher.start()
        self.refresh_session()
        self.set_interval(2.0, self._poll_bridge)

    def _poll_bridge(self) -> None:
        """Show the bridge state of the open session (cheap: one small heartbeat file and a pid
        check, so it runs on the UI thread, every 2 s and with each snapshot)."""
        from ds4sessions.bridge import channel as bridge

        snap = self.snapshot
        header = self.query_one_optional(SessionHeader) if self.screen_stack else None
        if snap is None or not snap.reader.session_id or header is None:
            return  # nothing open yet, or the app is closing (its widgets are gone)
        try:
            text = bridge.status(snap.reader.session_id).header
        except ValueError:
            text = "bridge: n/a"
        header.set_bridge(text)

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def on_resize(self) -> None:
        self._apply_size_classes()

    def _apply_size_classes(self) -> None:
        self.default_screen.set_class(self.size.width < NARROW_WIDTH, "-narrow")
        self.default_screen.set_class(self.size.height < MIN_MAP_HEIGHT, "-no-map")

    # --- ingest -----------------------------------------------------------------------------

    def on_file_changed(self, _: FileChanged) -> None:
        self.refresh_session()

    @work(thread=True, group="ingest", exit_on_error=False)
    def refresh_session(self, force: bool = False) -> None:
        """Poll the file and post new snapshots (fast counts first, then exact cl100k)."""
        with self._lock:
            try:
                for update in self._pipeline.updates(force=force, now=self._now()):
                    if isinstance(update, Derived):
                        self.post_message(DerivedUpdated(update))
                    else:
                        self.post_message(SessionUpdated(update))
            except OSError as exc:
                reason = exc.strerror or str(exc)
                self.call_from_thread(self._status, f"cannot read {self.session_path}: {reason}", error=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One place where a failed worker becomes a visible error (never a silent stop)."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self._status(f"{event.worker.group or 'worker'} failed: {type(error).__name__}: {error}", error=True)

    def on_session_updated(self, message: SessionUpdated) -> None:
        self._latest = message.snapshot
        if self.following or self.snapshot is None:
            self.show_snapshot(message.snapshot)

    def on_derived_updated(self, message: DerivedUpdated) -> None:
        derived = message.derived
        if self.snapshot is None or derived.version != self.snapshot.version:
            return  # views of a snapshot not on screen (paused, or already superseded)
        previous = self.derived
        self.derived = derived
        errors = dict(derived.errors)
        if derived.plan is not None:
            same = previous is not None and previous.plan is derived.plan
            if not same:
                self.query_one(ManifestView).show(derived.plan)
        self.query_one(CachePanel).show(derived.cache)
        self.query_one(CacheCountdown).show(derived.cache)
        if derived.retrieval is not None or "retrieval" in errors:
            self.query_one(RetrievalView).show(derived.retrieval)
        for stage, error in derived.errors:
            if previous is None or (stage, error) not in previous.errors:
                self.notify(f"{stage}: {error}", title="ds4tui", severity="error", timeout=8)
        self._apply_overlays()
        self.query_one(TurnList).show_plan(self.snapshot, derived.plan)

    def _apply_overlays(self) -> None:
        """Mark on the map what the plan excludes or pins and where the cached prefix ends."""
        snap, derived = self.snapshot, self.derived
        if snap is None or derived is None:
            return
        ids = snap.context.message_entry_ids
        excluded: set[int] = set()
        pinned: set[int] = set()
        if derived.plan is not None:
            out = derived.plan.excluded_entry_ids
            pins = set(derived.plan.pinned_entry_ids)
            excluded = {i for i, eid in enumerate(ids) if eid in out}
            pinned = {i for i, eid in enumerate(ids) if eid in pins}
        cached_end = None
        cold = False
        if derived.cache is not None:
            cached_end = derived.cache.cached_prefix_end
            state = self.query_one(CacheCountdown).state
            cold = state is not None and state.status == "cold"
        self.query_one(PixelMap).set_overlays(excluded=excluded, pinned=pinned, cached_end=cached_end, cold=cold)

    def show_snapshot(self, snap: Snapshot) -> None:
        """Redraw every panel from `snap`."""
        self.snapshot = snap
        self._poll_bridge()
        self.query_one(SessionHeader).show(snap, demo=self.demo, following=self.following)
        best = snap.best
        segments = best.segments
        if snap.provider is not None and best.estimate > snap.provider.context_tokens > 0:
            # The provider's count is the truth: scale the estimate's cells down to it.
            scale = snap.provider.context_tokens / best.estimate
            segments = [replace(seg, tokens=max(round(seg.tokens * scale), 1)) for seg in segments]
        window = snap.context_window or max(best.estimate + best.unattributed, 1)
        pixel_map = self.query_one(PixelMap)
        pixel_map.set_data(segments, window)
        self.query_one(CategoryList).show(snap)
        self.query_one(TurnList).show(snap)
        self.query_one(DiagnosticsView).show(snap)
        self._apply_overlays()
        if self._selected is None or self._selected >= len(snap.context.messages):
            self._selected = len(snap.context.messages) - 1 if snap.context.messages else None
        if self._selected is not None:
            self._select_message(self._selected, sync_turns=True)
        else:
            self.query_one(EntryInspector).show(snap, None)

    # --- selection --------------------------------------------------------------------------

    @on(PixelMap.CellSelected)
    def _cell_selected(self, event: PixelMap.CellSelected) -> None:
        if self.snapshot is None:
            return
        if event.message_index is None:
            self.query_one(EntryInspector).show_cell(self.snapshot, event.category, event.map.tokens_per_cell)
            return
        self._select_message(event.message_index, sync_turns=True)

    @on(DataTable.RowHighlighted, "#turn-list")
    def _turn_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.snapshot is None or event.row_key.value is None:
            return
        self._select_message(int(event.row_key.value), sync_turns=False)

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

    def _select_message(self, index: int, *, sync_turns: bool, sync_manifest: bool = True) -> None:
        snap = self.snapshot
        if snap is None:
            return
        self._selected = index
        self.query_one(EntryInspector).show(snap, index)
        self.query_one(PixelMap).highlight_message(index)
        entry_id = snap.context.message_entry_ids[index] if index < len(snap.context.message_entry_ids) else None
        if sync_manifest and entry_id and self.derived is not None and self.derived.plan is not None:
            self.query_one(ManifestView).select_entry(entry_id)
        if sync_turns:
            table = self.query_one(TurnList)
            for row, turn in enumerate(snap.turns):
                if turn.first_message <= index <= turn.last_message and table.cursor_row != row:
                    with table.prevent(DataTable.RowHighlighted):
                        table.move_cursor(row=row)
                    break

    # --- actions ----------------------------------------------------------------------------

    def action_toggle_follow(self) -> None:
        """Pause or resume applying updates (reading continues in the background)."""
        self.following = not self.following
        if self.following and self._latest is not None:
            self.show_snapshot(self._latest)
        elif self.snapshot is not None:
            self.query_one(SessionHeader).show(self.snapshot, demo=self.demo, following=self.following)
        self.notify("following the session" if self.following else "paused: updates are held")

    def action_refresh_session(self) -> None:
        """Re-read and rebuild now."""
        self.refresh_session(force=True)

    def action_toggle_inspector(self) -> None:
        """Show or hide the entry inspector (more room for the tabs)."""
        self.default_screen.toggle_class("-no-inspector")

    def action_focus_map(self) -> None:
        """Move focus to the pixel map (arrows move the cell cursor)."""
        self.query_one(PixelMap).focus()

    def action_show_tab(self, tab: str) -> None:
        """Switch the right-hand tabs and move the focus into the tab (its table, when any)."""
        self.query_one(TabbedContent).active = tab
        pane = self.query_one(f"#{tab}", TabPane)
        focusable = [w for w in pane.query("DataTable, Input") if w.focusable]
        tables = [w for w in focusable if isinstance(w, DataTable)]
        target = (tables or focusable or [None])[0]
        if target is None:
            # A tab with nothing to focus (cache, diagnostics): focus the tab bar, so the focus
            # does not stay on a widget of the hidden tab (which would switch back to it).
            target = self.query_one(TabbedContent).query_one(Tabs)
        target.focus()

    def action_help(self) -> None:
        """Show the key bindings panel."""
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_open_session(self) -> None:
        """Pick another session file."""
        from ds4tui.screens.picker import SessionPicker

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.switch_session(path)

        self.push_screen(SessionPicker(), chosen)

    def switch_session(self, path: Path) -> None:
        """Show another session file."""
        if self._watcher is not None:
            self._watcher.stop()
        with self._lock:
            self.session_path = Path(path)
            self.demo = False
            self._pipeline = self._new_pipeline()
        self.snapshot = None
        self.derived = None
        self._selected = None
        if self._watch:
            self._watcher = SessionWatcher(self.session_path, lambda: self.post_message(FileChanged()))
            self._watcher.start()
        self.refresh_session()
