"""A read-only live view of one Codex rollout: `ds4tui PATH` on a `rollout-*.jsonl`.

Until the full dashboard reads the neutral model, this small Textual app tails the rollout
(`ds4sessions.ingest.tailer.Tailer`, polled every `POLL_SECONDS`), feeds the lines to the Codex
reader and shows the context by category, Codex's own count and "% left", the window note, the
cache history (cached share per request) and the rate limits. Steering is not offered (the
reason is shown). Keys (`ds4tui.screens.view_keys`, as in the dashboard): `o` the home screen,
`?` help, `r` re-read from the start, `q` quit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from ds4core.epoch import to_datetime

from ds4tui.screens.view_keys import SessionViewKeys
from ds4tui.text import fmt_tokens, literal

POLL_SECONDS = 1.0
"""Seconds between two polls of the rollout."""


def render_view(map_data: dict[str, Any], cache_data: dict[str, Any], read_only_reason: str) -> Group:
    """The view's renderable from `view.map_json` and `view.cache_json` objects."""
    parts: list[Any] = []
    ctx, window = map_data["contextTokens"], map_data["contextWindow"]
    title = literal(map_data["title"] or map_data["path"], keep_newlines=False)
    parts.append(Text(f"{title} · {map_data['model'] or 'model unknown'} · Codex (read-only)", style="bold"))
    if ctx is not None and window:
        parts.append(Text(f"context {fmt_tokens(ctx)} / {fmt_tokens(window)} · {map_data['percentLeft']}% left "
                          "(Codex's formula, BASELINE_TOKENS 12,000)"))
    else:
        est = map_data.get("codexEstimate")
        parts.append(Text(f"context: {map_data['contextState']}" + (f" (Codex estimate {fmt_tokens(est)})" if est else ""),
                          style="yellow"))
    table = Table(box=None, show_header=True, header_style="bold")
    table.add_column("category")
    table.add_column("tokens", justify="right")
    for row in map_data["categories"]:
        table.add_row(row["label"], fmt_tokens(row["tokens"]))
    parts.append(table)
    limits = (map_data.get("rateLimits") or {}).get("limits") or {}
    for name in ("primary", "secondary"):
        window_data = limits.get(name)
        if isinstance(window_data, dict) and window_data.get("used_percent") is not None:
            reset = window_data.get("resets_at")
            at = to_datetime(reset, utc=True) if isinstance(reset, (int, float)) else None
            when = at.strftime("%Y-%m-%d %H:%M UTC") if at is not None else "?"
            parts.append(Text(f"rate limit {name}: {window_data['used_percent']}% used of {window_data.get('window_minutes')} min, "
                              f"resets {when}"))
    state = cache_data["state"]
    parts.append(Text(f"cache: {state['words']} — {literal(state['reason'], keep_newlines=False)}"
                      + (f" [{state['label']}]" if state.get("label") else "")))
    history = Table(box=None, show_header=True, header_style="bold")
    for column in ("#", "cached share", "cache read", "input", "output"):
        history.add_column(column, justify="right")
    for record in cache_data["history"]["records"][-12:]:
        share = f"{record['share']:.1%}" if record["share"] is not None else "—"
        history.add_row(str(record["number"]), share + (" (compaction)" if record["compactionCall"] else ""),
                        fmt_tokens(record["usage"]["cacheRead"]), fmt_tokens(record["usage"]["input"]),
                        fmt_tokens(record["usage"]["output"]))
    parts.append(history)
    for line in map_data["problems"]:
        parts.append(Text("note: " + literal(line, keep_newlines=False), style="dim"))
    parts.append(Text(f"steering: off — {read_only_reason}", style="dim"))
    return Group(*parts)


class CodexApp(SessionViewKeys):
    """Tails one rollout and shows `render_view` of its latest state. Its result is the session
    chosen on the home screen (`o`), if any.

    The view model is `map_data` / `cache_data`: the very objects `ds4tui map --json` and
    `ds4tui cache --json` print for the same file (`ds4sessions.agents.codex.view.map_json`,
    `cache_json`), with the same token counter (`exact`: cl100k, the commands' default; False:
    chars-v1, as `--fast`). Before, the app counted with chars-v1 while `map --json` counted with
    cl100k, so the two showed different estimates and "unattributed" rows for one rollout.
    """

    TITLE = "ds4tui · Codex"

    def __init__(self, path: Path, exact: bool = True) -> None:
        super().__init__()
        self.exact = exact
        self.map_data: dict[str, Any] | None = None
        self.cache_data: dict[str, Any] | None = None
        from ds4sessions.agents.registry import agent_named
        from ds4sessions.ingest.tailer import Tailer

        self.path = Path(path)
        agent = agent_named("codex")
        assert agent is not None
        self.agent = agent
        self.tailer = Tailer(self.path)
        self.reader = agent.reader(self.path)
        self.updates = 0
        self.lines_read = 0
        self.bytes_read = 0
        self.rendered: Group | None = None
        self.map_state: Any = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static("reading the rollout…", id="codex-view")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_view()
        self.set_interval(POLL_SECONDS, self.refresh_view)

    def action_refresh_session(self) -> None:
        """`r`: read the rollout again from its start and say how much was read."""
        from ds4sessions.ingest.tailer import Tailer

        self.tailer = Tailer(self.path)
        self.reader = self.agent.reader(self.path)
        self.map_state = None
        self.updates = self.lines_read = 0
        self.refresh_view()
        self.reread_notice(self.lines_read, self.bytes_read)

    def refresh_view(self) -> None:
        """Poll the rollout; on new lines re-read the state and redraw."""
        from ds4sessions.agents.codex import view

        new = False
        for batch in self.tailer.polls():  # (a large rollout: one slice of lines in memory at a time)
            if batch.reset is not None and batch.reset != "deleted":
                self.reader = self.agent.reader(self.path)
            if batch.reset is not None:
                self.lines_read = 0
            self.lines_read += len(batch.lines)
            self.bytes_read = batch.offset
            if batch.lines:
                new = True
                self.reader.feed(batch.lines)  # (tailer lines are (line_no, offset, raw) tuples)
        if not new and self.updates:
            return
        conv = self.reader.conversation()
        at = conv.extra.get("lastTime") or 0.0
        if self.map_state is None:
            self.map_state = view.MapState(exact=self.exact)
        self.map_data = view.map_json(conv, state=self.map_state)
        self.cache_data = view.cache_json(conv, at, view.configured_retention())
        renderable = render_view(self.map_data, self.cache_data, conv.capabilities.read_only_reason)
        self.rendered = renderable
        self.query_one("#codex-view", Static).update(renderable)
        self.updates += 1
