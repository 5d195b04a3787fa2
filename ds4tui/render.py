"""Rich renderables shared by the TUI and the `ds4tui map` command: category list, summary line."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ds4core.categories import Breakdown, CategoryRow
from ds4tui.palette import COLOURS, FILLED
from ds4tui.text import fmt_tokens, literal

MAX_CHILDREN = 30
"""Children shown under a category before "+N more (tokens)"."""


def _leader_line(label: str, value: str, width: int, indent: int, colour: str | None, note: str = "") -> Text:
    line = Text()
    if colour is not None:
        line.append(f"{FILLED} ", style=colour)
    else:
        line.append("  ")
    line.append(" " * indent)
    label = literal(label, keep_newlines=False)
    room = width - 2 - indent - len(value) - (len(note) + 1 if note else 0) - 2
    if len(label) > room:
        label = label[: max(room - 1, 1)] + "…"
    line.append(label)
    dots = max(width - 2 - indent - len(label) - len(value) - (len(note) + 1 if note else 0) - 2, 1)
    line.append(" " + "." * dots + " ", style="dim")
    line.append(value, style="bold" if indent == 0 else "")
    if note:
        line.append(" " + note, style="italic dim")
    return line


def category_lines(breakdown: Breakdown, width: int = 46, max_children: int = MAX_CHILDREN) -> list[Text]:
    """The category list with dotted leaders: one line per category, its children (sorted by
    weight) indented below, at most `max_children` then "+N more (tokens)"."""
    lines: list[Text] = []
    for row in breakdown.rows:
        lines.append(_leader_line(row.label, fmt_tokens(row.tokens), width, 0, COLOURS.get(row.id)))
        shown = row.children[:max_children]
        for name, tokens in shown:
            lines.append(_leader_line(name, fmt_tokens(tokens), width, 2, None))
        rest = row.children[max_children:]
        if rest:
            more = sum(t for _, t in rest)
            lines.append(Text(f"    +{len(rest)} more ({fmt_tokens(more)})", style="dim"))
    return lines


def legend_lines(rows: Any, width: int = 46, max_children: int = MAX_CHILDREN) -> list[Text]:
    """`category_lines` for the view model's legend rows (`ds4tui.viewmodel.CategoryModel`:
    each figure a `Tokens`, printed as `Tokens.shown`)."""
    lines: list[Text] = []
    for row in rows:
        lines.append(_leader_line(row.label, fmt_tokens(row.tokens.shown), width, 0, COLOURS.get(row.id)))
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


def rows_json(rows: list[CategoryRow]) -> list[dict[str, Any]]:
    """Category rows as JSON-ready dicts (tokens as integers)."""
    return [
        {"id": r.id, "label": r.label, "tokens": r.tokens, "inferred": r.inferred,
         "children": [{"name": n, "tokens": t} for n, t in r.children]}
        for r in rows
    ]


def problem_lines(snap: Any) -> list[str]:
    """Every problem worth a user's attention, one line each: the reader's diagnostics (with
    line numbers), a torn last line, and the context builder's warnings (metadata leaf, unknown
    entry types, cycles, unpaired tool calls)."""
    lines: list[str] = []
    summary = snap.reader.diagnostics.summary()
    if summary != "no problems":
        lines += summary.splitlines()
    lines += [f"{w.kind}: {w.message}" for w in snap.context.warnings]
    return lines


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
