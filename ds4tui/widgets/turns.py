"""The turn list: one line per turn of the view model, drawn with Textual's Line API.

A `DataTable` re-renders every visible cell through Rich after any change (its caches are keyed
on a global update count), which cost ~150 ms per frame at 1,000 turns for an append that
changes one row. Here each row is rendered once per `TurnRow` object (the view model hands
the same object on while a turn is unchanged) into a cached `Strip`; an append repaints the
lines whose rows changed, plus the cursor's line. The look follows Textual's DataTable: a bold
header line, zebra stripes, a block cursor (component classes `turnlist--header`,
`turnlist--even-row`, `turnlist--cursor`).
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ds4tui.text import clip, fmt_tokens, literal_text
from ds4tui.viewmodel import TurnRow, ViewModel

PLAN_STYLES = {"excluded": "dim", "partial": "yellow", "kept": "green"}
"""The plan column's colour by plan state."""

_COLUMNS = ("#", "time", "prompt", "tools", "tokens", "plan")


def plan_cell(row: TurnRow) -> Text:
    """The plan column of `row` (state in colour, ◆ when pinned)."""
    if not row.plan:
        return Text("")
    text = Text(row.plan, style=PLAN_STYLES[row.plan])
    if row.pinned:
        text.append(" ◆", style="magenta")
    return text


def row_cells(row: TurnRow) -> tuple[Text, str, Text, Text, Text, Text]:
    """The six cells of `row`: index, time, prompt (literal: markup and control characters
    shown as text), tool calls, tokens (the row's shown figure), plan."""
    return (
        Text(str(row.index) if row.index else "·", justify="right"),
        row.time,
        literal_text(row.prompt, keep_newlines=False),
        Text(str(row.tool_calls), justify="right"),
        Text(fmt_tokens(row.tokens.shown), justify="right"),
        plan_cell(row),
    )


class TurnList(ScrollView, can_focus=True):
    """One line per turn: index, time, first words of the prompt, tool calls, tokens, plan
    state. `show(view)` takes a `ds4tui.viewmodel.ViewModel`; rows that are the same objects
    as before keep their rendered line. Up/down/page/home/end and clicks move the cursor, which
    posts `TurnHighlighted`."""

    COMPONENT_CLASSES = {"turnlist--header", "turnlist--even-row", "turnlist--cursor"}
    DEFAULT_CSS = """
    TurnList {
        background: $surface;
        color: $foreground;
        height: 1fr;
        overflow-x: hidden;  /* lines are cut to the width: a horizontal bar would hide the last row */
        &:focus {
            background-tint: $foreground 5%;
            & > .turnlist--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .turnlist--header { background-tint: $foreground 5%; }
        }
        &:dark > .turnlist--even-row { background: $surface-darken-1 40%; }
        & > .turnlist--header { text-style: bold; background: $panel; color: $foreground; }
        & > .turnlist--even-row { background: $surface-lighten-1 50%; }
        & > .turnlist--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("enter", "inspect", "Inspect", show=False),
    ]

    class TurnHighlighted(Message):
        """The cursor moved to row `row` (turn key `key`: its first message index)."""

        def __init__(self, turn_list: "TurnList", row: int, key: str) -> None:
            super().__init__()
            self.turn_list = turn_list
            self.row = row
            self.key = key

        @property
        def control(self) -> "TurnList":
            return self.turn_list

    class InspectRequested(Message):
        """Enter on a turn: the user asked to inspect its entry (the screen shows the inspector)."""

    def action_inspect(self) -> None:
        """Ask the screen to show the inspector on the highlighted turn (Enter)."""
        self.post_message(self.InspectRequested())

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._rows: tuple[TurnRow, ...] = ()
        self._view: ViewModel | None = None
        self._cursor = 0
        self._strips: dict[tuple[Any, ...], Strip] = {}  # the header line
        self._rendered: dict[tuple[Any, ...], tuple[TurnRow, Strip]] = {}  # row lines
        self._looks: dict[str, Style] | None = None
        self._widths: tuple[int, ...] = ()

    # --- the table's API --------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows (turns) shown."""
        return len(self._rows)

    @property
    def cursor_row(self) -> int:
        """The cursor's row (0 when empty)."""
        return self._cursor

    def get_row_at(self, row: int) -> tuple[Any, ...]:
        """The cells of row `row` (`row_cells`)."""
        return row_cells(self._rows[row])

    def show(self, view: ViewModel) -> None:
        """Show `view.turns`: lines whose row object changed are repainted; the cursor keeps its
        row while it exists."""
        self._view = view
        rows, old = view.turns, self._rows
        self._rows = rows
        widths = self._column_widths()
        if widths != self._widths or len(old) > len(rows) or any(
            a.key != b.key for a, b in zip(old[-1:], rows[len(old) - 1 : len(old)])
        ):
            self._widths = widths
            self._strips.clear()
            self._rendered.clear()
            self.virtual_size = Size(self.size.width, len(rows) + 1)
            self._cursor = min(self._cursor, max(len(rows) - 1, 0))
            self.refresh()
            return
        if len(rows) != len(old):
            self._grow_to(len(rows) + 1)
        # only the rows on screen are repainted; the others are drawn from their row object
        # when scrolled to (`render_line` keys its cache on the row object)
        top = int(self.scroll_offset.y)
        for index in range(top, min(top + self.size.height, len(rows))):
            if index >= len(old) or old[index] is not rows[index]:
                self._refresh_row(index, top)

    def _grow_to(self, lines: int) -> None:
        """The virtual height becomes `lines`. While the list overflows its height before and
        after (the usual case in a long session), only the scroll bar learns it: assigning
        `virtual_size` would lay out the whole screen (~50 ms) for every new turn."""
        height = self.size.height
        overflowing = self.virtual_size.height > height and lines > height and height > 0
        if not overflowing or not self.show_vertical_scrollbar:
            self.virtual_size = Size(self.size.width, lines)
            return
        self.set_reactive(TurnList.virtual_size, Size(self.virtual_size.width, lines))
        scrollbar = self.vertical_scrollbar
        scrollbar.window_virtual_size = lines
        scrollbar.refresh()

    def move_cursor(self, *, row: int, scroll: bool = True) -> None:
        """Move the cursor to `row` (clamped), keep it in view, post `TurnHighlighted`."""
        if not self._rows:
            return
        row = min(max(row, 0), len(self._rows) - 1)
        old, self._cursor = self._cursor, row
        top = int(self.scroll_offset.y)
        self._refresh_row(old, top)
        self._refresh_row(row, top)
        if scroll:
            self._scroll_to_cursor()
        if old != row:
            self.post_message(self.TurnHighlighted(self, row, self._rows[row].key))

    # --- drawing ----------------------------------------------------------------------------

    def _width(self) -> int:
        """Cells a line has: the widget's width without its vertical scroll bar."""
        return self.scrollable_content_region.width or self.size.width or 80

    def _column_widths(self) -> tuple[int, ...]:
        width = self._width()
        time_width = self._view.time_width if self._view is not None else 5
        # index 4 (more for turn 10,000 and on: the last turn has the largest number), time 5
        # (11 with a date), tools 5, tokens 7, plan 8, one cell of padding each side
        rows = self._view.turns if self._view is not None else ()
        index_width = max(4, len(str(rows[-1].index))) if rows else 4
        prompt_width = max(width - index_width - time_width - 5 - 7 - 8 - 2 * 6 - 1, 10)
        return (index_width, time_width, prompt_width, 5, 7, 8)

    def _refresh_row(self, index: int, top: int) -> None:
        y = index - top + 1
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def scroll_to_cursor(self) -> None:
        """Scroll so that the cursor's row is in view (nothing when it is)."""
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        height = max(self.scrollable_content_region.height - 1, 1)
        top = int(self.scroll_offset.y)
        # `force`: rows added in this frame (a new snapshot) have no scroll bar laid out yet, and
        # Textual skips a scroll the overflow does not allow yet (the list stayed at its top)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True)
        elif self._cursor >= top + height:
            self.scroll_to(y=self._cursor - height + 1, animate=False, force=True)

    def _look(self) -> dict[str, Style]:
        if self._looks is None:
            base = self.rich_style
            self._looks = {
                "base": base,
                "header": base + self.get_component_rich_style("turnlist--header"),
                "even": base + self.get_component_rich_style("turnlist--even-row"),
                "cursor": base + self.get_component_rich_style("turnlist--cursor"),
            }
        return self._looks

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._looks = None
        self._strips.clear()
        self._rendered.clear()

    def on_focus(self) -> None:
        self._looks = None
        self._strips.clear()
        self._rendered.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._looks = None
        self._strips.clear()
        self._rendered.clear()
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._widths = self._column_widths()
        self._strips.clear()
        self._rendered.clear()
        self.virtual_size = Size(self.size.width, len(self._rows) + 1)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """Line `y` of the viewport: the header, then the rows from the scroll offset."""
        width = self._width()
        look = self._look()
        if y == 0:
            key: tuple[Any, ...] = ("header", width, self._widths)
            strip = self._strips.get(key)
            if strip is None:
                cells = [Text(c, justify="right" if c in ("#", "tools", "tokens") else "left") for c in _COLUMNS]
                strip = self._strips[key] = self._line(cells, look["header"], width)
            return strip
        index = int(self.scroll_offset.y) + y - 1
        if not 0 <= index < len(self._rows):
            return Strip.blank(width, look["base"])
        row = self._rows[index]
        kind = "cursor" if index == self._cursor else ("even" if index % 2 else "base")
        key = (id(row), kind, width, self._widths)
        cached = self._rendered.get(key)
        if cached is not None and cached[0] is row:  # the row it was drawn from (ids get reused)
            return cached[1]
        if len(self._rendered) > 4096:
            self._rendered.clear()
        cells = list(row_cells(row))
        strip = self._line([c if isinstance(c, Text) else Text(c) for c in cells], look[kind], width)
        self._rendered[key] = (row, strip)
        return strip

    def _line(self, cells: list[Text], style: Style, width: int) -> Strip:
        segments: list[Segment] = []
        for cell, cell_width in zip(cells, self._widths):
            plain = cell.plain
            text = set_cell_size(clip(plain, cell_width), cell_width)  # a cut prompt ends in "…"
            segments.append(Segment(" ", style))
            if cell.justify == "right" and cell_len(plain) < cell_width:
                # the padding as its own segment: an SVG export places each segment itself
                segments.append(Segment(" " * (cell_width - cell_len(plain)), style))
                text = plain
            if cell.spans or cell.style:
                # the plan cell: keep its colours (state, pin)
                rendered = Text(text, style=cell.style)
                for span in cell.spans:
                    rendered.stylize(span.style, span.start, span.end)
                for part in rendered.render(self.app.console):
                    segments.append(Segment(part.text, style + part.style if part.style else style))
            else:
                segments.append(Segment(text, style))
            segments.append(Segment(" ", style))
        return Strip(segments).adjust_cell_length(width, style)

    # --- input ------------------------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        """Move the cursor by `step` rows."""
        self.move_cursor(row=self._cursor + step)

    def action_page(self, direction: int) -> None:
        """Move the cursor by a page of rows."""
        self.move_cursor(row=self._cursor + direction * max(self.size.height - 2, 1))

    def action_cursor_to(self, row: int) -> None:
        """Move the cursor to row `row` (-1: the last)."""
        self.move_cursor(row=row if row >= 0 else len(self._rows) - 1)

    def on_click(self, event: events.Click) -> None:
        """A click on a row moves the cursor there."""
        if event.y >= 1:
            self.move_cursor(row=int(self.scroll_offset.y) + event.y - 1, scroll=False)
