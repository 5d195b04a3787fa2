"""The Textual app: a live dashboard of one Pi session's context window.

Data flow (design.md): a `SessionWatcher` (watchdog on the file's directory, plus a slow poll)
only wakes the app; a thread worker runs `LiveSession.refresh()` (tailer → reader → context →
counts) and posts one immutable `Snapshot` in a `SessionUpdated` message (`can_replace`, so a
burst of appends coalesces); the UI thread sets it and each widget redraws from it. The exact
cl100k counts follow in a second message from the same worker.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Footer, TabbedContent, TabPane

from ds4core.models import ModelTable
from ds4sessions.live import LiveSession, Snapshot
from ds4sessions.watch import SessionWatcher
from ds4tui.widgets.panels import CategoryList, DiagnosticsView, EntryInspector, SessionHeader, TurnList
from ds4tui.widgets.pixel_map import PixelMap

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


class FileChanged(Message):
    """The watcher saw the session file change (a wake-up only)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FileChanged)


class Ds4App(App[None]):
    """ds4tui's dashboard for one session file.

    `path` is the session file (it may not exist yet); `demo` shows a "demo" badge;
    `watch=False` disables the file watcher (tests drive `refresh_session()` themselves).
    """

    CSS_PATH = "app.tcss"
    TITLE = "ds4tui"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave ds4tui (the session file is never touched)"),
        Binding("question_mark", "help", "Help", key_display="?", id="help", tooltip="Show or hide the key bindings"),
        Binding("o", "open_session", "Open", id="open", tooltip="Pick another Pi session"),
        Binding("f", "toggle_follow", "Follow", id="follow", tooltip="Pause or resume live updates"),
        Binding("r", "refresh_session", "Refresh", id="refresh", tooltip="Re-read the session file now"),
        Binding("m", "focus_map", "Map", id="focus-map", tooltip="Focus the pixel map (arrows move between cells)"),
        Binding("t", "show_tab('turns')", "Turns", id="tab-turns", tooltip="Show the turn list"),
        Binding("d", "show_tab('diagnostics')", "Diagnostics", id="tab-diagnostics", tooltip="Show problems found in the file"),
    ]

    following: var[bool] = var(True)
    """Apply new snapshots as they arrive (False: paused; the tail still reads)."""

    def __init__(self, path: Path, *, demo: bool = False, models: ModelTable | None = None, watch: bool = True) -> None:
        super().__init__()
        self.session_path = Path(path)
        self.demo = demo
        self._models = models
        self._watch = watch
        self._live = LiveSession(self.session_path, models)
        self._lock = threading.Lock()
        self._watcher: SessionWatcher | None = None
        self.snapshot: Snapshot | None = None
        self._latest: Snapshot | None = None
        self._selected: int | None = None

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette offers every dashboard action (by its binding's description), plus
        Textual's own commands (theme, keys, screenshot, quit)."""
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.action != "quit":
                help_text = binding.tooltip or f"key: {binding.key_display or binding.key}"
                yield SystemCommand(binding.description, help_text, partial(self.run_action, binding.action))

    def compose(self) -> ComposeResult:
        yield SessionHeader(id="header")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PixelMap(id="map")
                with VerticalScroll(id="categories-scroll"):
                    yield CategoryList(id="categories")
            with Vertical(id="right"):
                with TabbedContent(id="tabs"):
                    with TabPane("Turns", id="turns"):
                        yield TurnList(id="turn-list", cursor_type="row", zebra_stripes=True)
                    with TabPane("Diagnostics", id="diagnostics"):
                        with VerticalScroll():
                            yield DiagnosticsView(id="diagnostics-view")
                with VerticalScroll(id="inspector-scroll"):
                    yield EntryInspector(id="inspector")
        yield Footer()

    def on_mount(self) -> None:
        self._apply_size_classes()
        self.query_one(SessionHeader).show(None, demo=self.demo, following=self.following)
        self.query_one(EntryInspector).update("Loading…")
        if self._watch:
            self._watcher = SessionWatcher(self.session_path, lambda: self.post_message(FileChanged()))
            self._watcher.start()
        self.refresh_session()

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def on_resize(self) -> None:
        self._apply_size_classes()

    def _apply_size_classes(self) -> None:
        self.screen.set_class(self.size.width < NARROW_WIDTH, "-narrow")
        self.screen.set_class(self.size.height < MIN_MAP_HEIGHT, "-no-map")

    # --- ingest -----------------------------------------------------------------------------

    def on_file_changed(self, _: FileChanged) -> None:
        self.refresh_session()

    @work(thread=True, group="ingest", exit_on_error=False)
    def refresh_session(self, force: bool = False) -> None:
        """Poll the file and post new snapshots (fast counts first, then exact cl100k)."""
        with self._lock:
            snap = self._live.refresh(force=force)
            if snap is None:
                return
            self.post_message(SessionUpdated(snap))
            self.post_message(SessionUpdated(self._live.refine(snap)))

    def on_session_updated(self, message: SessionUpdated) -> None:
        self._latest = message.snapshot
        if self.following or self.snapshot is None:
            self.show_snapshot(message.snapshot)

    def show_snapshot(self, snap: Snapshot) -> None:
        """Redraw every panel from `snap`."""
        self.snapshot = snap
        self.query_one(SessionHeader).show(snap, demo=self.demo, following=self.following)
        best = snap.best
        window = snap.context_window or max(best.estimate + best.unattributed, 1)
        pixel_map = self.query_one(PixelMap)
        pixel_map.set_data(best.segments, window)
        self.query_one(CategoryList).show(snap)
        self.query_one(TurnList).show(snap)
        self.query_one(DiagnosticsView).show(snap)
        if self._selected is None or self._selected >= len(snap.context.messages):
            self._selected = len(snap.context.messages) - 1 if snap.context.messages else None
        if self._selected is not None:
            self._select_message(self._selected, sync_turns=True)
        else:
            self.query_one(EntryInspector).show(snap, None)

    # --- selection --------------------------------------------------------------------------

    @on(PixelMap.CellSelected)
    def _cell_selected(self, event: PixelMap.CellSelected) -> None:
        if self.snapshot is None or event.message_index is None:
            return
        self._select_message(event.message_index, sync_turns=True)

    @on(DataTable.RowHighlighted, "#turn-list")
    def _turn_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.snapshot is None or event.row_key.value is None:
            return
        self._select_message(int(event.row_key.value), sync_turns=False)

    def _select_message(self, index: int, *, sync_turns: bool) -> None:
        snap = self.snapshot
        if snap is None:
            return
        self._selected = index
        self.query_one(EntryInspector).show(snap, index)
        self.query_one(PixelMap).highlight_message(index)
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

    def action_focus_map(self) -> None:
        """Move focus to the pixel map (arrows move the cell cursor)."""
        self.query_one(PixelMap).focus()

    def action_show_tab(self, tab: str) -> None:
        """Switch the right-hand tabs."""
        self.query_one(TabbedContent).active = tab

    def action_help(self) -> None:
        """Show the key bindings panel."""
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_open_session(self) -> None:
        """Pick another session file."""
        from ds4tui.picker import SessionPicker

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
            self._live = LiveSession(self.session_path, self._models)
        self.snapshot = None
        self._selected = None
        if self._watch:
            self._watcher = SessionWatcher(self.session_path, lambda: self.post_message(FileChanged()))
            self._watcher.start()
        self.refresh_session()
