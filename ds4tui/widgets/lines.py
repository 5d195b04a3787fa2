"""`TextLines`: a panel of Rich `Text` lines drawn with Textual's Line API, one cached `Strip` per line.

The header, legend, inspector and countdown change a few characters on every appended line. As
`Static`s, each update re-rendered their whole content through Rich (the legend ~5 ms, twice per
append at 1,000 turns) and marked every line dirty, so the compositor redrew them whole. Here a
line is rendered once per distinct `Text` (its plain text, spans, style and justification, at the
current width) and kept; an update compares the new strips with the shown ones and repaints only
the lines that differ. The screen is laid out again only when the number of lines changes (or,
for a panel whose CSS width is `auto`, the widest line's width).

`update(content)` takes what `Static.update` took for these panels: a `str`, a `Text`, or a
`rich.console.Group` of `Text`s (`content` gives it back). With `wrap=True` (the
default) a line longer than the width wraps, as in a `Static`; `wrap=False` crops it.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

_CACHE_LIMIT = 2048
"""Rendered lines kept per widget (older ones are dropped all at once past it)."""


def _texts_of(content: Any) -> list[Text]:
    """The `Text` lines of `content` (str, Text, Group of them, or a list/tuple of them);
    anything else is shown as its `str`."""
    if isinstance(content, Text):
        return [content]
    if isinstance(content, str):
        return [Text(content)] if content else []
    if isinstance(content, Group):
        return [t for item in content.renderables for t in _texts_of(item)]
    if isinstance(content, (list, tuple)):
        return [t for item in content for t in _texts_of(item)]
    return [Text(str(content))]


def _key(text: Text) -> tuple[Any, ...]:
    """What a rendered line depends on, besides the width and the widget's style."""
    return (text.plain, tuple(text.spans), text.style, text.justify, text.overflow, text.no_wrap, text.end)


class TextLines(Widget):
    """Lines of text (`update(content)`), each rendered once and repainted only when it
    changes; height is the number of rendered lines (CSS `height: auto`)."""

    DEFAULT_CSS = """
    TextLines { height: auto; }
    """

    def __init__(self, content: Any = "", *, wrap: bool = True, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._texts: list[Text] = _texts_of(content)
        self._wrap = wrap
        self._strips: list[Strip] = []
        self._rendered_width = -1
        self._cache: dict[tuple[Any, ...], list[Strip]] = {}
        self._base: Style | None = None
        self._widest = -1  # an auto-width panel (the countdown) is laid out again when it changes

    # --- content -----------------------------------------------------------------------------

    @property
    def content(self) -> Text | Group:
        """The lines shown: the `Text` of a one-line panel (as `Static.update(text)` kept it),
        else a Rich `Group` of the `Text`s."""
        return self._texts[0] if len(self._texts) == 1 else Group(*self._texts)

    @property
    def texts(self) -> tuple[Text, ...]:
        """The lines shown."""
        return tuple(self._texts)

    def update(self, content: Any = "", *, layout: bool | None = None) -> None:
        """Show `content` (see the module doc); repaint the lines that changed. `layout`: True
        forces a layout of the screen, False skips it, None (default): only when the number of
        rendered lines changed."""
        self._texts = _texts_of(content)
        width = self._width()
        if width <= 0 or not self.is_mounted:
            self._rendered_width = -1  # rendered when laid out
            self.refresh(layout=layout is not False)
            return
        old = self._strips
        new = self._render_all(width)
        self._strips, self._rendered_width = new, width
        widest = max((t.cell_len for t in self._texts), default=0)
        resized = widest != self._widest and self.styles.width is not None and self.styles.width.is_auto
        self._widest = widest
        if layout or (layout is None and (len(new) != len(old) or resized)):
            self.refresh(layout=True)
            return
        if len(new) != len(old):
            self.refresh()
            return
        for y, (a, b) in enumerate(zip(old, new)):
            if a is not b:
                self.refresh(Region(0, y, self.size.width, 1))

    # --- rendering ---------------------------------------------------------------------------

    def _width(self) -> int:
        return self.content_region.width if self.is_mounted else 0

    def _style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def _render_all(self, width: int) -> list[Strip]:
        strips: list[Strip] = []
        for text in self._texts:
            strips.extend(self._render(text, width))
        return strips

    def _render(self, text: Text, width: int) -> list[Strip]:
        key = (_key(text), width)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        console = self.app.console
        base = self._style()
        plain = text.plain
        if text.cell_len <= width and "\n" not in plain and text.justify in (None, "default", "left"):
            # the usual line: it fits, so no wrapping or cropping: its segments directly
            if text.spans:  # `Text.render` applies the text's own style under its spans
                segments = [Segment(seg.text, base + seg.style if seg.style else base) for seg in text.render(console, end="")]
            else:  # ... but not to a text without spans: its style is the whole line's
                own = console.get_style(text.style, default=None) if text.style else None
                segments = [Segment(plain, base + own if own else base)] if plain else []
            strips = [Strip(segments).adjust_cell_length(width, base)]
            self._cache[key] = strips
            return strips
        options = console.options.update(width=width, no_wrap=not self._wrap or text.no_wrap, highlight=False)
        if not self._wrap and not text.overflow:
            options = options.update(overflow="crop")
        lines = console.render_lines(text, options, pad=False, new_lines=False)
        strips = [Strip(Segment.apply_style(line, base)).adjust_cell_length(width, base) for line in lines] or [Strip.blank(width, base)]
        self._cache[key] = strips
        return strips

    def render_line(self, y: int) -> Strip:
        """Line `y` (cached)."""
        width = self._width()
        if width != self._rendered_width:
            self._strips, self._rendered_width = self._render_all(width), width
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self._style())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Lines of the content rendered at `width`."""
        if width <= 0:
            return len(self._texts)
        if width == self._rendered_width:
            return len(self._strips)
        return sum(len(self._render(t, width)) for t in self._texts)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        """The widest line's cells, at most the container's width when wrapping."""
        widest = max((t.cell_len for t in self._texts), default=0)
        return min(widest, container.width) if self._wrap else widest

    def notify_style_update(self) -> None:
        """Styles changed (theme, classes): render every line again."""
        super().notify_style_update()
        self._base = None
        self._cache.clear()
        self._rendered_width = -1

    def on_resize(self) -> None:
        """New width: lines are rendered again at it when drawn."""
        self._rendered_width = -1

