"""`SteadyStatic`: a `Static` whose updates lay the screen out again only when its height changes.

Textual's `Static.update` asks for a layout of the whole screen by default (the content may have
changed size). The dashboard updates its header, legend and inspector on every appended line;
a full reflow costs tens of milliseconds on a large screen, for a content whose size is nearly
always the same. `SteadyStatic.update` measures the new content at the current width and asks
for a layout only when the height differs from the last one measured (or the width changed).
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Static


class SteadyStatic(Static):
    """A `Static` that reflows the screen only when its content's height changes."""

    _steady: tuple[int, bool, int] | None = None

    def update(self, content: Any = "", *, layout: bool | None = None) -> None:
        """Show `content`; `layout` forces (True) or skips (False) a layout; None (default): a
        layout only when the content's height at the current width differs from the last."""
        if layout is not None:
            self._steady = None
            super().update(content, layout=layout)
            return
        super().update(content, layout=False)
        if not self.is_mounted or self.parent is None:
            self._steady = None
            self.refresh(layout=True)
            return
        width = self.content_region.width
        if width <= 0:  # not shown (a hidden tab): it is laid out when it is shown
            self._steady = None
            return
        parent = self.parent
        container = parent.size if hasattr(parent, "size") else self.size
        # whether the content is wider than the widget too: a scrolling container then shows a
        # horizontal scroll bar
        measured = (width, self.get_content_width(container, self.app.size) > width,
                    self.get_content_height(container, self.app.size, width))
        if measured != self._steady:
            self._steady = measured
            self.refresh(layout=True)
