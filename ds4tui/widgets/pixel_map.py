"""The pixel map: the context window as a grid of cells, one cell per N tokens, by category.

Rendered with Textual's Line API (`render_line` returns one `Strip` per row), so the cost of a
repaint is one row of runs, whatever the window size. Cells follow context order and each one
belongs to a real entry: moving the cursor onto a cell selects that entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from ds4core.categories import Cell, Segment as MapSegment, map_cells, tokens_per_cell
from ds4tui.palette import COLD, COLOURS, EXCLUDED, FILLED, FREE, PINNED, UNCACHED


class PixelMap(Widget, can_focus=True):
    """A grid of cells for a list of map segments and a context window (tokens)."""

    BINDINGS = [
        Binding("left,h", "move(-1, 0)", "Left", show=False),
        Binding("right,l", "move(1, 0)", "Right", show=False),
        Binding("up,k", "move(0, -1)", "Up", show=False),
        Binding("down,j", "move(0, 1)", "Down", show=False),
        Binding("enter", "select", "Inspect", show=False),
    ]

    cursor: reactive[int] = reactive(-1)
    """Index of the cell under the cursor (-1: none)."""

    @dataclass
    class CellSelected(Message):
        """The cursor moved onto a cell that belongs to an entry."""

        entry_id: str | None
        message_index: int | None
        map: "PixelMap"
        category: str = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._segments: list[MapSegment] = []
        self._window = 1
        self._cells: list[Cell] = []
        self._per_cell = 1
        self._highlight: int | None = None
        self._excluded: frozenset[int] = frozenset()
        self._pinned: frozenset[int] = frozenset()
        self._cached_end: int | None = None
        self._cold = False

    @property
    def tokens_per_cell(self) -> int:
        """Tokens one cell stands for (a round number chosen to fit the window)."""
        return self._per_cell

    @property
    def cells(self) -> list[Cell]:
        """The laid-out cells (for tests and the legend)."""
        return self._cells

    def set_data(self, segments: list[MapSegment], window: int) -> None:
        """Show `segments` in a window of `window` tokens."""
        self._segments = list(segments)
        self._window = max(window, 1)
        self._layout()

    def set_overlays(
        self, *, excluded: set[int], pinned: set[int], cached_end: int | None, cold: bool
    ) -> None:
        """Marks on top of the categories, by context message index: `excluded` by the DS4 plan
        (drawn ▒), `pinned` (drawn ◆), the cached prefix of the last request (messages before
        `cached_end`; greyed when the cache is `cold`; later messages drawn □: not cached yet)."""
        self._excluded = frozenset(excluded)
        self._pinned = frozenset(pinned)
        self._cached_end = cached_end
        self._cold = cold
        self.refresh()

    def highlight_message(self, message_index: int | None) -> None:
        """Mark the cells of one context message (a selected turn or entry)."""
        self._highlight = message_index
        self.refresh()

    def _layout(self) -> None:
        width, height = self.size.width, self.size.height
        if width <= 0 or height <= 0:
            self._cells = []
            return
        total = width * height
        self._per_cell = tokens_per_cell(self._window, total)
        needed = -(-self._window // self._per_cell)
        self._cells = map_cells(self._segments, min(total, needed), self._per_cell)
        self.border_title = f"Context window · 1 cell = {self._per_cell:,} tok"
        if self.cursor >= len(self._cells):
            self.cursor = len(self._cells) - 1
        self.refresh()

    def on_resize(self) -> None:
        self._layout()

    def render_line(self, y: int) -> Strip:
        """One row of cells as runs of equally styled glyphs."""
        width = self.size.width
        start = y * width
        row = self._cells[start : start + width]
        if not row:
            return Strip.blank(width, self.rich_style)
        segments: list[Segment] = []
        run_style: Style | None = None
        run_text = ""
        for offset, cell in enumerate(row):
            index = start + offset
            style = self._style(cell, index)
            glyph = self._glyph(cell)
            if style == run_style:
                run_text += glyph
            else:
                if run_text:
                    segments.append(Segment(run_text, run_style))
                run_style, run_text = style, glyph
        if run_text:
            segments.append(Segment(run_text, run_style))
        return Strip(segments).extend_cell_length(width, self.rich_style)

    def _glyph(self, cell: Cell) -> str:
        if cell.category == "free":
            return FREE
        i = cell.message_index
        if i is not None:
            if i in self._pinned:
                return PINNED
            if i in self._excluded:
                return EXCLUDED
            if self._cached_end is not None and i >= self._cached_end:
                return UNCACHED
        return FILLED

    def _cached_cold(self, cell: Cell) -> bool:
        if not self._cold or self._cached_end is None or cell.category == "free":
            return False
        return cell.message_index is None or cell.message_index < self._cached_end

    def _style(self, cell: Cell, index: int) -> Style:
        colour = COLOURS.get(cell.category, "#808080")
        if self._cached_cold(cell):
            colour = COLD
        base = self.rich_style
        style = Style(color=colour, bgcolor=base.bgcolor)
        if index == self.cursor and self.has_focus:
            style = Style(color=colour, bgcolor=base.bgcolor, reverse=True)
        elif self._highlight is not None and cell.message_index == self._highlight:
            style = Style(color=colour, bgcolor=base.bgcolor, bold=True, underline=True)
        return style

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        if 0 <= new < len(self._cells):
            cell = self._cells[new]
            self.post_message(self.CellSelected(cell.entry_id, cell.message_index, self, cell.category))

    def on_focus(self) -> None:
        if self.cursor < 0 and self._cells:
            self.cursor = 0
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def action_move(self, dx: int, dy: int) -> None:
        """Move the cursor by cells (dx) and rows (dy), staying inside the map."""
        if not self._cells:
            return
        width = max(self.size.width, 1)
        target = max(self.cursor, 0) + dx + dy * width
        self.cursor = min(max(target, 0), len(self._cells) - 1)

    def action_select(self) -> None:
        """Re-announce the cell under the cursor (Enter)."""
        if 0 <= self.cursor < len(self._cells):
            cell = self._cells[self.cursor]
            self.post_message(self.CellSelected(cell.entry_id, cell.message_index, self, cell.category))

    def on_click(self, event) -> None:  # type: ignore[no-untyped-def]
        """Clicking a cell moves the cursor there."""
        index = event.y * self.size.width + event.x
        if 0 <= index < len(self._cells):
            self.cursor = index
