"""Showing session content literally, and formatting numbers.

Session content is data, never markup or terminal control: Rich markup brackets are shown as
typed (we only ever build `rich.text.Text` from content, never parse it as markup), and control
characters — ESC and the rest of C0/C1, DEL — become visible escapes such as `\\x1b`, so an ANSI
sequence in a tool result cannot move the cursor, retitle the terminal or change colours.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from ds4core.tokens import fmt_tokens  # noqa: F401  (the one token formatter: the sessions layer words numbers too)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def literal(value: object, *, keep_newlines: bool = True) -> str:
    """`value` as text with control characters escaped (tabs kept; newlines kept unless
    `keep_newlines` is False, then shown as `⏎`). Bidi overrides are escaped too."""
    text = value if isinstance(value, str) else str(value)
    text = _CONTROL.sub(_escape, text)
    if not keep_newlines:
        text = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "\\x0d")
    else:
        text = text.replace("\r", "\\x0d")
    return text


def literal_text(value: object, style: str = "", *, keep_newlines: bool = True) -> Text:
    """A Rich `Text` of `literal(value)`: no markup parsing, no control characters."""
    return Text(literal(value, keep_newlines=keep_newlines), style=style)


def clip(text: str, width: int) -> str:
    """`text` in at most `width` terminal cells: unchanged when it fits, else cut and ended with
    "…", so a cut never passes for the whole (wide characters count two cells). The one helper
    for cutting labels, titles, reasons and table cells."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[: max(width, 0)]
    return set_cell_size(text, width - 1).rstrip() + "…"


def fmt_bytes(n: int) -> str:
    """Human byte count: 512 B, 25.9 KiB, 30.1 MiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
