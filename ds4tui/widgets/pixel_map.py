"""The pixel map: the context window as a grid of cells, one cell per N tokens, by category.

Two views (`view`): "agent" (default) shows what the agent sends, every cell in its category's
colour; "ds4" shows DS4's plan on top: cells of entries the plan leaves out drawn ▒, pinned
entries ◆ (still in their category's colour). In both views the prompt cache is an overlay
that keeps the colour: cells after the cached prefix of the last request are drawn □ (hollow),
and the last cell of the cached prefix is the boundary, its background coloured by the cache
state (warm green, expiring amber, cold blue). The scale (tokens per cell, 1-2-5 series,
`ds4core.categories.tokens_per_cell`) depends on the window and the map's share of the screen
only, so it stays while the session grows.

Rendered with Textual's Line API (`render_line` returns one `Strip` per row), so the cost of a
repaint is one row of runs, whatever the window size. Cells follow context order and each one
belongs to a real entry: moving the cursor onto a cell selects that entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from textual.geometry import Region

from ds4core.categories import Cell, tokens_per_cell
from ds4core.tokens import fmt_tokens
from ds4tui.palette import BOUNDARY, EXCLUDED, FILLED, FREE, PINNED, UNCACHED, colour_of

_NO_INDEX = -(1 << 40)
"""A cell index no cursor, boundary or cell has (for the style of a plain cell)."""


class PixelMap(Widget, can_focus=True):
    """A grid of cells for a map model (`ds4tui.viewmodel.MapModel`: indexed segments, calibrated
    totals, a context window in tokens). A new model lays its cells out in O(cells log segments)
    and repaints only the rows whose cells changed; styles are cached per look."""

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
        inspect: bool = False  # Enter: the user asked to inspect it (show the inspector)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._model: Any = None  # MapModel | None
        self._window = 1
        self._styles: dict[tuple, Style] = {}
        self._plain: dict[tuple, Style] = {}  # (category, bgcolor) → the cell style without overlays
        self._rows_drawn: dict[tuple, tuple[Strip, list[Cell]]] = {}  # render_line's drawn rows (key: what a row depends on)
        self._cells: list[Cell] = []
        self._per_cell = 1
        self._highlight: int | None = None
        self._sends: int | None = None  # what the DS4 plan sends (tokens), for the DS4 view's title
        self._excluded: frozenset[int] = frozenset()
        self._pinned: frozenset[int] = frozenset()
        self._cached_end: int | None = None
        self._base_style: Style | None = None  # (while `render_lines` runs)
        self._cache_status: str | None = None
        self._boundary: int | None = None
        self._titles: tuple[Any, ...] | None = None  # the border title and subtitle shown (`_set_title`)
        self._planned = True  # a DS4 plan is shown (False: "planning…" in the ds4 view's title)
        self._view = "agent"
        self.fit_height = False
        """Shrink the widget to the rows the grid needs (the panel below gets the rest)."""

    @property
    def tokens_per_cell(self) -> int:
        """Tokens one cell stands for (a round number chosen to fit the window)."""
        return self._per_cell

    @property
    def cells(self) -> list[Cell]:
        """The laid-out cells (for tests and the legend)."""
        return self._cells

    @property
    def view(self) -> str:
        """"agent" (what the agent sends) or "ds4" (DS4's plan: ▒ excluded, ◆ pinned)."""
        return self._view

    def set_view(self, view: str) -> None:
        """Switch between the "agent" and "ds4" views. Raises ValueError for another name."""
        if view not in ("agent", "ds4"):
            raise ValueError(f"unknown map view {view!r} (agent, ds4)")
        self._view = view
        self._set_title()
        self.refresh()

    def set_data(self, model: Any) -> None:
        """Show `model` (a `ds4tui.viewmodel.MapModel`: its cells at the calibrated totals, in a
        window of `model.window` tokens); only rows whose cells changed are repainted."""
        if getattr(self._model, "roles", None) != getattr(model, "roles", None):
            self._plain.clear()  # another agent's categories: colours by its roles
        self._model = model
        self._window = max(model.window, 1)
        self._layout(partial=True)

    def reset_scale(self) -> None:
        """Choose the scale afresh at the next layout (the terminal was resized): the widget
        takes its full share of the screen again, then fits its rows (`fit_height`)."""
        if not self.fit_height:
            self.styles.clear_rule("height")
        self._layout()
        self.call_after_refresh(self._layout)  # again once the new screen size is laid out

    def set_overlays(
        self, *, excluded: frozenset[int] | set[int], pinned: frozenset[int] | set[int], cached_end: int | None,
        cache_status: str | None, planned: bool = True, sends: int | None = None,
    ) -> None:
        """Marks on top of the categories, by context message index: `excluded` by the DS4 plan
        (▒ in the "ds4" view), `pinned` (◆ in the "ds4" view), and the cached prefix of the last
        request (messages before `cached_end`; later messages drawn □), whose last cell is the
        boundary styled by `cache_status` ("warm", "expiring", "cold", "unknown" or None).
        `planned=False`: no plan yet (the "ds4" view's title says "planning…", not ▒/◆)."""
        excluded = excluded if isinstance(excluded, frozenset) else frozenset(excluded)
        pinned = pinned if isinstance(pinned, frozenset) else frozenset(pinned)
        if planned != self._planned or sends != self._sends:
            self._planned, self._sends = planned, sends
            self._set_title()
        # (the sets by identity first: a view model keeps its marks' sets while the plan stands,
        # and comparing two sets of 40,000 excluded messages walks them both)
        if ((excluded is self._excluded or excluded == self._excluded) and (pinned is self._pinned or pinned == self._pinned)
                and cached_end == self._cached_end and cache_status == self._cache_status):
            return  # nothing changed: no repaint
        # Only the rows whose glyphs or boundary style change are repainted: ▒/◆ of the messages
        # that entered or left the plan's sets (drawn in the "ds4" view only), □ of the messages
        # between the old and the new cached prefix end, and the old and new boundary cells.
        flips = (self._excluded ^ excluded) | (self._pinned ^ pinned) if self._view == "ds4" else frozenset()
        old_end, old_boundary, old_status = self._cached_end, self._boundary, self._cache_status
        self._excluded = excluded
        self._pinned = pinned
        self._cached_end = cached_end
        self._cache_status = cache_status
        self._find_boundary()
        self._set_title()

        def changed(i: int) -> bool:
            return i in flips or ((old_end is not None and i >= old_end) != (cached_end is not None and i >= cached_end))

        boundaries = {old_boundary, self._boundary} if (old_boundary, old_status) != (self._boundary, cache_status) else set()
        self._refresh_cells(changed, boundaries - {None})

    @property
    def cache_status(self) -> str | None:
        """The cache status the boundary is drawn with (None: no cache information)."""
        return self._cache_status

    @property
    def boundary(self) -> int | None:
        """Index of the last cell of the cached prefix (None: no cache information)."""
        return self._boundary

    def _find_boundary(self) -> None:
        self._boundary = None
        end = self._cached_end
        if end is None:
            return
        last = None
        for index, cell in enumerate(self._cells):
            if cell.category == "free":
                break
            if cell.message_index is None or cell.message_index < end:
                last = index
            else:
                break
        self._boundary = last

    def _set_title(self) -> None:
        width = max(self.size.width, 10)
        scale = f"1 cell = {self._per_cell:,} tok"
        model = self._model
        per = f"{self._per_cell:,}/cell"
        if self._view == "agent":
            name = f"What {getattr(model, 'agent', 'Pi')} sends"
            candidates = [f"{name} · {scale}", f"{name} · {per}", f"{name.removeprefix('What ')} · {per}"]
        else:
            what_if = getattr(model, "what_if", False)
            plan = "What DS4 would send" if what_if else "DS4 plan"
            if self._planned and self._sends is not None:  # what it sends, beside the header's "now"
                plan = f"DS4 would send {fmt_tokens(self._sends)}" if what_if else f"DS4 sends {fmt_tokens(self._sends)}"
            if not self._planned:
                candidates = [f"{plan} (planning…) · {scale}", f"{plan} (planning…) · {per}", f"{plan} · {per}"]
            else:  # the marks' key matters more than the scale's words
                candidates = [f"{plan} (▒ out ◆ pinned) · {scale}", f"{plan} (▒ out ◆ pinned) · {per}",
                              f"{plan} (▒ out ◆ pin) · {per}", f"{plan} ▒ out ◆ pin", f"{plan} · {per}"]
        candidates.append(f"1 cell = {self._per_cell:,}")
        title = next((t for t in candidates if len(t) + 4 <= width), candidates[-1])
        legend = self._cache_legend()
        shown = (title, legend.plain, legend.style, tuple(legend.spans))
        if shown != self._titles:  # Textual repaints the whole widget on every title assignment
            self._titles = shown
            self.border_title = title
            self.border_subtitle = legend

    def _cache_legend(self) -> Text:
        """The bottom border: how to read the cache overlay (the boundary cell's style, the
        cache state in words, □ when some cells are not cached yet), shortened to fit."""
        status = self._cache_status
        if self._cached_end is None or status is None:
            return Text("")
        words = {"warm": "cache warm", "expiring": "cache expiring", "cold": "cache cold"}.get(status, "cache unknown")
        if self._boundary is None:
            if not any(c.message_index is not None for c in self._cells):
                return Text("")  # no message yet: nothing to say about caching them
            # no cell of this context is in the cached prefix (e.g. right after a compaction:
            # the cache holds the old context's prefix, every cell here is □ until the next request)
            room = max(self.size.width - 4, 8)
            for tail in (f"{UNCACHED} none of this context cached yet · {words}", f"{UNCACHED} none cached · {words}",
                         f"{UNCACHED} none cached"):
                if len(tail) <= room:
                    break
            return Text(tail)
        uncached = any(c.message_index is not None and c.message_index >= self._cached_end for c in self._cells)
        swatch = Text(FILLED, style=Style(color="#ffffff", bgcolor=BOUNDARY.get(status, BOUNDARY["unknown"])))
        room = max(self.size.width - 4, 8)
        for tail in (
            f" cached prefix ends · {words}" + (f" · {UNCACHED} not cached" if uncached else ""),
            f" cached prefix ends · {words}",
            f" prefix end · {words}",
            f" {words}",
        ):
            if len(tail) + 1 <= room:
                break
        return swatch + Text(tail)

    def highlight_message(self, message_index: int | None) -> None:
        """Mark the cells of one context message (a selected turn or entry); only the rows of
        the cells of the messages highlighted before and now are repainted."""
        old = self._highlight
        self._highlight = message_index
        if old != message_index:
            targets = {old, message_index}
            self._refresh_cells(targets.__contains__)

    def _refresh_cells(self, message_changed: Any, cells: set[int] | frozenset[int] = frozenset()) -> None:
        """Repaint the rows holding a cell whose context message index `i` gives
        `message_changed(i)` true, or one of the cell indices `cells` (O(cells) to find them;
        a row is repainted once)."""
        width = self.size.width
        if width <= 0:
            return
        rows = {index // width for index in cells}
        for index, cell in enumerate(self._cells):
            i = cell.message_index
            if i is not None and message_changed(i):
                rows.add(index // width)
        for row in sorted(rows):
            self.refresh(Region(0, row, width, 1))

    def _layout(self, partial: bool = False) -> None:
        """Lay the cells out for the current size. `partial`: repaint only the rows whose cells
        changed when the geometry (width, scale, cell count) is the same as before."""
        width, height = self.size.width, self.size.height
        border = self.outer_size.height - height
        if self.fit_height and self.parent is not None and self.parent.size.height:
            # The scale follows the map's share of its column (half, beside a 1fr legend), not
            # the widget's own height, which shrinks to the rows the scale needs: so the scale
            # depends on the window and the terminal size only, never on the session's growth.
            outer = self.parent.size.height - self.parent.size.height // 2
            height = max(outer - border, 1)
        if width <= 0 or height <= 0 or self._model is None:
            self._cells = []
            self.refresh()
            return
        total = width * height
        per_cell = tokens_per_cell(self._window, total)
        needed = -(-self._window // per_cell)
        old, old_geometry = self._cells, (getattr(self, "_geometry", None))
        self._per_cell = per_cell
        cells = self._model.cells(min(total, needed), per_cell)
        self._cells = cells
        self._geometry = (width, per_cell, len(cells))
        boundary = self._boundary
        self._find_boundary()
        self._set_title()
        if self.fit_height and cells:
            rows = -(-len(cells) // width)
            if self.styles.height is None or self.styles.height.value != rows + border:
                self.styles.height = rows + border
        at, selected = self.cursor, self._highlight
        if at >= 0 and selected is not None and cells and not (at < len(cells) and cells[at].message_index == selected):
            # a new layout (scale, size, data): the cursor stays on the selected message's first
            # cell (or, when it has none at this scale, the last cell before it) instead of
            # landing on whatever cell now has its old index; the selection does not change
            where = None
            for i, cell in enumerate(cells):  # (cells are in context order)
                index = cell.message_index
                if index is None or index < selected:
                    where = i if index is not None else where
                    continue
                if index == selected:
                    where = i
                break
            if where is not None:
                self.set_reactive(PixelMap.cursor, where)
        if self.cursor >= len(cells):
            self.cursor = len(cells) - 1
        if not (partial and old_geometry == self._geometry):
            self.refresh()
            return
        # rows whose cells changed, and the rows of the old and new cache boundary if it moved
        moved = {boundary, self._boundary} - {None} if boundary != self._boundary else set()
        for start in range(0, len(cells), width):
            end = start + width
            if old[start:end] != cells[start:end] or any(start <= m < end for m in moved):
                self.refresh(Region(0, start // width, width, 1))

    def on_resize(self) -> None:
        self._layout()

    def render_line(self, y: int) -> Strip:
        """One row of cells as runs of equally styled glyphs. A row is drawn once per distinct
        (cells, overlays, cursor, highlight) and kept: an append that leaves a row's cells as they
        were repaints nothing there, and the drawing loop looks each style up once per run."""
        width = self.size.width
        start = y * width
        row = self._cells[start : start + width]
        base = self._base_style if self._base_style is not None else self.rich_style
        if not row:
            return Strip.blank(width, base)
        end = start + len(row)
        boundary = self._boundary if self._boundary is not None and start <= self._boundary < end else None
        cursor = self.cursor if self.has_focus and start <= self.cursor < end else None
        highlight = self._highlight
        if highlight is not None and not any(cell.message_index == highlight for cell in row):
            highlight = None  # (a row without the highlighted message is drawn the same either way)
        # the row's cells by identity (hashing 120 cells' fields cost ~40 % of a row): the entry
        # keeps the row's cells alive, so an id in a key is never another cell's
        key = (tuple(map(id, row)), start, width, boundary, self._cache_status if boundary is not None else None,
               cursor, highlight, self._view, self._cached_end, self._pinned, self._excluded, base)
        drawn = self._rows_drawn.get(key)
        if drawn is not None:
            return drawn[0]
        segments: list[Segment] = []
        run_style: Style | None = None
        run_text: list[str] = []
        bgcolor = base.bgcolor
        glyph_of, style_of = self._glyph, self._style
        # the plain cells' glyph, inline (`_glyph`): most rows hold no boundary, cursor or highlight
        ds4 = self._view == "ds4"
        pinned, excluded, cached_end = self._pinned, self._excluded, self._cached_end
        styles: dict[str, Style] = {}
        marked = boundary is not None or cursor is not None or highlight is not None
        for offset, cell in enumerate(row):
            category = cell.category
            if marked and (start + offset == boundary or start + offset == cursor
                           or (highlight is not None and cell.message_index == highlight)):
                style = style_of(cell, start + offset, bgcolor)
                glyph = glyph_of(cell, start + offset)
            else:
                style = styles.get(category)
                if style is None:
                    style = styles[category] = self._plain_style(category, bgcolor)
                i = cell.message_index
                if category == "free":
                    glyph = FREE
                elif i is None:
                    glyph = FILLED
                elif ds4 and i in pinned:
                    glyph = PINNED
                elif ds4 and i in excluded:
                    glyph = EXCLUDED
                elif cached_end is not None and i >= cached_end:
                    glyph = UNCACHED
                else:
                    glyph = FILLED
            if style is run_style or style == run_style:
                run_text.append(glyph)
            else:
                if run_text:
                    segments.append(Segment("".join(run_text), run_style))
                run_style, run_text = style, [glyph]
        if run_text:
            segments.append(Segment("".join(run_text), run_style))
        strip = Strip(segments).extend_cell_length(width, base)
        if len(self._rows_drawn) > 1024:
            self._rows_drawn.clear()
        self._rows_drawn[key] = (strip, row)
        return strip

    def render_lines(self, crop: Region) -> list[Strip]:
        """Textual's `render_lines`, with the widget's base style worked out once for all the
        rows it draws (`rich_style` walks the CSS and the ancestors' backgrounds each time)."""
        self._base_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._base_style = None

    def _plain_style(self, category: str, bgcolor: Any) -> Style:
        """The style of a cell of `category` without cursor, highlight or boundary."""
        key = (category, bgcolor)
        style = self._plain.get(key)
        if style is None:
            style = self._plain[key] = self._style(Cell(category, None, None), _NO_INDEX, bgcolor)
        return style

    def _glyph(self, cell: Cell, index: int) -> str:
        if cell.category == "free":
            return FREE
        i = cell.message_index
        if i is not None:
            if self._view == "ds4":
                if i in self._pinned:
                    return PINNED
                if i in self._excluded:
                    return EXCLUDED
            if self._cached_end is not None and i >= self._cached_end:
                return UNCACHED
        return FILLED

    def _style(self, cell: Cell, index: int, base_bgcolor: Any = False) -> Style:
        colour = colour_of(cell.category, getattr(self._model, "roles", None)) or "#808080"
        bgcolor = self.rich_style.bgcolor if base_bgcolor is False else base_bgcolor
        if index == self._boundary and self._cache_status is not None:
            bgcolor = BOUNDARY.get(self._cache_status, BOUNDARY["unknown"])
        look = 0
        if index == self.cursor and self.has_focus:
            look = 1
        elif self._highlight is not None and cell.message_index == self._highlight:
            look = 2
        key = (colour, bgcolor, look)
        style = self._styles.get(key)
        if style is None:
            if look == 1:
                style = Style(color=colour, bgcolor=bgcolor, reverse=True)
            elif look == 2:
                style = Style(color=colour, bgcolor=bgcolor, bold=True, underline=True)
            else:
                style = Style(color=colour, bgcolor=bgcolor)
            if len(self._styles) > 512:
                self._styles.clear()
            self._styles[key] = style
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
        """Re-announce the cell under the cursor, asking to inspect it (Enter)."""
        if 0 <= self.cursor < len(self._cells):
            cell = self._cells[self.cursor]
            self.post_message(self.CellSelected(cell.entry_id, cell.message_index, self, cell.category, inspect=True))

    def on_click(self, event) -> None:  # type: ignore[no-untyped-def]
        """Clicking a cell moves the cursor there."""
        index = event.y * self.size.width + event.x
        if 0 <= index < len(self._cells):
            self.cursor = index
