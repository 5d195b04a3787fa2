"""The dashboard's header line, composed as a pure function of the facts it shows.

The header is one line. When the terminal is too narrow for every item, items are dropped by
priority (the least important first) instead of wrapping, so words never break across lines or
run together: the fill (`183k / 200k (91%)`) and warnings stay longest, the bridge state goes
first. `compose_header` takes plain values, so it is tested without a running app.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ds4tui.text import clip, fmt_bytes, fmt_tokens, literal

def session_display_name(name: str | None, path: object, first_prompt: str | None = None) -> str:
    """The name ds4tui shows for a session everywhere (header, `sessions`, home screen, `map`): its
    `session_info` name, else its first prompt's first line (what Pi's own session list shows, and
    `ds4sessions.overview.summary.first_prompt`), else the file name without `.jsonl`."""
    from pathlib import Path

    return (name or "").strip() or (first_prompt or "").strip() or Path(str(path)).stem


def first_prompt_of(messages: object, limit: int = 80) -> str | None:
    """The first line of the first user message in `messages` (`ds4sessions.agents.common.first_prompt`)."""
    from ds4sessions.agents.common import first_prompt

    return first_prompt(messages or (), limit)  # type: ignore[arg-type]


SEPARATOR = " · "
"""Between two header items."""


@dataclass(frozen=True)
class HeaderItem:
    """One piece of the header: its text and its priority (0 = kept longest; higher numbers are
    dropped first when the line is too narrow)."""

    text: Text
    priority: int


@dataclass(frozen=True)
class HeaderFacts:
    """What the header says, as plain values.

    - `used`: tokens in context, the same number as the legend's total (`Calibrated.used`);
      None before the first snapshot; `window`: the context window (tokens, None: unknown);
    - `measured`: `used` is the provider's count (False: our estimate, marked "est.");
    - `model`: the model key (`provider/model`), `known_model`: it is in the model table;
    - `name`: the session's name (or file stem), `cwd`: the last folder of its working dir;
    - `status`: "loading", "empty" or "ok"; `empty_note`: text for an empty file;
    - `demo`, `paused`, `deleted`, `invalid_header`: badges; `problems`: counted diagnostics;
    - `bridge`: the bridge state text (`bridge: live`, ...; "" when unknown);
    - `reading`: (bytes read, bytes in the file) while a large file's first read is under way
      (the numbers are those of the part read so far); None once it is read;
    - `agent`: the agent's label ("Claude Code"; "" for the default agent, Pi: its name is the
      tool's own); `note`: the agent's own header item (Codex "64% left", Claude Code
      "autocompact in 120k"), "" without one.
    """

    used: int | None = None
    window: int | None = None
    measured: bool = False
    model: str | None = None
    known_model: bool = True
    name: str = ""
    cwd: str = ""
    status: str = "ok"
    empty_note: str = ""
    demo: bool = False
    paused: bool = False
    deleted: bool = False
    invalid_header: bool = False
    problems: int = 0
    bridge: str = ""
    reading: tuple[int, int] | None = None
    agent: str = ""
    note: str = ""
    as_of: str = ""
    """The scrubbed request's words ("as of request 57 · 14:02"), shown before the fill; "" live."""


def header_items(facts: HeaderFacts) -> list[HeaderItem]:
    """The header's items in display order, each with its priority."""
    items = [HeaderItem(Text("ds4tui", style="bold"), 0)]
    if facts.agent:
        items.append(HeaderItem(Text(literal(facts.agent, keep_newlines=False), style="bold cyan"), 1))
    if facts.demo:
        items.append(HeaderItem(Text("[demo]", style="bold reverse"), 0))  # never dropped: not a real session
    if facts.status == "loading":
        items.append(HeaderItem(Text("reading the session file…"), 0))
        return items
    if facts.status == "empty":
        style = "bold yellow" if facts.problems else "dim"  # (a file of bad lines is not an empty session)
        items.append(HeaderItem(Text(facts.empty_note or "empty session: waiting for Pi to write", style=style), 0))
        return items
    percent = None
    if facts.reading is not None:
        done, total = facts.reading
        percent = int(100 * done / total) if total else 100
        items.append(HeaderItem(Text(f"reading {percent}% of {fmt_bytes(total)}…", style="bold yellow"), 0))
    if facts.deleted:
        items.append(HeaderItem(Text("file deleted", style="bold red"), 0))
    if facts.paused:
        items.append(HeaderItem(Text("paused", style="bold yellow"), 0))
    if facts.as_of:
        items.append(HeaderItem(Text(facts.as_of, style="bold reverse magenta"), 0))
    if facts.used is not None:
        fill = Text()
        fill.append(fmt_tokens(facts.used), style="bold")
        if facts.window:
            fill.append(f" / {fmt_tokens(facts.window)} ({100 * facts.used / facts.window:.0f}%)")
        if not facts.measured:
            fill.append(" est.", style="dim")
        if percent is not None:  # (the session as it was at that byte of the file, not its end: issue 36)
            fill.append(f" as at {percent}%", style="yellow")
        items.append(HeaderItem(fill, 0))
    if facts.note:
        items.append(HeaderItem(Text(literal(facts.note, keep_newlines=False)), 2))
    if facts.invalid_header:
        items.append(HeaderItem(Text("header invalid (read-only salvage)", style="bold red"), 1))
    if facts.problems:
        items.append(HeaderItem(Text(f"⚠ {facts.problems} problem{'' if facts.problems == 1 else 's'} (d)", style="yellow"), 2))
    items.append(HeaderItem(Text(facts.model or "model unknown", style="" if facts.known_model else "yellow"), 3))
    if facts.name:
        items.append(HeaderItem(Text(clip(literal(facts.name, keep_newlines=False), 40)), 4))
    if facts.cwd:
        items.append(HeaderItem(Text(f"({clip(literal(facts.cwd, keep_newlines=False), 30)})", style="dim"), 6))
    if facts.bridge:
        items.append(HeaderItem(Text(facts.bridge, style="bold green" if facts.bridge.endswith("live") else "dim"), 5))
    return items


def fit_items(items: list[HeaderItem], width: int) -> Text:
    """Join `items` with `SEPARATOR`, dropping the highest-priority-number items (the last of
    equals first) until the line fits in `width` cells; a lone item still too long is cut with
    "…". The result never contains a newline."""
    kept = list(items)
    line = _join(kept)
    while line.cell_len > width and len(kept) > 1:
        worst = max(range(len(kept)), key=lambda i: (kept[i].priority, i))
        if kept[worst].priority == 0 and all(item.priority == 0 for item in kept):
            break
        del kept[worst]
        line = _join(kept)
    if line.cell_len > width:
        line.truncate(max(width - 1, 0))
        line.append("…")
    return line


def compose_header(facts: HeaderFacts, width: int) -> Text:
    """The header line for `facts` in `width` cells (see `fit_items`), with a leading space."""
    line = Text(" ")
    line.append_text(fit_items(header_items(facts), max(width - 1, 1)))
    return line


def _join(items: list[HeaderItem]) -> Text:
    line = Text()
    for index, item in enumerate(items):
        if index:
            line.append(SEPARATOR)
        line.append_text(item.text)
    return line
