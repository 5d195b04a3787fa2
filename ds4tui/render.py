"""Rich renderables shared by the TUI and the `ds4tui map` command: category list, summary line."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rich.text import Text

from ds4core.categories import Breakdown, Calibrated, CategoryRow, MapIndex, calibrated, tokens_per_cell
from ds4sessions.ingest.snapshot_json import problem_lines, rows_json  # noqa: F401  (moved; kept importable here)
from ds4tui.palette import COLOURS, FILLED, FREE, colour_of
from ds4tui.text import clip, fmt_tokens, literal

MAX_CHILDREN = 30
"""Children shown under a category before "+N more (tokens)"."""


def calibrated_of(snap: Any) -> Calibrated:
    """One number per category for a snapshot: its best breakdown calibrated to the provider's
    count for the context now (`ProviderView.context_tokens`) when there is one. The header,
    the legend, the map and `ds4tui map` all show these numbers."""
    provider = getattr(snap, "provider", None)
    return calibrated(snap.best, provider.context_tokens if provider is not None else None)


def _pct(value: float) -> str:
    if value <= 0:
        return "0%"
    if value < 0.1:
        return "<0.1%"
    return f"{value:.1f}%"


@lru_cache(maxsize=512)
def _leader_line(label: str, value: str, width: int, indent: int, colour: str | None, note: str = "") -> Text:
    """One dotted-leader line ("■ Tools ........ 14.7k  7.3%"). Kept per distinct arguments: an
    append changes a few categories' figures, so the legend's other lines are the same `Text`
    objects as before (the legend redraws only what changed). Callers must not modify it."""
    line = Text()
    if colour is not None:
        line.append(f"{FILLED} ", style=colour)
    else:
        line.append("  ")
    line.append(" " * indent)
    label = literal(label, keep_newlines=False)
    room = width - 2 - indent - len(value) - (len(note) + 1 if note else 0) - 2
    label = clip(label, max(room, 2))
    line.append(label)
    dots = max(width - 2 - indent - len(label) - len(value) - (len(note) + 1 if note else 0) - 2, 1)
    line.append(" " + "." * dots + " ", style="dim")
    line.append(value, style="bold" if indent == 0 else "")
    if note:
        line.append(" " + note, style="italic dim")
    return line


def category_lines(
    breakdown: Breakdown | Calibrated, width: int = 46, max_children: int = MAX_CHILDREN, *, percent: bool = True,
    children: bool = True,
) -> list[Text]:
    """The category list with dotted leaders: one line per category with its tokens and, for a
    `Calibrated` list, its share of the window (as Claude Code's `/context`: "Tools … 14.7k
    7.3%"); its children (sorted by weight) indented below, at most `max_children` then
    "+N more (tokens)" (`children=False`: one line per category, no child lines)."""
    lines: list[Text] = []
    share = breakdown.percent if isinstance(breakdown, Calibrated) and percent else None
    source = breakdown.breakdown if isinstance(breakdown, Calibrated) else breakdown
    roles = dict(source.table.roles) if source is not None else {}
    for row in breakdown.rows:
        value = fmt_tokens(row.tokens)
        if share is not None:
            value = f"{value} {_pct(share(row.tokens)):>6}"
        lines.append(_leader_line(row.label, value, width, 0, colour_of(row.id, roles)))
        if not children:
            continue
        shown = row.children[:max_children]
        for name, tokens in shown:
            lines.append(_leader_line(name, fmt_tokens(tokens) + ("       " if share is not None else ""), width, 2, None))
        rest = row.children[max_children:]
        if rest:
            more = sum(t for _, t in rest)
            lines.append(Text(f"    +{len(rest)} more ({fmt_tokens(more)})", style="dim"))
    return lines


def fitted_category_lines(cal: Calibrated, *, width: int, room: int | None, extra: list[Text],
                          max_children: int = MAX_CHILDREN, wrap: int | None = None) -> list[Text]:
    """The category list (`category_lines`) and `extra` lines below it, fitted to `room` lines
    (None: no limit). Where space is short, in order: the children go (each row one line), then
    the `extra` lines that do not fit, then the rows are sorted by size, the largest first, with one last line
    counting the smaller ones ("+3 smaller: 1.2k"); free space is a row like the others, so a
    full window shows what fills it and an empty one how much is left. `room` counts screen
    rows: a line wider than `wrap` cells (the panel's width; default `width` + 2) takes more."""
    panel = wrap or width + 2

    def rows(lines: list[Text]) -> int:
        return sum(max(1, -(-line.cell_len // max(panel, 1))) for line in lines)

    full = category_lines(cal, width=width, max_children=max_children) + extra
    if room is None or rows(full) <= room:
        return full
    bare = category_lines(cal, width=width, max_children=0, children=False)
    if rows(bare) <= room:
        lines, left = list(bare), room - rows(bare)
        for line in extra:  # the extra lines that fit, in order
            if rows([line]) > left:
                break
            lines.append(line)
            left -= rows([line])
        return lines
    keep = max(room - 1, 1)
    ranked = sorted(range(len(cal.rows)), key=lambda i: -cal.rows[i].tokens)
    shown = sorted(ranked[:keep])  # the largest, in the table's order
    rest = ranked[keep:]
    lines = [bare[i] for i in shown]
    if rest:
        tokens = sum(cal.rows[i].tokens for i in rest)
        lines.append(Text(f"+{len(rest)} smaller: {fmt_tokens(tokens)}", style="dim"))
    return lines


def calibration_line(cal: Calibrated, counter: str) -> Text:
    """How the numbers above were made: "provider 182.9k · estimate 205.8k (cl100k) ×0.89",
    or "estimate 5.1k (cl100k) · no provider count yet"."""
    text = Text()
    if cal.source == "provider":
        text.append(f"provider {fmt_tokens(cal.used)}")
        text.append(f" · estimate {fmt_tokens(cal.estimate)} ({counter})", style="dim")
        if cal.estimate and abs(cal.factor - 1) >= 0.005:
            text.append(f" ×{cal.factor:.2f}", style="dim")
    else:
        text.append(f"estimate {fmt_tokens(cal.estimate)} ({counter})")
        text.append(" · no provider count yet", style="dim")
    if cal.capped:
        text.append(" · estimate above the window, capped", style="yellow")
    return text


def legend_lines(rows: Any, width: int = 46, max_children: int = MAX_CHILDREN, roles: Any = None) -> list[Text]:
    """`category_lines` for the view model's legend rows (`ds4tui.viewmodel.CategoryModel`:
    each figure a `Tokens`, printed as `Tokens.shown`); `roles`: category id → colour role."""
    lines: list[Text] = []
    for row in rows:
        lines.append(_leader_line(row.label, fmt_tokens(row.tokens.shown), width, 0, colour_of(row.id, roles)))
        for name, tokens in row.children[:max_children]:
            lines.append(_leader_line(name, fmt_tokens(tokens.shown), width, 2, None))
        rest = row.children[max_children:]
        if rest:
            more = sum(t.shown for _, t in rest)
            lines.append(Text(f"    +{len(rest)} more ({fmt_tokens(more)})", style="dim"))
    return lines


def summary_line(estimate: int, provider: Any, counter: str) -> Text:
    """"est. 82.2k (cl100k) · provider 84.2k · ×1.02": our estimate, the provider's prompt
    tokens at the anchor reply and their ratio provider/estimate (provider part when known)."""
    text = Text()
    text.append(f"est. {fmt_tokens(estimate)} ({counter})")
    if provider is not None:
        text.append(f" · provider {fmt_tokens(provider.prompt_tokens)}")
        if provider.ratio:
            text.append(f" · ×{provider.ratio:.2f}")
    else:
        text.append(" · provider —", style="dim")
    return text


def overshoot_line(estimate: int, provider: Any) -> Text | None:
    """When our estimate is above the provider's count for the context, say so: the category
    rows are estimates, the header and free space use the provider's count (the truth)."""
    if provider is None or estimate <= provider.context_tokens:
        return None
    over = estimate - provider.context_tokens
    return Text(
        f"categories are estimates, {fmt_tokens(over)} above the provider's {fmt_tokens(provider.context_tokens)}; "
        "free space uses the provider's count",
        style="yellow",
    )


def grid_lines(cal: Calibrated, width: int = 50, rows: int = 20) -> tuple[list[Text], int]:
    """The pixel map as text, the same layout as the dashboard's map (agent view, no cache
    overlay): `width` cells per line, at most `rows` lines, one cell = the returned number of
    tokens (1-2-5 series). Needs a window (`cal.window`, else `cal.used`)."""
    window = cal.window or max(cal.used, 1)
    per_cell = tokens_per_cell(window, width * rows)
    index = MapIndex.of(cal.breakdown.segments) if cal.breakdown is not None else MapIndex()
    roles = dict(cal.breakdown.table.roles) if cal.breakdown is not None else {}
    cells = index.layout(cal.totals, -(-window // per_cell), per_cell)
    lines: list[Text] = []
    for start in range(0, len(cells), width):
        line = Text()
        for cell in cells[start : start + width]:
            free = cell.category == "free"
            line.append(FREE if free else FILLED, style=colour_of(cell.category, roles) or "#808080")
        lines.append(line)
    return lines, per_cell
