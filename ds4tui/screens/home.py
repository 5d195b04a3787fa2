"""The home screen: every session of every agent, one live row each (issue 15).

Columns: agent, live/idle, the prompt-cache countdown (warm / expiring / cold in colour *and* in
words, ticking every second), a small context bar with %, the cost today, when the session was last
active, and the session: its name first (what tells sessions apart; two of the same name in the same
project also show the start of their session id), then its project folder. The columns shown depend
on the width (`layout_for`), so the session column keeps at least `SESSION_MIN` cells (28) from 58
columns up: below 147 columns the compact forms (the countdown as its glyph and time, "● 4:12",
with a legend in the status line; short agent names; the context as a percentage), then the cost,
the context, the state (the time column then says "live") and the agent give way. Live
sessions come first, soonest expiry first. Enter opens the dashboard for the row's session; Esc
goes back. The input above the table filters rows (agent, project, name, model, path); a typed
path to an existing file opens that file.

Data: a `ds4sessions.overview.Overview` driven by one thread worker (group "overview"): the first
`scan()` lists what the index already knows, then pending files are read in small batches, then
`poll()` runs every second (one `os.stat` per known file; only appended bytes are read) and a
re-scan every `RESCAN_S` seconds finds new files. The UI gets immutable `SessionSummary` values
through messages; the countdown cells are recomputed from them at each tick (pure arithmetic).

A notice (a Textual notification plus the terminal bell) is raised once per expiry, `lead_s`
seconds before a live session's prompt cache expires (`ExpiryNotifier`; idle sessions off by
default).
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Label

from ds4sessions.overview.notice import DEFAULT_LEAD_S, ExpiryNotifier
from ds4sessions.overview.scanner import Overview  # light: its heavy parts load on first use
from ds4sessions.overview.summary import SessionSummary, placeholder
from ds4tui.text import clip, fmt_tokens, literal

if TYPE_CHECKING:
    from ds4sessions.overview.watch import FolderWatcher

RESCAN_S = 15.0
"""Seconds between re-discoveries of session files (new sessions appear within this time)."""
NEW_FILE_RESCAN_S = 1.0
"""A watcher event for a file the overview does not know re-scans at once, unless the last scan
was less than this many seconds ago (then the next pass does)."""
READ_BATCH = 25
"""Pending files read per message while the list fills in."""
BAR_CELLS = 8
"""Width of the context bar in cells."""
ADD_CHUNK = 120
"""Rows added to the table per refresh (the top of the list first, so the first screen is
complete at once and a thousand rows do not hold up the first paint)."""

STATUS_STYLE = {"warm": "bold #87d787", "expiring": "bold #d7af5f", "cold": "#5fafff", "unknown": "#8a8f98"}
STATUS_GLYPH = {"warm": "●", "expiring": "◐", "cold": "○", "unknown": "·"}
COLUMNS = ("agent", "state", "cache", "context", "today", "when", "session")
"""Every column, in display order (a layout shows a subset, in this order); "session" is the
session's name and project folder and takes the width the others leave."""
SESSION_MAX = 64
"""The session column's widest (cells)."""
SESSION_MIN = 28
"""A compact or narrow layout is used only when it leaves the session column at least this many
cells (the full one: `FULL_SESSION_MIN`); below the leanest layout's width the column keeps 16."""
FULL_SESSION_MIN = 48
"""The full layout (words, a bar, the cost) is used only when it leaves the session column this
many cells; narrower, the compact one gives the session column what the words took."""
def short_agent(agent: str) -> str:
    """The agent's id shortened for a compact column: its first word ("claude-code" → "claude",
    "gemini-cli" → "gemini")."""
    return agent.split("-", 1)[0]
"""Agent names in the compact forms (others are short already)."""


@dataclass(frozen=True)
class Layout:
    """The columns a screen width shows: `columns` (in `COLUMNS` order, without "session"), their
    `widths` in cells, and `form`: "full" (words: `● warm · 4:12 left (typical)`, the whole agent
    name, an 8-cell bar, `03-12 09:22`), "compact" (`● 4:12 ~`, short agent names, the context as a
    percentage) or "narrow" (compact, and the time column says `live`, `09:22` today or `03-12`:
    it stands for the state column too)."""

    form: str
    columns: tuple[str, ...]
    widths: dict[str, int]
    session_min: int = 28
    """Used only when this leaves the session column this many cells (`layout_for`)."""

    def fixed(self) -> int:
        """Cells the layout needs besides the session column: the columns, 2 cells of padding per
        column (the session's included), 2 of margin and 2 of scrollbar."""
        return sum(self.widths[c] for c in self.columns) + 2 * (len(self.columns) + 1) + 4


_FULL = {"agent": 11, "state": 5, "cache": 32, "context": BAR_CELLS + 5, "today": 9, "when": 11}
_COMPACT = {"agent": 6, "state": 5, "cache": 9, "context": 4, "today": 8, "when": 11}
_NARROW = {**_COMPACT, "when": 5}
LAYOUTS: tuple[Layout, ...] = (
    Layout("full", ("agent", "state", "cache", "context", "today", "when"), _FULL, FULL_SESSION_MIN),
    Layout("compact", ("agent", "state", "cache", "context", "today", "when"), _COMPACT),
    Layout("compact", ("agent", "state", "cache", "context", "when"), _COMPACT),
    Layout("compact", ("agent", "state", "cache", "when"), _COMPACT),
    Layout("narrow", ("agent", "cache", "when"), _NARROW),
    Layout("narrow", ("cache", "when"), _NARROW),
)
"""From the richest to the leanest; `layout_for(width)` takes the first that leaves the session
column its `session_min` cells: full from 147 columns, compact from 79 (80 columns: agent, state,
countdown, context %, time and 29 cells of session; the cost from 89), narrow below (60 columns:
agent, countdown, time or "live", and 28 cells of session)."""


def layout_for(width: int) -> tuple[Layout, int]:
    """(layout, session column width in cells) for a screen `width` cells wide: the first of
    `LAYOUTS` whose session column gets at least its `session_min` cells (at most `SESSION_MAX`),
    else the leanest with what is left (at least 16), so no horizontal scrollbar appears."""
    for layout in LAYOUTS:
        room = width - layout.fixed()
        if room >= layout.session_min:
            return layout, min(SESSION_MAX, room)
    return LAYOUTS[-1], max(16, width - LAYOUTS[-1].fixed())


HEADERS = {("when", "full"): "last active", ("when", "compact"): "last active", ("context", "compact"): "ctx",
           ("context", "narrow"): "ctx"}
"""Column headers other than the column's key, by (column, form)."""

FULL = LAYOUTS[0]
"""The layout of wide screens. (Every width is fixed: the countdown changes every second and the
table must not jump.)"""


# --- the pure part: rows from summaries --------------------------------------------------------


def sort_key(summary: SessionSummary, now: float) -> tuple:
    """Live first; then sessions with a running countdown, soonest expiry first; then the most
    recently modified. (Only "running" depends on `now`: among running countdowns the order is
    that of their expiry times.)"""
    clock = summary.cache
    expires = clock.last_refresh_s + clock.lifetime_s if clock.lifetime_s is not None and clock.last_refresh_s is not None else None
    running = expires is not None and expires > now
    return (not summary.live, not running, expires if running else 0.0, -summary.modified)


def context_cell(summary: SessionSummary, compact: bool = False) -> Text:
    """`━━━━━─────  42%`, or the token count alone when the window is unknown, or `—`
    (`compact`: the percentage alone, ` 42%`, coloured as the bar)."""
    pct = summary.context_percent
    if pct is None:
        return Text(fmt_tokens(summary.context_tokens), style="dim")
    style = "#d75f5f" if pct >= 90 else "#d7af5f" if pct >= 70 else "#87afd7"
    if compact:
        return Text(f"{pct:3.0f}%", style=style)
    cells = BAR_CELLS
    filled = min(cells, round(pct / 100 * cells))
    text = Text("━" * filled, style=style)
    text.append("─" * (cells - filled), style="dim")
    text.append(f" {pct:3.0f}%")
    return text


def cache_cell(summary: SessionSummary, now: float, expiring_s: float, compact: bool = False) -> Text:
    """`● warm · 4:12 left` / `◐ expiring · 0:42 left` / `○ cold` / `· no countdown`, coloured by
    status; "(typical)" when the lifetime is configured, not recorded. `compact`: the glyph and
    the time only, `● 4:12`, `◐ 0:42`, `○ cold`, `· —` (the status line has the legend), and "~"
    for typical."""
    if summary.cache.rule == "pending":
        return Text("…" if compact else "… reading", style="dim")
    cache = summary.cache_at(now, expiring_s)
    if compact:
        words = cache.countdown or ("—" if cache.status == "unknown" else cache.status)
    else:
        words = cache.words
    text = Text(f"{STATUS_GLYPH[cache.status]} {words}", style=STATUS_STYLE[cache.status])
    if summary.cache.rule == "configured" and cache.status != "unknown":
        text.append(" ~" if compact else " (typical)", style="dim")
    return text


def cost_cell(summary: SessionSummary, today: str) -> Text:
    """Cost of `today` in USD (`$0.0421`), `—` when nothing today, `no price` when today's
    requests have no price."""
    rows = [r for r in summary.usage if r.day == today]
    if not rows:
        return Text("—", style="dim")
    cost = summary.cost_on(today)
    if cost is None:
        return Text("no price", style="dim")
    text = Text(f"${cost:.4f}")
    if any(r.unpriced for r in rows):
        text.append("+?", style="dim")
    return text


class KeyedText(Text):
    """A `Text` cell that knows its row's session file (`path`), so the table can be sorted by
    the overview's order without re-adding rows."""

    path: str = ""


def project_of(summary: SessionSummary) -> str:
    """The last folder of the session's project (working directory), "" when unknown."""
    return (summary.project or "").rstrip("/").rsplit("/", 1)[-1]


def name_of(summary: SessionSummary) -> str:
    """The session's name, else its file name without `.jsonl`."""
    return summary.name or Path(summary.path).stem


def twin_key(summary: SessionSummary) -> tuple[str, str, str]:
    """What the session column shows before the id: sessions with the same key look the same
    there (`HomeScreen` adds the start of their session ids)."""
    return summary.agent, project_of(summary), name_of(summary)


def _time_ordered(hex_id: str) -> bool:
    """True for a UUID version 7 (dashes removed): its first 12 digits are the creation time, so
    two sessions started close together differ only at the end (Codex's thread ids)."""
    return len(hex_id) == 32 and hex_id[12] == "7" and all(c in "0123456789abcdefABCDEF" for c in hex_id)


def session_cell(summary: SessionSummary, width: int = SESSION_MAX, twin: bool = False) -> KeyedText:
    """`Fix 404 for unknown widget ids · widget-service`: the session's name (or its file name),
    then its project's last folder, in `width` cells. `twin` (another session looks the same)
    adds the start of the session id after the name: `Fix 404 for unknown widget ids #3f2a9c1e ·
    widget-service`. What gives way when the column is short: the project first (cut with "…",
    then left out), then the name (cut with "…"); never the id."""
    text = KeyedText()
    text.path = summary.path
    room = width - 1  # (one cell short of the column: the DataTable cuts a cell that fills it)
    ident = ""
    if twin:
        raw = (summary.session_id or Path(summary.path).stem).replace("-", "")
        ident = " #" + literal(raw[-8:] if _time_ordered(raw) else raw[:8], keep_newlines=False)
    name = clip(literal(name_of(summary), keep_newlines=False), max(8, room - len(ident)))
    text.append(name)
    if ident:
        text.append(ident, style="bold")
    project = literal(project_of(summary), keep_newlines=False)
    left = room - text.cell_len - 3
    if project and left >= min(6, len(project)):
        text.append(" · ", style="dim")
        text.append(clip(project, left), style="dim")
    return text


def when_cell(summary: SessionSummary, now: float, narrow: bool = False) -> Text:
    """When the session was last active (its latest timestamp, else the file's mtime), local
    time: `03-12 09:22`, or `2025-11-30` in another year. `narrow`: `live` for a live session
    (the narrow layout has no state column), else `09:22` on `now`'s day, `03-12` in its year,
    `2025` before."""
    at = summary.last_activity_s or summary.modified
    moment, today = dt.datetime.fromtimestamp(at), dt.datetime.fromtimestamp(now)
    if narrow:
        if summary.live:
            return Text("live", style="bold #87d787")
        if moment.date() == today.date():
            return Text(moment.strftime("%H:%M"))
        return Text(moment.strftime("%m-%d") if moment.year == today.year else str(moment.year), style="dim")
    if moment.year != today.year:
        return Text(moment.strftime("%Y-%m-%d"), style="dim")
    return Text(moment.strftime("%m-%d %H:%M"), style="" if moment.date() == today.date() else "dim")


def row_cells(summary: SessionSummary, now: float, today: str, expiring_s: float,
              layout: Layout = FULL, session_width: int = SESSION_MAX, twin: bool = False) -> tuple[Text, ...]:
    """The cells of one row, in the order of `layout.columns` then "session" (`session_width`:
    that column's width in cells; `twin`: another session has the same name, see
    `session_cell`)."""
    compact = layout.form != "full"
    cells = {
        "agent": lambda: Text(short_agent(summary.agent) if compact else summary.agent),
        "state": lambda: Text("live", style="bold #87d787") if summary.live else Text("idle", style="dim"),
        "cache": lambda: cache_cell(summary, now, expiring_s, compact),
        "context": lambda: context_cell(summary, compact),
        "today": lambda: cost_cell(summary, today),
        "when": lambda: when_cell(summary, now, narrow=layout.form == "narrow"),
    }
    return (*(cells[c]() for c in layout.columns), session_cell(summary, session_width, twin))


def matches(summary: SessionSummary, needle: str) -> bool:
    """True when every word of `needle` (case-insensitive) occurs in the row's agent, project,
    name, model or path."""
    hay = " ".join(
        str(x) for x in (summary.agent, summary.project, summary.name, summary.model_key, summary.path) if x
    ).lower()
    return all(word in hay for word in needle.lower().split())


# --- messages -----------------------------------------------------------------------------------


class FilesChanged(Message):
    """The watcher saw session files change (a wake-up; the paths wait in the screen's set)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FilesChanged)


@dataclass
class SummariesArrived(Message):
    """New or changed summaries from the overview worker (`complete`: the initial fill is done;
    `pending`: files still to read; `problems`: lines to show)."""

    summaries: tuple[SessionSummary, ...]
    pending: int
    complete: bool
    problems: tuple[str, ...] = ()
    listed: tuple[str, ...] | None = None


# --- the screen -------------------------------------------------------------------------------


def looks_like_path(text: str) -> bool:
    """True when the filter text is meant as a file path rather than words to match: it has a
    `/`, starts with `~` or `.`, or ends with `.jsonl`."""
    return "/" in text or text.startswith(("~", ".")) or text.endswith(".jsonl")


def typed_file(text: str) -> tuple[Path | None, str | None]:
    """What Enter on `text` in the filter box can open: `(path, None)` for a session file (one an
    agent recognizes, or an empty file: a session not written yet) or a session handle its
    plug-in can read (`DB#ID`, `agents.registry.agent_for_handle`), else `(None, reason)` with a
    one-line reason (`no such file: PATH`, `is a directory: PATH`, a FIFO or device, `not a
    session file: PATH` when no agent recognizes its start, unreadable). Reads at most the
    file's first `HEAD_BYTES` (agent recognition); never raises."""
    shown = literal(text, keep_newlines=False)
    if not text:
        return None, None
    path = Path(text).expanduser()
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        from ds4sessions.agents.registry import agent_for_handle, session_stat

        if agent_for_handle(path) is None:
            return None, f"no such file: {shown}"
        try:  # a session that is not a file (e.g. `DB#ID`): its plug-in says whether it can read it
            session_stat(path)
        except OSError as err:
            return None, f"cannot open {shown}: {getattr(err, 'strerror', None) or err}"
        return path, None
    except (OSError, ValueError) as err:  # ENOTDIR, EACCES, ENAMETOOLONG, an embedded NUL
        return None, f"cannot open {shown}: {getattr(err, 'strerror', None) or err}"
    if stat.S_ISDIR(mode):
        return None, f"is a directory: {shown}"
    from ds4sessions.safety import file_kind

    kind = file_kind(mode)
    if kind is not None:
        return None, f"{kind}, not a session file: {shown}"
    try:
        if path.stat().st_size == 0:
            return path, None  # a session not written yet: its agent's view waits for it
        from ds4sessions.agents.registry import agent_for_path

        agent = agent_for_path(path)
    except OSError as err:
        return None, f"cannot read {shown}: {err.strerror or err}"
    if agent is None:
        return None, f"not a session file: {shown}"
    return path, None


class HomeScreen(ModalScreen[Path | None]):
    """Every session of every agent (module doc). Dismisses with the chosen file, or None (Esc).

    `overview` is the engine (default: a new `Overview()` over the installed agents and the index in
    the state dir); `now` the clock in epoch seconds (tests inject one); `lead_s` the notice lead
    time in seconds; `notify_idle` also watches idle sessions; `poll_s` the file poll interval
    (seconds; None: no polling, tests call `poll_now()`); `auto_scan=False` leaves the first scan
    to the caller (`scan_now()`); `watch=False` runs no file-system watcher (events only wake
    the poll; the poll of live files and the re-scan work without it).
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="home-back", tooltip="Back to the dashboard"),
        Binding("slash", "focus_filter", "Filter", key_display="/", id="home-filter", tooltip="Filter sessions or type a path"),
        Binding("down", "focus_table", "Rows", key_display="↓", tooltip="Move from the filter box to the rows"),
        Binding("ctrl+q", "app.quit", "Quit", key_display="^q", tooltip="Leave ds4tui"),
    ]

    DEFAULT_CSS = """
    HomeScreen { layout: vertical; background: $background; }
    HomeScreen #home-title { height: 1; padding: 0 1; text-style: bold; }
    HomeScreen #home-filter { height: 3; margin: 0 1; }
    HomeScreen #home-table { height: 1fr; margin: 0 1; }
    HomeScreen #home-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(
        self,
        overview: Overview | None = None,
        *,
        now: Callable[[], float] = time.time,
        lead_s: float = DEFAULT_LEAD_S,
        notify_idle: bool = False,
        poll_s: float | None = 1.0,
        auto_scan: bool = True,
        watch: bool = True,
    ) -> None:
        super().__init__()
        self._overview = overview
        self._now = now
        self._poll_s = poll_s
        self._auto_scan = auto_scan
        self.notifier = ExpiryNotifier(lead_s=lead_s, idle=notify_idle)
        self.summaries: dict[str, SessionSummary] = {}
        self._order: list[str] = []
        self._filter = ""
        self._pending = 0
        self._complete = False
        self._problems: tuple[str, ...] = ()
        self._last_scan = 0.0
        self._lock = threading.Lock()  # one Overview, driven by one thread at a time
        self._dirty: set[str] = set()
        self._new_folders: set[str] = set()
        self._file_folders: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._retry = False
        self._cached_shown = False
        self._painted = threading.Event()
        self._cache_text: dict[str, str] = {}
        self._use_watcher = watch
        self._layout = FULL
        self._session_width = SESSION_MAX
        self._twins: set[str] = set()  # paths whose session cell would look like another's
        self._today = ""  # the day the cells were made for (the cost and time cells change at midnight)
        self._watcher: FolderWatcher | None = None

    @property
    def overview(self) -> Overview:
        """The engine (made on first use, on the worker thread)."""
        if self._overview is None:
            self._overview = Overview(now=self._now)
        return self._overview

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Sessions · every agent", id="home-title")
            yield Input(placeholder="filter (agent, project, name, model) or a session file path; Enter opens",
                        id="home-filter", select_on_focus=False)  # a letter typed in the table stays
            yield DataTable(id="home-table", cursor_type="row", zebra_stripes=True)
            yield Label("reading…", id="home-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one_optional(DataTable)
        if table is None:  # pushed while the app quits (`q` then `o`): nothing was composed
            return
        self._layout, self._session_width = layout_for(self.app.size.width)
        self._add_columns(table)
        self.query_one(Input).focus()  # `o` then typing: the words or the path go into the box
        self.set_interval(1.0, self.tick)
        if self._auto_scan:
            self.scan_now()
        if self._poll_s:
            self.set_interval(self._poll_s, self.poll_now)

    @property
    def column_layout(self) -> Layout:
        """The columns' layout in use (`layout_for` the screen's width)."""
        return self._layout

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns shown, in order (the layout's, then "session")."""
        return (*self._layout.columns, "session")

    def _add_columns(self, table: DataTable) -> None:
        for column in self.columns:
            width = self._session_width if column == "session" else self._layout.widths[column]
            label = HEADERS.get((column, self._layout.form), column)
            table.add_column(label, key=column, width=width)

    layout_for = staticmethod(layout_for)

    def on_resize(self, event: events.Resize) -> None:
        """Take the layout of the new width (`layout_for`) and fit the session column (the rows
        are re-added, a chunk per refresh)."""
        layout, session = layout_for(event.size.width)
        if (layout, session) == (self._layout, self._session_width):
            return
        self._layout, self._session_width = layout, session
        table = self.query_one(DataTable)
        table.clear(columns=True)
        self._add_columns(table)
        self._order = []
        self._cache_text.clear()
        self.rebuild()

    # --- worker ---------------------------------------------------------------------------

    @work(thread=True, exclusive=False, group="overview", exit_on_error=False)
    def scan_now(self) -> None:
        """First paint from the index (no discovery, no read), then a full scan: pending files
        appear at once as "reading…" rows and are read in batches, each batch posted."""
        with self._lock:
            if not self._cached_shown:
                self._cached_shown = True
                cached = self.overview.cached()
                if cached:
                    self._painted.clear()
                    self.post_message(SummariesArrived(tuple(cached), 0, False, tuple(self.overview.problems)))
                    self._painted.wait(timeout=5.0)  # discovery would slow the first paint down
            self._scan_locked()

    def _scan_locked(self) -> None:
        overview = self.overview
        result = overview.scan()
        self._last_scan = self._now()
        listed = tuple(str(s.path) for s in result.summaries) + tuple(str(i.path) for i in result.pending)
        waiting = tuple(placeholder(i) for i in result.pending)
        self.post_message(SummariesArrived(result.summaries + waiting, len(result.pending), not result.pending,
                                           result.problems, listed))
        self._watch_folders(listed)  # the files still to read too: their folders are watched at once
        self._catch_up_new_folders(set(listed))
        pending = list(result.pending)
        while pending:
            batch, pending = pending[:READ_BATCH], pending[READ_BATCH:]
            read = overview.read_many(batch)
            self.post_message(SummariesArrived(tuple(read), len(pending), not pending, tuple(overview.problems)))

    def _watch_folders(self, paths: Iterable[str]) -> None:
        """Watch the folders holding `paths` (every listed file, read or not) for session files,
        plus the folders created since (a new project's, a new day's), and the parents of all
        of them for new folders only (Claude Code's `projects/`, Codex's `sessions/YYYY/MM/`,
        Pi's `sessions/`), so a session in a brand-new folder appears at once, not at the next
        re-scan."""
        if not self._use_watcher:
            return
        if self._watcher is None:
            from ds4sessions.overview.watch import FolderWatcher  # watchdog: after the first paint

            self._watcher = FolderWatcher(self._file_event, self._folder_event)
        with self._dirty_lock:
            self._new_folders = {f for f in self._new_folders if Path(f).is_dir()}
            files = {str(Path(p).parent) for p in paths} | self._new_folders
            self._file_folders = files
        self._watcher.watch(files | {str(Path(f).parent) for f in files})

    def _catch_up_new_folders(self, listed: set[str]) -> None:
        """A file written in a new folder after the discovery but before the folder was watched
        sends no event: name such files now (the next pass lists them)."""
        with self._dirty_lock:
            folders = list(self._new_folders)
        missed = []
        for folder in folders:
            try:
                missed += [str(p) for p in Path(folder).glob("*.jsonl") if str(p) not in listed]
            except OSError:
                continue
        if missed:
            with self._dirty_lock:
                self._dirty.update(missed)
            self.post_message(FilesChanged())

    def _file_event(self, path: str) -> None:
        """watchdog thread: remember the file and wake the poll worker (coalesced). Files in a
        folder watched only for new folders (e.g. Codex's `history.jsonl` beside
        `archived_sessions/`) are ignored."""
        with self._dirty_lock:
            if str(Path(path).parent) not in self._file_folders:
                return
            self._dirty.add(path)
        self.post_message(FilesChanged())

    def _folder_event(self, path: str) -> None:
        """watchdog thread: a new folder next to session folders: watch it and re-scan soon."""
        with self._dirty_lock:
            self._new_folders.add(path)
            self._file_folders = self._file_folders | {path}
            self._dirty.add(path)  # unknown to the overview: the poll re-scans
        self.post_message(FilesChanged())

    def on_files_changed(self, _: FilesChanged) -> None:
        self.poll_now()

    @work(thread=True, exclusive=False, group="overview-poll", exit_on_error=False)
    def poll_now(self) -> None:
        """Update what changed: files named by watcher events, plus a stat of every live file
        (appended bytes only); a full re-scan every `RESCAN_S` seconds."""
        self._poll()

    def _poll(self) -> None:
        if not self._complete or not self._lock.acquire(blocking=False):
            with self._dirty_lock:
                if self._dirty:
                    self._retry = True
            return  # still filling in, or another pass is running (it re-runs for new events)
        try:
            self._poll_locked()
        finally:
            self._lock.release()

    def _poll_locked(self) -> None:
        overview = self.overview
        if self._now() - self._last_scan >= RESCAN_S:
            self._scan_locked()
            return
        while True:
            with self._dirty_lock:
                dirty, self._dirty = self._dirty, set()
                self._retry = False
            known = [p for p in dirty if overview.knows(p)]
            changed = overview.poll([*known, *overview.live_paths()])
            if changed:
                self.post_message(SummariesArrived(tuple(changed), 0, True, tuple(overview.problems)))
            if any(not overview.knows(p) for p in dirty):
                if self._now() - self._last_scan >= NEW_FILE_RESCAN_S:
                    self._scan_locked()  # a new file: list it now (the agents' discovery)
                    return
                self._last_scan = 0.0  # scanned a moment ago: the next pass re-scans
            with self._dirty_lock:
                if not self._dirty:
                    return

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    # --- UI ---------------------------------------------------------------------------------

    def on_summaries_arrived(self, message: SummariesArrived) -> None:
        if message.listed is not None:
            keep = set(message.listed)
            for key in [k for k in self.summaries if k not in keep]:
                del self.summaries[key]
        for summary in message.summaries:
            self.summaries[summary.path] = summary
        self._pending = message.pending
        follow = self._complete  # during the first fill the highlight stays on the top row
        self._complete = self._complete or message.complete
        self._problems = message.problems
        self.rebuild(changed=[s.path for s in message.summaries], follow=follow)

    def visible(self, now: float) -> list[SessionSummary]:
        """The rows shown at `now`: filtered, live first, soonest expiry first."""
        rows = [s for s in self.summaries.values() if not self._filter or matches(s, self._filter)]
        rows.sort(key=lambda s: sort_key(s, now))
        return rows

    def rebuild(self, changed: Sequence[str] = (), tick: bool = False, follow: bool = True) -> None:
        """Bring the table to the current summaries: rows of `changed` get new cells, rows that
        left or joined the filtered set are removed or added, the order is fixed with one
        `DataTable.sort` (no re-adding), and at a `tick` the countdown cells whose text changed
        are redrawn."""
        now = self._now()
        today = dt.datetime.fromtimestamp(now).strftime("%Y-%m-%d")
        expiring = self.overview_settings_expiring()
        table = self.query_one(DataTable)
        rows = self.visible(now)
        keys: dict[tuple[str, str, str], int] = {}
        for summary in self.summaries.values():
            keys[twin_key(summary)] = keys.get(twin_key(summary), 0) + 1
        twins = {p for p, s in self.summaries.items() if keys[twin_key(s)] > 1}
        changed = [*changed, *(twins ^ self._twins)]  # a session that gained or lost its look-alike
        self._twins = twins
        if today != self._today:  # a new day: every cost and time cell changes
            changed = [*changed, *self.summaries] if self._today else list(changed)
            self._today = today
        columns = self.columns
        cache_at = columns.index("cache")
        order = [s.path for s in rows]
        wanted = set(order)
        shown = set(self._order)
        self._order = [p for p in self._order if p in wanted]
        selected = self._selected_path()
        for path in shown - wanted:
            table.remove_row(path)
            self._cache_text.pop(path, None)
        changed_set = set(changed)
        # rows added per pass: the first screenful paints at once, then bigger chunks
        budget = ADD_CHUNK if len(shown) < ADD_CHUNK else 4 * ADD_CHUNK
        for summary in rows:
            path = summary.path
            if path not in shown:
                if budget == 0:
                    continue
                budget -= 1
                cells = row_cells(summary, now, today, expiring, self._layout, self._session_width, path in twins)
                table.add_row(*cells, key=path)
                shown.add(path)
                self._cache_text[path] = cells[cache_at].plain
            elif path in changed_set:
                for column, cell in zip(columns, row_cells(summary, now, today, expiring, self._layout,
                                                           self._session_width, path in twins)):
                    table.update_cell(path, column, cell)
                self._cache_text[path] = table.get_cell(path, "cache").plain
            elif tick:
                cell = cache_cell(summary, now, expiring, self._layout.form != "full")
                if cell.plain != self._cache_text.get(path):
                    table.update_cell(path, "cache", cell)
                    self._cache_text[path] = cell.plain
        if budget == 0 and len(shown) < len(order):
            self.call_after_refresh(self.rebuild)  # the rest, one chunk per refresh
            order = [p for p in order if p in shown]
        if order != self._order:
            rank = {path: i for i, path in enumerate(order)}
            table.sort("session", key=lambda cell: rank[cell.path])
            self._order = order
            if follow and selected in rank:  # the highlight follows its session
                table.move_cursor(row=rank[selected], animate=False)
            else:
                table.move_cursor(row=0, animate=False)
        self._show_status(len(rows))
        if self._order and len(self._order) == len(rows):
            self.call_after_refresh(self._painted.set)

    def overview_settings_expiring(self) -> float:
        """The expiring threshold (seconds) of the overview's settings (60 s by default)."""
        overview = self._overview
        return overview.settings.expiring_s if overview is not None else 60.0

    def _show_status(self, shown: int) -> None:
        total = len(self.summaries)
        live = sum(1 for s in self.summaries.values() if s.live)
        parts = [f"{shown} of {total} sessions" if self._filter else f"{total} sessions", f"{live} live"]
        if self._pending:
            parts.append(f"reading {self._pending} more…")
        compact = self._layout.form != "full"
        if compact:
            parts.append("● warm ◐ expiring ○ cold")
        if compact and any(s.cache.rule == "configured" and s.cache.lifetime_s for s in self.summaries.values()
                           if not self._filter or matches(s, self._filter)):
            parts.append("~ typical lifetime, not recorded")
        if self._problems:
            parts.append(f"{len(self._problems)} problem(s): {clip(literal(self._problems[-1], keep_newlines=False), 80)}")
        parts.append("type to filter or a path · Enter opens · ↓ rows · Esc back")
        self.query_one("#home-status", Label).update(Text(" · ".join(parts)))

    def tick(self) -> None:
        """Every second: re-sort when the order changed, else redraw the countdown cells; raise
        the due expiry notices."""
        if not self.is_attached:
            return
        self.rebuild(tick=True)
        for notice in self.notifier.due(self.summaries.values(), self._now()):
            self.notify(notice.text, title="prompt cache", severity="warning", timeout=10)
            self.app.bell()

    def _selected_path(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        except Exception:  # no row under the cursor
            return None

    @on(Input.Changed, "#home-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = event.value.strip()
        self.rebuild()

    def on_key(self, event: events.Key) -> None:
        """A printable key while the table (or nothing) has the focus goes into the filter box,
        so typing a name always lands there (`/` only moves the focus there, as the footer says)."""
        box = self.query_one(Input)
        if self.focused is box or not event.is_printable or not event.character or event.key == "slash":
            return
        event.stop()
        event.prevent_default()
        box.focus()
        box.insert_text_at_cursor(event.character)

    @on(Input.Submitted, "#home-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        """Enter in the box: a typed path opens that file (or one line says why not); words
        open the highlighted row of the filtered list."""
        text = event.value.strip()
        if text and (looks_like_path(text) or not self._order):
            path, reason = typed_file(text)
            if path is not None:
                self.dismiss(path)
                return
            missing = bool(reason) and reason.startswith("no such file")
            if missing and not looks_like_path(text):
                reason = f"no session matches {literal(text, keep_newlines=False)!r} (and no such file)"
            self.notify(reason or "", severity="error" if missing else "warning")
            return
        if self._order:
            self.dismiss(Path(self._selected_path() or self._order[0]))

    @on(DataTable.RowSelected, "#home-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(Path(str(event.row_key.value)))

    def action_back(self) -> None:
        """Esc: back to the dashboard without opening anything."""
        self.dismiss(None)

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    def action_focus_table(self) -> None:
        self.query_one(DataTable).focus()


def visible_paths(screen: HomeScreen) -> list[str]:
    """The paths of the rows in display order (for tests and the bench)."""
    return list(screen._order)


def summaries_of(paths: Iterable[str], screen: HomeScreen) -> list[SessionSummary]:
    """The summaries of `paths` as the screen holds them."""
    return [screen.summaries[p] for p in paths if p in screen.summaries]
