"""The one dashboard, for every agent: a screen that renders the view model (issue 28).

Header, pixel map (in the agent's own categories), categories, and the tabs Turns, Manifest
(DS4's plan, or "what DS4 would send" for an agent that builds its own context), Cache,
Retrieval and Diagnostics, plus the entry inspector. What an agent cannot do says why in one
line (steering on a Claude Code transcript, retrieval without the entries outside the context):
the screen asks the snapshot's `capabilities`, never the agent's name.

The screen renders; its `SessionFeed` (`ds4tui.feed`) schedules: it reads and derives on worker
threads and posts `ViewUpdated` messages, each a view model the widgets draw without computing
anything (`ds4tui.viewmodel`); the screen tells the feed what it painted (`SessionFeed.painted`).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from functools import cached_property, partial
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane, Tabs

from ds4sessions.derive.pipeline import Derived
from ds4sessions.ingest.snapshot import Snapshot
from ds4tui import viewmodel
from ds4tui.feed import FeedStatus, FileChanged, FirstViewReady, SessionFeed, ViewUpdated
from ds4tui.screens.view_keys import SHARED_BINDINGS, quitting, toggle_help
from ds4tui.widgets.cache import CacheCountdown, CachePanel
from ds4tui.widgets.manifest import ManifestView
from ds4tui.widgets.panels import CategoryList, DiagnosticsView, EntryInspector, LegendScroll, SessionHeader, StatusLine, TurnList
from ds4tui.widgets.pixel_map import PixelMap
from ds4tui.widgets.retrieval import RetrievalView
from ds4tui.widgets.timeline import TimelinePanel

if TYPE_CHECKING:
    from ds4tui.actions.steering import SteeringController
    from ds4tui.firstview import FirstView

_FIRST_MESSAGE = attrgetter("first_message")

MIN_MAP_HEIGHT = 20
"""Terminal rows below which the pixel map is hidden (the numbers stay)."""
NARROW_WIDTH = 100
MIN_SIZE = (60, 24)
"""The smallest terminal the dashboard lays out (columns, rows): below it a notice says so."""
SHORT_HEIGHT = 30
"""Below this many rows a stacked (narrow) screen gives the map's rows to the Manifest, Cache,
Retrieval and Diagnostics tabs while one of them is shown (80×24: 11 manifest rows, not 1)."""
"""Terminal columns below which the two panes stack."""

BINDINGS = [
    *SHARED_BINDINGS,  # q ? Esc o, as on the home screen
    Binding("f", "toggle_follow", "Follow", id="follow", tooltip="Pause or resume live updates"),
    Binding("r", "refresh_session", "Refresh", id="refresh", tooltip="Re-read the session file now", show=False),
    Binding("m", "focus_map", "Map", id="focus-map", tooltip="Focus the pixel map (arrows move between cells)"),
    Binding("v", "toggle_map_view", "View", id="map-view", tooltip="Switch the map between what the agent sends and DS4's plan (▒ excluded, ◆ pinned)"),
    Binding("i", "toggle_inspector", "Inspector", id="inspector", tooltip="Show or hide the entry inspector"),
    Binding("p", "pin", "Pin", id="pin", tooltip="Pin or unpin the selected entry (a ds4:pin label; confirmed first)"),
    Binding("P", "pins", "Pins", id="pins", tooltip="List the pinned entries", show=False),
    Binding("c", "collapse", "Collapse", id="collapse", tooltip="Collapse finished turns into a summary (preview first)"),
    Binding("C", "compact", "Compact", id="compact", tooltip="Preview and trigger a cache-friendly compaction"),
    Binding("J", "journal", "Journal (undo)", id="journal", tooltip="ds4tui's writes to this session; undo one (as `ds4tui journal undo N`)", show=False),
    Binding("t", "show_tab('turns')", "Turns", id="tab-turns", tooltip="Show the turn list", show=False),
    Binding("M", "show_tab('manifest')", "Manifest", id="tab-manifest", tooltip="Show the DS4 plan: every item and why"),
    Binding("K", "show_tab('cache')", "Cache", id="tab-cache", tooltip="Show the prompt-cache history and DS4's cache-aware decision"),
    Binding("R", "show_tab('retrieval')", "Retrieval", id="tab-retrieval", tooltip="Show DS4's historical retrieval for the current request"),
    Binding("d", "show_tab('diagnostics')", "Diagnostics", id="tab-diagnostics", tooltip="Show problems found in the file", show=False),
    Binding("T", "show_tab('timeline')", "Timeline", id="tab-timeline", tooltip="Show the context over time; scrub it with ← → [ ] { } (End or f: live)"),
]
"""The dashboard's keys (the palette offers each by its description)."""


class DashboardScreen(Screen[None]):
    """The dashboard of one session file of any agent (see the module doc).

    `path`: the session file (it need not exist yet); `demo` shows the demo badge; `models`,
    `config_file` (replaces the user's DS4 configuration) and `retrieval` (False: no retrieval,
    no index written) go to the feed's pipeline; `now` is the clock (epoch seconds) of the
    prompt-cache countdown (tests inject one); `watch=False` starts no file watcher (tests drive
    `refresh_session()`); `first_view`: a copy of the process reading `path` for the first paint
    (`ds4tui.firstview.start`)."""

    BINDINGS = BINDINGS

    following: var[bool] = var(True)
    """Apply new snapshots as they arrive (False: paused; the tail still reads)."""

    def __init__(self, path: Path, *, demo: bool = False, models: Any = None, watch: bool = True,
                 config_file: Path | None = None, retrieval: bool = True, now: Callable[[], float] = time.time,
                 first_view: FirstView | None = None) -> None:
        super().__init__(id="dashboard")
        self._now = now
        self.demo = demo
        self._first_view = first_view
        self._feed_options: dict[str, Any] = dict(models=models, config_file=config_file, retrieval=retrieval, now=now,
                                                  watch=watch)
        self._path = Path(path)
        self.feed: SessionFeed | None = None
        self.snapshot: Snapshot | None = None
        self.derived: Derived | None = None
        self.view: viewmodel.ViewModel = viewmodel.EMPTY
        """The view model on screen."""
        self._latest: ViewUpdated | None = None
        self._selected: int | None = None
        # What the steering keys act on, when it is not the selected context message: a reason
        # the highlighted thing is no entry (a free or fixed map cell, the manifest's system
        # row), or an entry outside the context (a manifest or retrieval source)
        self._nothing: str | None = None
        self._outside: str | None = None
        self._view_chosen = False  # the user (or DS4 detection) chose the map's view
        self._inspected: tuple = ()
        self._highlighted: int | None = None
        self._stale_tabs: dict[str, Callable[[], None]] = {}
        self._retired: list[tuple[object, ...]] = []
        """Updates of the hidden tabs (manifest, cache, retrieval, diagnostics), run when shown."""
        self._scrub: int | None = None
        self._widgets: dict[type, Any] = {}
        """The screen's widgets by class, found once (`query_one`)."""
        """The Timeline tab's scrubbed row (the header, legend, map and inspector show that
        request); None: live."""

    @property
    def session_path(self) -> Path:
        """The session file on screen."""
        return self.feed.path if self.feed is not None else self._path

    @cached_property
    def steering(self) -> SteeringController:
        """The steering actions (pin, pins, collapse, compact); this screen implements their host.
        Made at the first action: the steering and bridge modules load then, not with the
        screen (~45 ms of every start)."""
        from ds4tui.actions.steering import SteeringController

        return SteeringController(self)

    def compose(self) -> ComposeResult:
        with Horizontal(id="topbar"):
            yield SessionHeader(id="header")
            yield CacheCountdown(id="countdown", notify=True, now=self._now, compact=True)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PixelMap(id="map")
                with LegendScroll(id="categories-scroll"):
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
                    with TabPane("Timeline", id="timeline"):
                        yield TimelinePanel(id="timeline-panel")
                with VerticalScroll(id="inspector-scroll"):
                    yield EntryInspector(id="inspector")
        yield Static("", id="too-small")
        yield StatusLine("", id="status")
        yield Footer()

    def query_one(self, selector: Any, expect_type: Any = None) -> Any:  # type: ignore[override]
        """Textual's `query_one`, with the widget of a class (the dashboard composes one of each)
        found once and kept while it stays mounted: an append's paint asks for ~8 widgets, and
        each CSS query walked the DOM (~0.1 ms each at 10,000 turns, on the UI thread)."""
        if isinstance(selector, type) and expect_type is None:
            widget = self._widgets.get(selector)
            if widget is not None and widget.parent is not None:
                return widget
            widget = super().query_one(selector)
            self._widgets[selector] = widget
            return widget
        return super().query_one(selector, expect_type)

    def _mounted_widgets(self) -> bool:
        """Whether the dashboard's widgets are still mounted (not while the app closes)."""
        legend = self._widgets.get(CategoryList)
        if legend is not None:
            return legend.parent is not None and legend.is_attached
        return bool(self.query(CategoryList))

    def on_mount(self) -> None:
        self.feed = SessionFeed(self.app, self, self._path, **self._feed_options)
        self._apply_size_classes()
        self.query_one(SessionHeader).show(None, demo=self.demo, following=self.following)
        self.query_one(EntryInspector).update("Loading…")
        self.feed.start(self._first_view)
        self._first_view = None
        self.set_interval(2.0, self._poll_bridge)

    def on_first_view_ready(self, message: FirstViewReady) -> None:
        """Paint the copy's view model if nothing newer is on screen, then read the file (after
        that frame: the read would otherwise share the GIL with its paint)."""
        view = message.view
        assert self.feed is not None
        if view is None or self.snapshot is not None or self.feed.generation != 0 or not self.query(CategoryList):
            self.feed.after_first_view(painted=False)
            return
        self._show_first_view(view)
        self.feed.after_first_view(painted=True)

    def on_file_changed(self, _: FileChanged) -> None:
        self.refresh_session()

    def on_feed_status(self, message: FeedStatus) -> None:
        self.status(message.text, error=message.error)

    def refresh_session(self, force: bool = False) -> None:
        """Read the file's new lines and show them (`SessionFeed.refresh`)."""
        if self.feed is not None:
            self.feed.refresh(force)

    def push_screen(self, screen: Any, callback: Any = None) -> Any:
        """`App.push_screen` (the steering controller's host protocol)."""
        return self.app.push_screen(screen, callback)

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`App.call_from_thread` (the steering controller's host protocol)."""
        return self.app.call_from_thread(callback, *args, **kwargs)

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
        header = self.query_one_optional(SessionHeader) if self.is_mounted else None
        if snap is None or not snap.reader.session_id or header is None:
            return  # nothing open yet, or the app is closing (its widgets are gone)
        if not snap.capabilities.bridge:
            header.set_bridge("")
            return
        try:
            text = bridge.status(snap.reader.session_id).header
        except ValueError:
            text = "bridge: n/a"
        header.set_bridge(text)
        countdown = self.query_one(CacheCountdown).state
        if countdown is not None and countdown.status != self.query_one(PixelMap).cache_status:
            self._apply_overlays()  # the cache went cold (or warm) since the last overlay

    def on_resize(self, event: events.Resize) -> None:
        # the event's size: the app's own `size` still says the previous one while this runs
        self._apply_size_classes(event.size)
        self.query_one(PixelMap).reset_scale()  # a new terminal size: choose the map scale afresh

    def _apply_size_classes(self, size: Size | None = None) -> None:
        size = size or self.app.size
        self.set_class(size.width < NARROW_WIDTH, "-narrow")
        self.set_class(size.height < MIN_MAP_HEIGHT, "-no-map")
        self.set_class(size.height < SHORT_HEIGHT, "-short")
        small = size.width < MIN_SIZE[0] or size.height < MIN_SIZE[1]
        self.set_class(small, "-too-small")
        if small:
            self.query_one("#too-small", Static).update(
                f"ds4tui needs at least {MIN_SIZE[0]}×{MIN_SIZE[1]} cells: this terminal is {size.width}×{size.height}.\n"
                "Widen the pane or make the font smaller; q quits.")
        self.query_one(PixelMap).fit_height = size.width >= NARROW_WIDTH  # map above its legend
        if not getattr(self, "_inspector_sized", False):
            self._inspector_sized = True  # a short stacked screen starts without the inspector (`i` shows it)
            self.set_class(size.width < NARROW_WIDTH and size.height < 30, "-no-inspector")

    # --- showing the feed's view models -----------------------------------------------------

    def on_view_updated(self, message: ViewUpdated) -> None:
        if self.feed is None or message.generation != self.feed.generation:
            return
        self._latest = message
        if not self.is_mounted or not self._mounted_widgets():
            return  # the app is closing: its widgets are gone
        if self.following or self.snapshot is None:
            self._show(message)
        else:
            self.feed.painted(message.snapshot.version)  # paused: nothing to paint, derive on

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
            self._label_diagnostics(view.header.problems)
        derived = message.derived
        if derived is not None and derived is not previous_derived and derived.version == snap.version:
            self._show_derived(derived, previous_derived)
        elif self.derived is None:  # nothing derived yet: say what the cache view waits for
            self.query_one(CacheCountdown).waiting("reading…" if snap.unread_bytes else "after the plan…")
        self._apply_overlays()  # after the cache panels: the boundary takes the countdown's status
        newest = len(snap.context.messages) - 1
        parked = self._nothing is not None or self._outside is not None  # the user highlighted no message
        follow = self.following and not parked and self._selected is not None and self._selected == shown - 1 < newest
        if self._selected is None or self._selected > newest or follow:
            # the newest message stays selected while following (the user did not move away)
            self._selected = newest if newest >= 0 else None
        if follow:
            # the inspector and the turn cursor move to the new message in the next frame: this
            # one paints the line in the map, legend, turns and header first (the inspector's
            # redraw of a new message doubled the frame: ~4 ms at 1,000 turns)
            self._after_frame(self._follow_selected)
        elif parked:
            pass  # the inspector keeps what the user highlighted
        elif self._selected is not None:
            self._select_message(self._selected, sync_turns=True, refresh=False)
        else:
            self.query_one(EntryInspector).show(snap, None)
        if self._scrub is not None:
            self._show_scrub()  # the session tails on; the screen stays on the scrubbed request
        self._after_frame(self.feed.painted, snap.version)

    def _label_diagnostics(self, problems: int) -> None:
        """The Diagnostics tab's label says when there are findings ("Diagnostics ⚠ 3")."""
        label = f"Diagnostics ⚠ {problems}" if problems else "Diagnostics"
        if label != getattr(self, "_diagnostics_label", "Diagnostics"):
            self._diagnostics_label = label
            self.query_one(TabbedContent).get_tab("diagnostics").label = label

    def _follow_selected(self) -> None:
        """Show the selected message (the newest, while following) in the inspector and the
        turn list's cursor (after the frame that painted the append)."""
        snap = self.snapshot
        if snap is not None and self._selected is not None and self._selected < len(snap.context.messages):
            self._select_message(self._selected, sync_turns=True, refresh=False)

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
        if derived.timeline is not None and (previous is None or previous.timeline is not derived.timeline):
            self._tab_update("timeline", partial(self.query_one(TimelinePanel).show, derived.timeline))
        caps = derived.capabilities
        if caps is not None and not caps.retrieval and (previous is None or previous.capabilities != caps):
            label = viewmodel.agent_label(self.snapshot) if self.snapshot is not None else "this agent"
            self._tab_update("retrieval", partial(self.query_one(RetrievalView).unavailable,
                             f"DS4's historical retrieval is not available for {label} sessions: the reader keeps "
                             "the context only, and DS4 retrieves what is outside it."))
        elif (derived.retrieval is not None or "retrieval" in errors) and (previous is None or previous.retrieval is not derived.retrieval):
            self._tab_update("retrieval", partial(self.query_one(RetrievalView).show, derived.retrieval))
        for stage, error in derived.errors:
            if previous is None or (stage, error) not in previous.errors:
                self.notify(f"{stage}: {error}", title="ds4tui", severity="error", timeout=8)

    def _after_frame(self, callback: Callable[..., Any], *args: Any) -> None:
        """`callback(*args)` once the frame of this update is on the terminal (`Ds4App.after_frame`;
        Textual's `call_after_refresh` in another app)."""
        after_frame = getattr(self.app, "after_frame", None)
        (after_frame or self.call_after_refresh)(callback, *args)

    def _retire(self, *values: object) -> None:
        """Keep `values` until the screen has painted (then drop them: freeing happens there)."""
        if not self._retired:
            self._after_frame(self._retired.clear)
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
        if self.feed is not None:
            self.feed.manifest_shown = event.pane.id == "manifest"
        # on a short stacked screen a table tab takes the map's rows (app.tcss: -short.-table-tab)
        self.set_class(event.pane.id in ("manifest", "cache", "retrieval", "diagnostics", "timeline"), "-table-tab")
        update = self._stale_tabs.pop(event.pane.id or "", None)
        if update is not None:
            update()

    def _apply_overlays(self) -> None:
        """Mark on the map what the plan excludes or pins and where the cached prefix ends; the
        boundary takes the countdown's cache status (it ticks while the session is idle). Not while
        the timeline is scrubbed: the map shows a past request, which the plan's and the cache's
        marks of the context now do not describe."""
        if self._scrub is not None:
            return
        overlays = self.view.map.overlays
        status = None
        if self.derived is not None and self.derived.cache is not None:
            state = self.query_one(CacheCountdown).state
            status = state.status if state is not None else None
        self.query_one(PixelMap).set_overlays(
            excluded=overlays.excluded, pinned=overlays.pinned, cached_end=overlays.cached_end, cache_status=status,
            planned=self.view.plan is not None or self.view.version == 0, sends=self.view.plan_sends,
        )

    # --- the timeline's scrub cursor ---------------------------------------------------------

    @on(TimelinePanel.Scrubbed)
    def _scrubbed(self, event: TimelinePanel.Scrubbed) -> None:
        """The Timeline tab's cursor moved: show that request (None: back to live)."""
        self._scrub = event.index
        if event.index is None:
            self._show_live()
        else:
            self._show_scrub()

    def _show_scrub(self) -> None:
        """Header, legend, map and inspector as of the scrubbed request
        (`ds4tui.timeline_model.scrubbed`: O(categories), from the timeline's rows)."""
        from ds4tui.timeline_model import row_lines, scrubbed

        timeline = self.query_one(TimelinePanel).timeline
        index = self._scrub
        if timeline is None or index is None or index >= len(timeline.rows):
            return
        header, legend, map_model = scrubbed(self.view, timeline, index)
        self.query_one(SessionHeader).show(header, demo=self.demo, following=self.following)
        self.query_one(CategoryList).show(legend)
        self.query_one(PixelMap).set_data(map_model)
        self.query_one(PixelMap).set_overlays(excluded=frozenset(), pinned=frozenset(), cached_end=None, cache_status=None)
        self.query_one(EntryInspector).update("\n".join(row_lines(timeline, index)))

    def _show_live(self) -> None:
        """Back to the context now: the view model on screen, drawn again."""
        view = self.view
        self.query_one(SessionHeader).show(view.header, demo=self.demo, following=self.following)
        self.query_one(CategoryList).show(view.legend)
        self.query_one(PixelMap).set_data(view.map)
        self._apply_overlays()
        self._inspected = ()
        if self._selected is not None:
            self._select_message(self._selected, sync_turns=False)
        elif self.snapshot is not None:
            self.query_one(EntryInspector).show(self.snapshot, None)

    # --- selection --------------------------------------------------------------------------

    @on(PixelMap.CellSelected)
    def _cell_selected(self, event: PixelMap.CellSelected) -> None:
        if self.snapshot is None:
            return
        if event.inspect and self.has_class("-no-inspector"):
            self.remove_class("-no-inspector")  # Enter ("Inspect") shows the hidden inspector
        if event.message_index is None:
            self.query_one(EntryInspector).show_cell(self.snapshot, event.category, event.map.tokens_per_cell)
            label = self.snapshot.best.table.label(event.category)
            self._nothing, self._outside = f"the map's cursor is on {label.lower()}, not an entry", None
            return
        self._select_message(event.message_index, sync_turns=True)

    @on(TurnList.InspectRequested)
    def _inspect_turn(self, _: TurnList.InspectRequested) -> None:
        self.remove_class("-no-inspector")  # Enter ("Inspect") shows the hidden inspector

    @on(TurnList.TurnHighlighted)
    def _turn_highlighted(self, event: TurnList.TurnHighlighted) -> None:
        if self.snapshot is None or not event.key:
            return
        self._select_message(int(event.key), sync_turns=False)

    @on(ManifestView.EntrySelected)
    @on(RetrievalView.EntrySelected)
    def _entry_selected(self, event: ManifestView.EntrySelected | RetrievalView.EntrySelected) -> None:
        snap = self.snapshot
        if snap is None:
            return
        tab = "manifest" if isinstance(event, ManifestView.EntrySelected) else "retrieval"
        tabs = self.query_one_optional(TabbedContent) if self.is_mounted else None
        if tabs is None or tabs.active != tab:  # the app is closing, or
            return  # a table filling in a hidden tab is not the user's choice
        if event.entry_id is None:  # the system prompt and tools: no entry of the session
            kind = getattr(getattr(event, "item", None), "kind", None) or "this"
            self._nothing, self._outside = f"the {tab} row '{kind}' is not an entry of the session", None
            self.query_one(PixelMap).highlight_message(None)
            return
        ids = snap.context.message_entry_ids
        if event.entry_id in ids:
            self._select_message(ids.index(event.entry_id), sync_turns=True, sync_manifest=False)
        else:  # not in the context (dropped by a compaction or on another branch)
            self._nothing, self._outside = None, event.entry_id
            self.query_one(PixelMap).highlight_message(None)
            self.query_one(EntryInspector).show_entry(snap, event.entry_id)

    def _select_message(self, index: int, *, sync_turns: bool, sync_manifest: bool = True, refresh: bool = True) -> None:
        """Select context message `index`: inspector, map highlight, manifest and turn cursors.
        `refresh=False` (a new snapshot) redraws only what the new snapshot changed."""
        snap = self.snapshot
        if snap is None:
            return
        changed = self._selected != index or self._nothing is not None or self._outside is not None
        self._selected = index
        self._nothing = self._outside = None
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
        """The entry the user highlighted last, where the steering keys act: the selected
        context message's, or an entry outside the context chosen on the Manifest or Retrieval
        tab; None when the highlight is on no entry (`selection_note` says what it is on)."""
        snap = self.snapshot
        if self._outside is not None:
            return self._outside
        if snap is None or self._nothing is not None or self._selected is None \
                or self._selected >= len(snap.context.message_entry_ids):
            return None
        return snap.context.message_entry_ids[self._selected]

    def selection_note(self) -> str:
        """Why nothing is selected, in a few words (`selected_entry_id` is None)."""
        if self._nothing is not None:
            return self._nothing
        return "select an entry on the map, in the turn list or on the Manifest tab"

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

    def action_journal(self) -> None:
        """List ds4tui's writes to this session and undo one, after confirmation."""
        self.steering.journal()

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
        assert self.feed is not None
        self.feed.refresh(force=True)
        self._reread_notice(self.feed.generation)

    @work(group="reread-notice", exclusive=True, exit_on_error=False)
    async def _reread_notice(self, generation: int) -> None:
        """Wait (on the UI loop, without blocking it) for the ingest pass to end, then notify
        from the newest snapshot what it knows (its size and lines; nothing is counted here)."""
        import asyncio

        from ds4tui.screens.view_keys import reread_text

        deadline = time.monotonic() + 120
        feed = self.feed
        assert feed is not None
        while feed.ingest_running() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        snap = feed.newest_snapshot()
        if snap is None or generation != feed.generation:
            return  # unreadable (the status line says why), or another session now
        name = snap.session.session_name or snap.path.name
        self.notify(reread_text(name, snap.file_size, snap.session.last_line_no), timeout=4)

    def action_toggle_inspector(self) -> None:
        """Show or hide the entry inspector (more room for the tabs)."""
        self.toggle_class("-no-inspector")

    def _reveal_map(self) -> None:
        """On a short stacked screen a table tab takes the map's rows (app.tcss: `-short.-table-tab`):
        a key that acts on the map brings the Turns tab back first, so it never acts unseen."""
        if self.has_class("-narrow") and self.has_class("-short") and self.has_class("-table-tab"):
            self.action_show_tab("turns")

    def action_toggle_map_view(self) -> None:
        """Switch the map between what the agent sends and DS4's plan."""
        self._reveal_map()
        pixel_map = self.query_one(PixelMap)
        self._view_chosen = True
        pixel_map.set_view("ds4" if pixel_map.view == "agent" else "agent")  # the map's title names it

    def action_focus_map(self) -> None:
        """Move focus to the pixel map (arrows move the cell cursor)."""
        self._reveal_map()
        self.query_one(PixelMap).focus()

    def action_show_tab(self, tab: str) -> None:
        """Switch the right-hand tabs and move the focus into the tab (its table, when any)."""
        self.query_one(TabbedContent).active = tab
        pane = self.query_one(f"#{tab}", TabPane)
        focusable = [w for w in pane.query("DataTable, TurnList, Input, TimelinePanel") if w.focusable]
        tables = [w for w in focusable if isinstance(w, (DataTable, TurnList, TimelinePanel))]
        target = (tables or focusable or [None])[0]
        if target is None:
            # A tab with nothing to focus (cache, diagnostics): focus the tab bar, so the focus
            # does not stay on a widget of the hidden tab (which would switch back to it).
            target = self.query_one(TabbedContent).query_one(Tabs)
        target.focus()

    def action_hide_help_panel(self) -> None:
        """Esc: hide the key bindings panel (the app's)."""
        self.app.action_hide_help_panel()

    def action_help(self) -> None:
        """Show or hide the key bindings panel."""
        toggle_help(self.app)

    def action_open_session(self) -> None:
        """The home screen (every session of every agent); Enter opens one, Esc comes back.
        Nothing while the app quits (`q` then `o`)."""
        from ds4tui.screens.home import HomeScreen

        if quitting(self.app):
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.open_choice(path)

        self.app.push_screen(HomeScreen(now=self._now), chosen)

    def open_choice(self, path: Path) -> None:
        """Open a session chosen on the home screen, of any agent, in this dashboard."""
        self.switch_session(Path(path))

    def switch_session(self, path: Path) -> None:
        """Show another session file, of any agent. The screen forgets the old one at once; the
        feed reads the new one (`SessionFeed.switch`) and its first snapshot follows as usual."""
        self.demo = False
        self.snapshot = None
        self.derived = None
        self.view = viewmodel.EMPTY
        self._latest = None
        self._selected = None
        self._nothing = self._outside = None
        self._view_chosen = False
        self.query_one(PixelMap).set_view("agent")
        self._inspected = ()
        self._highlighted = None
        self.query_one(StatusLine).report("")
        self.app.clear_notifications()  # (the other session's notices)
        for widget in self.query("ManifestView, CacheCountdown, TimelinePanel"):
            widget.reset()  # nothing of the other session stays: no plan diff across sessions
        self._scrub = None
        self.query_one(SessionHeader).show(self.view.header, demo=self.demo, following=self.following)
        assert self.feed is not None
        self.feed.switch(Path(path))
