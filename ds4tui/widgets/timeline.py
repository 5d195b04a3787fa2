"""The Timeline tab (issue 33): the context over time, for every agent, and its scrub cursor.

A stacked plot of the context by category per request (tokens; the window and the agent's
autocompact point or DS4's hard limit as lines; compactions as vertical lines; the cursor as a
bright one), then the cache-read share per request and the cumulative cost, then the cursor's
request in words. The plots are `textual_plot.PlotWidget`s, mounted the first time the tab
shows a timeline (textual-plot and numpy load then, not with the dashboard: ~0.1–1 s of imports).

Keys (the panel has the focus): `←`/`[` and `→`/`]` one request, `{`/`}` one compaction,
`Home` the first request, `End` or `f` back to live; a click on the plot jumps to that request.
Each move posts `TimelinePanel.Scrubbed(index)` (None: live); the dashboard sets the header,
legend, map and inspector to that request (`ds4tui.timeline_model.scrubbed`). The widget renders
`ds4sessions.derive.timeline.Timeline` values and `ds4tui.timeline_model.columns`; it computes
nothing else.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message

from ds4core.tokens import fmt_tokens
from ds4tui.palette import colour_of
from ds4tui.timeline_model import UNKNOWN, Columns, columns, cumulative_text, marker_text
from ds4tui.widgets.lines import TextLines

PLOT_COLUMNS_MAX = 400
"""Columns computed for the plot at most (its width in cells bounds it further)."""


class TimelinePanel(Vertical, can_focus=True):
    """The Timeline tab's content (see the module doc). `show(timeline)` draws a new timeline;
    `index` is the scrubbed row (None: live, the cursor on the last request)."""

    DEFAULT_CSS = """
    TimelinePanel { height: 1fr; }
    TimelinePanel > #tl-title { height: 1; }
    TimelinePanel > #tl-plot { height: 1fr; min-height: 6; }
    TimelinePanel > #tl-caret { height: 1; }
    TimelinePanel > #tl-cache { height: 9; }
    TimelinePanel > #tl-cursor { height: 2; }
    TimelinePanel:focus > #tl-title { text-style: bold; }
    """

    BINDINGS = [
        Binding("left,left_square_bracket", "step(-1)", "Request −1", show=False),
        Binding("right,right_square_bracket", "step(1)", "Request +1", show=False),
        Binding("left_curly_bracket", "compaction(-1)", "Compaction −1", show=False),
        Binding("right_curly_bracket", "compaction(1)", "Compaction +1", show=False),
        Binding("home", "first", "First request", show=False),
        Binding("end,f", "live", "Live", tooltip="Back to the context now"),
    ]

    class Scrubbed(Message):
        """The cursor moved: `index` is the row (0-based) the dashboard shows, None: live."""

        def __init__(self, index: int | None) -> None:
            self.index = index
            super().__init__()

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.timeline: Any = None
        self.index: int | None = None
        self._plot: Any = None
        self._cache_plot: Any = None
        self._columns: Columns | None = None
        self._drawn: tuple = ()
        self._ready = False

    def compose(self):  # type: ignore[no-untyped-def]
        # (one-line TextLines of fixed height: a scrub step repaints them without a layout)
        yield TextLines("Timeline: waiting for the first requests…", wrap=False, id="tl-title")
        yield Vertical(id="tl-plot")
        yield TextLines("", wrap=False, id="tl-caret")
        yield Vertical(id="tl-cache")
        yield TextLines("", id="tl-cursor")

    # --- data -------------------------------------------------------------------------------

    def show(self, timeline: Any) -> None:
        """Draw `timeline` (a `Timeline`, or None: nothing yet). A scrubbed cursor stays on its
        request while new requests extend the plot."""
        self.timeline = timeline
        if self.index is not None and (timeline is None or self.index >= len(timeline.rows)):
            self.index = None
        self._ensure_plots()
        self._draw()

    def reset(self) -> None:
        """Forget the session (another one is opened)."""
        self.timeline = None
        self.index = None
        self._drawn = ()
        self._draw()

    @property
    def cursor(self) -> int | None:
        """The row the cursor is on: `index`, or the last row when live (None: no rows)."""
        rows = self.timeline.rows if self.timeline is not None else ()
        if self.index is not None:
            return self.index
        return len(rows) - 1 if rows else None

    def _ensure_plots(self) -> None:
        if self._plot is not None or self.timeline is None:
            return
        from textual_plot import PlotWidget

        self._plot = PlotWidget(allow_pan_and_zoom=False, id="tl-plot-widget")
        self._cache_plot = PlotWidget(allow_pan_and_zoom=False, id="tl-cache-widget")
        self._plot.can_focus = False
        self._cache_plot.can_focus = False
        self.call_later(self._mount_plots)

    async def _mount_plots(self) -> None:
        """Mount the plots, then draw (a plot's own mount clears its data)."""
        await self.query_one("#tl-plot", Vertical).mount(self._plot)
        await self.query_one("#tl-cache", Vertical).mount(self._cache_plot)
        self._ready = True
        self._drawn = ()
        self.call_after_refresh(self._draw)

    def _plot_width(self) -> int:
        width = self.size.width or 80
        return max(min(width - 10, PLOT_COLUMNS_MAX), 10)

    def _draw(self) -> None:
        """Draw the plots (when the timeline or the width changed) and the cursor."""
        tl = self.timeline
        title = self.query_one("#tl-title", TextLines)
        if tl is None or not tl.rows:
            title.update("Timeline: no request yet" if tl is not None else "Timeline: waiting for the first requests…", layout=False)
            self.query_one("#tl-cursor", TextLines).update("", layout=False)
            return
        width = self._plot_width()
        key = (id(tl), width)
        if key != self._drawn[:2] or self._columns is None:
            self._columns = columns(tl, width)
        cols = self._columns
        title.update(self._title(tl), layout=False)
        cursor = self.cursor
        if self._ready and key != self._drawn[:2]:
            self._draw_context(tl, cols, cursor)
            self._draw_cache(tl, cols, cursor)
            self.call_after_refresh(self._draw_caret)
        self._drawn = (id(tl), width, cursor)
        self._draw_caret()
        self.query_one("#tl-cursor", TextLines).update(self._cursor_text(tl, cursor), layout=False)

    def _title(self, tl: Any) -> Text:
        text = Text()
        text.append(f"{len(tl.rows)} requests", style="bold")
        if tl.window:
            text.append(f" · window {fmt_tokens(tl.window)}", style="red")
        if tl.threshold:
            text.append(f" · {tl.threshold[0]} {fmt_tokens(tl.threshold[1])}", style="yellow")
        compactions = sum(1 for r in tl.rows for m in r.markers if m.kind == "compaction")
        if compactions:
            text.append(f" · {compactions} compaction{'s' if compactions != 1 else ''}", style="cyan")
        text.append(" · " + ("live" if self.index is None else f"scrubbed to #{tl.rows[self.index].n}"),
                    style="bold green" if self.index is None else "bold magenta")
        return text

    def _x_of(self, cols: Columns, cursor: int | None) -> float | None:
        if cursor is None or self.timeline is None:
            return None
        return float(self.timeline.rows[cursor].n)

    def _draw_context(self, tl: Any, cols: Columns, cursor: int | None) -> None:
        plot = self._plot
        plot.clear()
        xs = list(cols.x)
        widths = [max(b - a, 1) for a, b in zip([0, *xs[:-1]], xs)]
        peak = max((top for _, tops in cols.stacks for top in tops), default=1)
        limit = peak * 1.15
        lines: list[tuple[str, float, str]] = []
        if tl.window:
            lines.append(("window", tl.window, "red"))
        if tl.threshold:
            lines.append((tl.threshold[0], tl.threshold[1], "yellow"))
        for _, value, _ in lines:
            if value <= peak * 2.5:
                limit = max(limit, value * 1.05)
        for cid, tops in reversed(cols.stacks):
            colour = colour_of("unattributed" if cid == UNKNOWN else cid, tl.roles) or "#808080"
            plot.bar(xs, list(tops), width=widths, bar_style=colour, label=tl.labels.get(cid, cid))
        x0, x1 = xs[0] - widths[0], xs[-1]
        for label, value, colour in lines:
            if value <= limit:
                plot.plot([x0, x1], [value, value], line_style=colour, hires_mode=_braille(), label=label)
        for n in cols.compactions:
            plot.add_v_line(float(n) - 0.5, "cyan")
        plot.set_xlimits(x0, x1 + 0.5)
        plot.set_ylimits(0, limit)
        plot.set_ylabel("tokens")

    def _draw_cache(self, tl: Any, cols: Columns, cursor: int | None) -> None:
        plot = self._cache_plot
        plot.clear()
        xs = list(cols.x)
        shares = [100.0 * s if s is not None else 0.0 for s in cols.share]
        widths = [max(b - a, 1) for a, b in zip([0, *xs[:-1]], xs)]
        plot.bar(xs, shares, width=widths, bar_style="#5f87d7", label="cache read %")
        top = cols.cost[-1] if cols.cost else 0.0
        if top > 0:
            plot.plot(xs, [100.0 * c / top for c in cols.cost], line_style="#ffd75f", hires_mode=_braille(),
                      label=f"cost, % of ${top:.2f}")
        for n in cols.misses:
            plot.add_v_line(float(n), "#d75f5f")
        plot.set_xlimits(xs[0] - widths[0], xs[-1] + 0.5)
        plot.set_ylimits(0, 105)
        plot.set_ylabel("% read · cost")

    def _draw_caret(self) -> None:
        """The cursor: a caret under the plot at the request's column (the plots are redrawn only
        when the timeline changes, so a scrub step repaints this line, the cursor's words and the
        dashboard's panels, not the plots)."""
        caret = self.query_one("#tl-caret", TextLines)
        tl, cursor, plot = self.timeline, self.cursor, self._plot
        if tl is None or cursor is None or plot is None or not self._ready:
            caret.update("", layout=False)
            return
        try:
            canvas = plot.query_one("#plot")
            px, _ = plot.get_pixel_from_coordinate(float(tl.rows[cursor].n), 0.0)
        except Exception:
            caret.update("", layout=False)
            return
        column = canvas.region.x - self.region.x + px
        label = f"▲ #{tl.rows[cursor].n}" + ("" if self.index is not None else " live")
        width = self.size.width or 80
        start = max(0, min(column, width - len(label)))
        text = Text(" " * start)
        text.append(label, style="bold magenta" if self.index is not None else "bold green")
        caret.update(text, layout=False)

    def _cursor_text(self, tl: Any, cursor: int | None) -> Text:
        if cursor is None:
            return Text("")
        row = tl.rows[cursor]
        from ds4sessions.derive.timeline import request_time_label

        text = Text()
        text.append(f"#{row.n} {request_time_label(row.time)} ", style="bold")
        text.append(f"{fmt_tokens(row.context_tokens)}")
        if tl.window:
            text.append(f" / {fmt_tokens(tl.window)}")
        if row.share is not None:
            text.append(f" · read {row.share:.0%}")
        text.append(f" · {cumulative_text(row)}")
        for m in row.markers:
            colour = {"compaction": "cyan", "miss": "red", "model": "yellow", "idle": "blue"}.get(m.kind, "")
            text.append(" · ")
            text.append(marker_text(m), style=colour)
        if self.index is None:
            text.append("  (live; ← [ ] { } scrub)", style="dim")
        else:
            text.append("  (End/f: live)", style="dim")
        return text

    def on_resize(self, _: events.Resize) -> None:
        """Fit the columns to the new width."""
        self._drawn = ()
        if self.timeline is not None:
            self._draw()

    # --- the cursor ---------------------------------------------------------------------------

    def _move(self, index: int | None) -> None:
        tl = self.timeline
        if tl is None or not tl.rows:
            return
        if index is not None:
            index = max(0, min(index, len(tl.rows) - 1))
        if index == self.index:
            return
        self.index = index
        self._draw()
        self.post_message(self.Scrubbed(index))

    def action_step(self, delta: int) -> None:
        """Move the cursor `delta` requests (from the last request when live)."""
        cursor = self.cursor
        if cursor is not None:
            self._move(cursor + delta)

    def action_compaction(self, direction: int) -> None:
        """Move the cursor to the previous (-1) or next (+1) request after a compaction."""
        tl, cursor = self.timeline, self.cursor
        if tl is None or cursor is None:
            return
        marks = tl.compactions()
        targets = [i for i in marks if i < cursor] if direction < 0 else [i for i in marks if i > cursor]
        if targets:
            self._move(targets[-1] if direction < 0 else targets[0])

    def action_first(self) -> None:
        """The first request."""
        self._move(0)

    def action_live(self) -> None:
        """Back to the context now."""
        if self.index is not None:
            self.index = None
            self._draw()
            self.post_message(self.Scrubbed(None))

    def on_click(self, event: events.Click) -> None:
        """A click on the plots moves the cursor to the request under it."""
        tl, plot = self.timeline, self._plot
        if tl is None or plot is None or not tl.rows:
            return
        self.focus()
        region = plot.region
        if not region.contains(event.screen_x, event.screen_y):
            region = self._cache_plot.region if self._cache_plot is not None else region
            if not region.contains(event.screen_x, event.screen_y):
                return
            target = self._cache_plot
        else:
            target = plot
        try:
            canvas = target.query_one("#plot")
            x, _ = target.get_coordinate_from_pixel(event.screen_x - canvas.region.x, event.screen_y - canvas.region.y)
        except Exception:
            return
        ns = [r.n for r in tl.rows]
        from bisect import bisect_left

        i = min(bisect_left(ns, round(x)), len(ns) - 1)
        self._move(i)


def _braille() -> Any:
    """textual-plot's braille mode (2×4 dots per cell: thin lines)."""
    from textual_plot import HiResMode

    return HiResMode.BRAILLE
