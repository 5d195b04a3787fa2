"""The DS4 manifest view: what the planner sends and leaves out, why, and what changed.

`ManifestView.show(view)` takes a `ds4sessions.derive.planning.PlanView`. Left: a filter `Input` (`/`
focuses it) over a `DataTable` of manifest items (state, kind, entry id, atomic group, tokens,
score, reason; a retrieval supplement shows the entry its evidence quotes) and a detail line
for the highlighted row. Right: the diff with the previously shown final plan (a first paint
planned before retrieval ran, `PlanView.retrieval_pending`, is never the diff's base), then the
explain panel (what DS4's `/context explain` and `/context tokens` print,
plus configuration warnings). Sort by clicking a column header (again: reverse) or with `s`
(next column) and `r` (reverse). Highlighting a row posts `ManifestView.EntrySelected`.
Session-derived text is always shown literally (`ds4tui.text.literal_text`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from ds4tui.text import clip, fmt_tokens, literal, literal_text
from ds4tui.viewmodel import ManifestRow, Tokens

if TYPE_CHECKING:  # (the plan's modules load with the first plan, not with the app: ~60 ms)
    from ds4sessions.derive.manifest import ManifestItem, PlanView

#: (column key, header label); the order of the table's columns.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("state", "In"),
    ("kind", "Kind"),
    ("entry", "Entry"),
    ("group", "Group"),
    ("tokens", "Tokens"),
    ("score", "Score"),
    ("reason", "Reason"),
)
#: Sort orders `s` cycles through (None = manifest order: sent items, then exclusions).
SORTS: tuple[str | None, ...] = (None, "tokens", "score", "kind", "entry", "group", "reason", "state")
REASON_WIDTH = 72
"""The widest the Reason column gets (a longer reason is cut with "…"; the line under the table
shows it whole)."""
FIXED_WIDTHS = {"state": 3, "kind": 11, "tokens": 7, "score": 8}
"""Cells of the columns that never shrink: the state glyphs, the kind, and the numbers
("123,456", "1000.920"); each header fits with its sort arrow."""
TEXT_WIDTHS = {"entry": (8, 10), "group": (10, 11), "reason": (8, REASON_WIDTH)}
"""(narrowest, widest) cells of the text columns, cut with "…" (8-hex entry ids and
`group:7-12` fit); the Reason column takes what the others leave."""


def column_widths(width: int, cell_padding: int = 1) -> dict[str, int]:
    """The columns' widths (cells, without padding) for a table `width` cells wide: the fixed
    columns as they are, Entry and Group at their widest, Reason the rest (up to `REASON_WIDTH`);
    when that leaves Reason less than its narrowest, Entry and Group shrink first. Below the
    narrowest of all the table scrolls sideways (Reason first: the numbers stay on screen down to
    about 60 cells)."""
    widths = dict(FIXED_WIDTHS)
    widths.update({key: high for key, (_, high) in TEXT_WIDTHS.items() if key != "reason"})
    room = width - 2 * cell_padding * len(COLUMNS) - sum(widths.values())
    low_reason = TEXT_WIDTHS["reason"][0]
    for key in ("entry", "group"):
        give = min(max(low_reason - room, 0), widths[key] - TEXT_WIDTHS[key][0])
        widths[key] -= give
        room += give
    widths["reason"] = min(max(room, low_reason), REASON_WIDTH)
    return {key: widths[key] for key, _ in COLUMNS}
MAX_ROWS = 200
"""The most rows the table holds: a 10,000-turn plan has 40,000 items, and filling a table of
them froze the screen for seconds on every plan (a new-user trial). The rows past it, in the
current order and filter, are counted under the table (`/` filters, `s` sorts, so any row can
be brought into the first ones). 200, not 1,000: showing the tab at 10,000 turns took 1.36 s
with 1,000 rows (Textual's `DataTable` measures every cell), 0.73 s with 200."""
SLOW_REDRAW_S = 0.05
"""A redraw of the manifest slower than this (seconds) makes the next plans wait..."""
SLOW_REDRAW_GAP = 4
"""...until this many times its duration has passed since it ended (then the newest is drawn)."""
KIND_STYLES = {
    "current": "bold #5fafff",
    "pin": "bold #d7af5f",
    "recent": "#87d787",
    "summary": "#00afaf",
    "history": "#bcbcbc",
    "retrieval": "#ff87d7",
    "memory": "#d7875f",
    "project": "#afaf5f",
    "system": "#8a8f98",
    "tool": "#b48ead",
    "pi-excluded": "#808080",
}


def _group_start(group_id: str | None) -> int:
    if not group_id or not group_id.startswith("group:"):
        return -1
    head = group_id[len("group:") :].split("-", 1)[0]
    return int(head) if head.isdigit() else -1


_SORT_KEYS: dict[str, Callable[[ManifestRow], Any]] = {
    "state": lambda r: (not r.item.included, r.item.kind == "pi-excluded"),
    "kind": lambda r: r.item.kind,
    "entry": lambda r: r.item.entry_id or r.item.key,
    "group": lambda r: _group_start(r.item.group_id),
    "tokens": lambda r: r.tokens.shown,
    "score": lambda r: -1.0 if r.item.score is None else r.item.score,
    "reason": lambda r: r.item.reason,
}


def planner_rows(view: PlanView) -> tuple[ManifestRow, ...]:
    """Manifest rows of `view` with the planner's chars-v1 count as their figure (when no view
    model gives the snapshot's figures, e.g. a plan shown on its own)."""
    return tuple(ManifestRow(item, Tokens(item.tokens, "chars-v1"), item.tokens) for item in view.items)


def _matches(item: ManifestItem, needle: str) -> bool:
    state = "included" if item.included else "excluded"
    fields = (state, item.kind, item.entry_id or "", item.key, item.group_id or "", item.reason, item.role or "")
    return any(needle in f.lower() for f in fields)


class ManifestView(Widget):
    """The manifest tab's content (see the module docstring). Call `show(view)` on each new
    plan; `select_entry(entry_id)` moves the cursor to that entry's first row (map → table)."""

    DEFAULT_CSS = """
    ManifestView { height: 1fr; }
    ManifestView #manifest-main { width: 1fr; }
    ManifestView #manifest-filter { height: 3; }
    ManifestView #manifest-table { height: 1fr; }
    ManifestView #manifest-detail { height: 3; padding: 0 1; color: $text-muted; }
    ManifestView #manifest-more { height: 1; padding: 0 1; color: $warning; display: none; }
    ManifestView #manifest-side { width: 30%; min-width: 24; max-width: 58; border-left: solid $panel; padding: 0 1; }
    ManifestView #manifest-diff { margin-bottom: 1; }
    """

    BINDINGS = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("s", "cycle_sort", "Sort"),
        # `R` (shift-r) would be the app's Retrieval tab and `r` its Refresh: reverse is `S`.
        Binding("S", "reverse_sort", "Reverse"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    class EntrySelected(Message):
        """A manifest row was highlighted: `entry_id` is its session entry (for a supplement, the
        entry its evidence quotes; None for the system prompt and tools); `item` the whole row."""

        def __init__(self, entry_id: str | None, item: ManifestItem | None) -> None:
            super().__init__()
            self.entry_id = entry_id
            self.item = item

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        """An empty view until `show` is called."""
        super().__init__(name=name, id=id, classes=classes)
        self._view: PlanView | None = None
        self._previous: PlanView | None = None
        self._settled: PlanView | None = None  # the latest shown plan not pending retrieval
        self._sort: str | None = None
        self._reverse = False
        self._filter = ""
        self._rows_of: Any = ()
        self._all_rows: tuple[ManifestRow, ...] | None = ()
        self._rows: list[ManifestRow] = []
        self._quiet = False
        self._pending: Timer | None = None  # a redraw scheduled for the newest plan (see `show`)
        self._last_drawn = 0.0  # monotonic seconds when the last redraw ended
        self._last_cost = 0.0  # seconds the last redraw took
        self._stale = False  # a plan arrived while the view was hidden: fill when shown
        self._widths: dict[str, int] = {}  # the columns' widths (`column_widths`), set at each resize

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="manifest-main"):
                yield Input(placeholder="/ filter: kind, entry, group, reason, included/excluded", id="manifest-filter")
                yield DataTable(id="manifest-table", cursor_type="row")
                yield Static("", id="manifest-more")
                yield Static("", id="manifest-detail")
            with VerticalScroll(id="manifest-side"):
                yield Static("", id="manifest-diff")
                yield Static("No plan yet: DS4 plans once the whole session is read (seconds on a large one).", id="manifest-explain")

    def on_mount(self) -> None:
        self._add_columns(column_widths(0))

    def _add_columns(self, widths: dict[str, int]) -> None:
        table = self.query_one(DataTable)
        self._widths = widths
        for key, label in COLUMNS:
            table.add_column(label + " ", key=key, width=widths[key])  # room for the sort arrow

    def on_resize(self, _: events.Resize) -> None:
        """Fit the columns to the table's width once the new layout is done."""
        self.call_after_refresh(self._fit_columns)

    def _fit_columns(self) -> None:
        """Fit the columns to the table's width (`column_widths`); the rows are drawn again
        only when a width changed, the highlighted row kept."""
        table = self.query_one(DataTable)
        if not table.size.width:
            return  # hidden
        # room for the vertical scrollbar either way: it comes and goes with the rows
        widths = column_widths(table.size.width - table.styles.scrollbar_size_vertical, table.cell_padding)
        if widths == self._widths:
            return
        row = table.cursor_row
        current = self._rows[row].key if 0 <= row < len(self._rows) else None
        table.clear(columns=True)
        self._add_columns(widths)
        self._rows = []
        self._fill_table()
        for index, shown in enumerate(self._rows):
            if shown.key == current:
                self._quiet = True
                table.move_cursor(row=index)
                self._quiet = False
                break

    # -- public API ------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the plans shown (another session opens: its first plan has nothing to be
        compared with); the filter and sort stay, as the user set them."""
        self._view = self._previous = self._settled = None
        self._rows_of, self._all_rows, self._rows = (), (), []
        if self.is_mounted:
            self.query_one(DataTable).clear()
            self.query_one("#manifest-diff", Static).update("")
            self.query_one("#manifest-explain", Static).update("No plan yet: DS4 plans once the whole session is read.")
            self.query_one("#manifest-detail", Static).update("")

    @property
    def view(self) -> PlanView | None:
        """The plan shown, if any."""
        return self._view

    @property
    def rows(self) -> tuple[ManifestItem, ...]:
        """The items in table order (after filter and sort)."""
        return tuple(r.item for r in self._rows)

    def show(
        self, view: PlanView, previous: PlanView | None = None,
        rows: tuple[ManifestRow, ...] | Callable[[], tuple[ManifestRow, ...]] | None = None,
    ) -> None:
        """Show `view`; the diff compares it with `previous`, or with the latest plan shown
        before that was not pending retrieval (so the final plan of a snapshot is compared with
        the previous final plan, not with its own first paint). `rows`: the view model's rows of
        `view` (`ds4tui.viewmodel.manifest_rows`: each item's figure as shown everywhere else;
        default: the planner's chars-v1 counts; a callable is called when the rows are first
        needed). While the view is hidden (another tab) the table is filled when it is shown."""
        self._previous = previous if previous is not None else self._settled
        self._view = view
        self._rows_of = rows if rows is not None else (lambda: planner_rows(view))
        self._all_rows: tuple[ManifestRow, ...] | None = None
        if not view.retrieval_pending:
            self._settled = view
        if self.is_mounted and not self._visible():
            self._stale = True
            return
        if self._pending is not None:
            return  # a redraw is scheduled: it draws this newest plan
        wait = self._last_cost * SLOW_REDRAW_GAP - (time.monotonic() - self._last_drawn)
        if self._last_cost > SLOW_REDRAW_S and wait > 0 and self.is_mounted:
            # A long manifest takes a while to draw: while plans stream in (an agent at work),
            # it is redrawn at most every few of its own draw times, so the screen keeps
            # answering keys between redraws instead of redrawing back to back.
            self._pending = self.set_timer(wait, self._redraw)
            return
        self._redraw()

    def _redraw(self) -> None:
        self._pending = None
        started = time.monotonic()
        self._render_side()
        self._fill_table()
        self._last_drawn = time.monotonic()
        self._last_cost = self._last_drawn - started

    @property
    def _all(self) -> tuple[ManifestRow, ...]:
        """Every row of the plan shown (built on first use: a hidden tab builds none)."""
        if self._all_rows is None:
            self._all_rows = tuple(self._rows_of() if callable(self._rows_of) else self._rows_of)
        return self._all_rows

    def _visible(self) -> bool:
        node: Any = self
        while node is not None and node is not self.screen:
            if not node.display:
                return False
            node = node.parent
        return True

    def on_show(self) -> None:
        """Fill the table and the side panels with a plan that arrived while hidden."""
        if self._stale:
            self._stale = False
            self._redraw()

    def select_entry(self, entry_id: str) -> bool:
        """Move the cursor to the first row of `entry_id` without posting `EntrySelected`.
        Returns False when no visible row belongs to that entry."""
        for index, row in enumerate(self._rows):
            item = row.item
            if item.entry_id == entry_id:
                self._quiet = True
                self.query_one(DataTable).move_cursor(row=index)
                self._quiet = False
                self._render_detail(row)
                return True
        return False

    # -- actions -----------------------------------------------------------------------------

    def action_focus_filter(self) -> None:
        """Focus the filter input (`/`)."""
        self.query_one("#manifest-filter", Input).focus()

    def action_clear_filter(self) -> None:
        """Clear the filter and return to the table (`escape`)."""
        box = self.query_one("#manifest-filter", Input)
        box.value = ""
        self.query_one(DataTable).focus()

    def action_cycle_sort(self) -> None:
        """Sort by the next column (`s`): manifest order, tokens, score, kind, entry, group, reason, state."""
        position = SORTS.index(self._sort) if self._sort in SORTS else 0
        self._sort = SORTS[(position + 1) % len(SORTS)]
        self._reverse = self._sort in ("tokens", "score")
        self._fill_table()

    def action_reverse_sort(self) -> None:
        """Reverse the current order (`r`)."""
        self._reverse = not self._reverse
        self._fill_table()

    # -- events ------------------------------------------------------------------------------

    @on(Input.Changed, "#manifest-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = event.value.strip().lower()
        self._fill_table()

    @on(Input.Submitted, "#manifest-filter")
    def _filter_submitted(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if self._sort == key:
            self._reverse = not self._reverse
        else:
            self._sort, self._reverse = key, key in ("tokens", "score")
        self._fill_table()

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        row = event.cursor_row
        shown = self._rows[row] if 0 <= row < len(self._rows) else None
        item = shown.item if shown is not None else None
        self._render_detail(shown)
        if not self._quiet and item is not None:
            self.post_message(self.EntrySelected(item.entry_id, item))

    # -- rendering ---------------------------------------------------------------------------

    def _fill_table(self) -> None:
        """Fill the table: only changed cells when the rows' order is unchanged, else anew."""
        if self._view is None:
            return
        table = self.query_one(DataTable)
        current = self._rows[table.cursor_row].key if self._rows and 0 <= table.cursor_row < len(self._rows) else None
        rows = [r for r in self._all if not self._filter or _matches(r.item, self._filter)]
        if self._sort is not None:
            rows.sort(key=_SORT_KEYS[self._sort], reverse=self._reverse)
        elif self._reverse:
            rows.reverse()
        more = self.query_one("#manifest-more", Static)
        if len(rows) > MAX_ROWS:
            more.update(f"{MAX_ROWS:,} of {len(rows):,} rows shown · / filter · s sort")
            more.display = True
            rows = rows[:MAX_ROWS]
        elif more.display:
            more.display = False
        previous = self._rows
        self._rows = rows
        self._quiet = True
        if len(previous) == len(rows) and table.row_count == len(rows) and all(
            a.key == b.key for a, b in zip(previous, rows)
        ):
            for before, row in zip(previous, rows):
                if before != row:
                    for (key, _), cell, prior in zip(COLUMNS, self._cells(row), self._cells(before)):
                        if cell != prior:
                            table.update_cell(row.key, key, cell)
        else:
            table.clear()
            for row in rows:
                table.add_row(*self._cells(row), key=row.key)
        for key, label in COLUMNS:
            arrow = ("▼" if self._reverse else "▲") if key == self._sort else " "
            table.columns[key].label = Text(label + arrow)  # type: ignore[index]
        if current is not None and (table.cursor_row >= len(rows) or rows[table.cursor_row].key != current):
            for index, row in enumerate(rows):
                if row.key == current:
                    table.move_cursor(row=index)
                    break
        self._quiet = False
        table.refresh()
        self._render_detail(rows[table.cursor_row] if rows and 0 <= table.cursor_row < len(rows) else None)

    @staticmethod
    def _cells(row: ManifestRow) -> tuple[Text, ...]:
        item = row.item
        dim = "" if item.included else "dim"
        if item.included:
            state = Text("●", style="green")
        else:
            state = Text("·" if item.kind == "pi-excluded" else "○", style="red" if item.kind != "pi-excluded" else "dim")
        if item.pinned:
            state.append("⚑", style="bold #d7af5f")
        return (
            state,
            Text(item.kind, style=f"{KIND_STYLES.get(item.kind, '')} {dim}".strip()),
            Text(literal(item.entry_id or item.key, keep_newlines=False), style=dim, overflow="ellipsis", no_wrap=True),
            Text(item.group_id or "", style=dim, overflow="ellipsis", no_wrap=True),
            Text(f"{row.tokens.shown:,}", style=dim, justify="right"),
            Text("" if item.score is None else f"{item.score:.3f}", style=dim, justify="right"),
            Text(clip(literal(item.reason, keep_newlines=False), REASON_WIDTH), style=dim, overflow="ellipsis", no_wrap=True),
        )

    def _render_detail(self, row: ManifestRow | None) -> None:
        detail = self.query_one("#manifest-detail", Static)
        if row is None:
            detail.update("")
            return
        item = row.item
        text = Text()
        text.append("included" if item.included else "excluded", style="bold green" if item.included else "bold red")
        text.append(f" · {item.kind} · ")
        if item.is_supplement:  # e.g. retrieval:<entry> from <entry>
            text.append_text(literal_text(item.key, keep_newlines=False))
            text.append(" from ")
        text.append_text(literal_text(item.entry_id or item.key, keep_newlines=False))
        if item.role:
            text.append(f" ({item.role})")
        text.append(f" · {fmt_tokens(row.tokens.shown)} tok ({row.tokens.estimator})")
        if row.tokens.estimator != "chars-v1" or row.tokens.raw != row.planner_tokens:
            text.append(f" · planner {fmt_tokens(row.planner_tokens)} chars-v1", style="dim")
        text.append("\n")
        text.append_text(literal_text(item.reason, keep_newlines=False))
        detail.update(text)

    def _render_side(self) -> None:
        view = self._view
        if view is None:
            return
        text = Text()
        if view.warnings:
            for warning in view.warnings:
                text.append("⚠ ", style="bold yellow")
                text.append_text(literal_text(warning, "yellow", keep_newlines=False))
                text.append("\n")
            text.append("\n")
        from ds4sessions.derive.explain import explain_lines, tokens_lines

        lines = explain_lines(view) + [""] + tokens_lines(view)
        for line in lines:
            heading = line.startswith("DS4 Context")
            text.append_text(literal_text(line, "bold" if heading else ""))
            text.append("\n")
        if view.unmapped_pins:
            text.append_text(
                literal_text(f"ds4:pin labels outside the context: {', '.join(view.unmapped_pins)}", "dim", keep_newlines=False)
            )
            text.append("\n")
        self.query_one("#manifest-explain", Static).update(text)
        diff = Text()
        diff.append("Since the previous plan\n", style="bold")
        for line in view.diff(self._previous).lines():
            diff.append_text(literal_text(line))
            diff.append("\n")
        self.query_one("#manifest-diff", Static).update(diff)
