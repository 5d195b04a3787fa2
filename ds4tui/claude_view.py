"""A small read-only live view of one Claude Code transcript (until the main dashboard reads
agent-neutral `Conversation`s): Claude Code's `/context` categories, "N tokens until
autocompact", the prompt-cache countdown (ticking while the agent is idle) and each request's
cache-read share with its miss cause.

The file is tailed by a 1 s timer: complete lines only (a torn last line waits), fed to the
plug-in's incremental `ClaudeReader`; a file truncated, rewritten or replaced is read again from
the start (`ClaudeTail`). Nothing is
ever written to the transcript. Keys (`ds4tui.screens.view_keys`, as in the dashboard): `o` the
home screen, `?` help, `r` re-read from the start, `q` quit.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static

from ds4core.epoch import dated_ahead, fmt_gap
from ds4sessions.agents.claude.agent import ClaudeCodeAgent
from ds4sessions.agents.claude.reader import MAX_LINE_BYTES, ClaudeReader
from ds4sessions.agents.claude.views import cache_report, context_map, shown_category
from ds4sessions.ingest.tailer import Tailer
from ds4tui.screens.view_keys import SessionViewKeys
from ds4tui.text import fmt_tokens, literal

MAX_READ_BYTES = 8 * 1024 * 1024
"""Bytes read per poll (a huge transcript is caught up over several polls)."""


def fmt_seconds(seconds: float | None) -> str:
    """`m:ss` (or `h:mm:ss`) of a countdown; "—" when unknown."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class ClaudeTail:
    """Complete lines appended to a file since the last call, fed to a `ClaudeReader`.

    Read by a `Tailer` (`ds4sessions.ingest.tailer`): `poll()` reads at most `MAX_READ_BYTES`
    and `tailer.POLL_LINES` lines (a huge transcript is caught up over several polls, and a
    file of tiny lines never lands in memory at once) and returns True when lines were read or
    the reader started over. A file that was truncated, rewritten in place or replaced is read
    again from its start with a new reader; a deleted one keeps the last state, said in
    `error` until it appears again. OSError (unreadable) leaves the state as it was and is
    reported in `error`. `note` says why the file was read again from its start, until lines are
    appended to it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None
        self.note: str | None = None
        self._tailer = Tailer(path, cap=MAX_LINE_BYTES)  # (the reader's own cap, 64 MiB)
        self._gone = False
        self._reset()

    def _reset(self) -> None:
        self.reader: ClaudeReader = ClaudeCodeAgent().reader(self.path)
        self.offset = 0  # bytes read: just after the last complete line
        self.line_no = 0  # the last complete line's number

    def poll(self) -> bool:
        try:
            batch = self._tailer.poll(MAX_READ_BYTES)
        except OSError as error:
            self.error = f"cannot read {self.path}: {error.strerror or error}"
            return False
        changed = False
        if batch.reset == "deleted" or (self._gone and batch.reset is None):
            self._gone = True
            self.error = f"{self.path} was deleted: the last state read is shown"
            return False
        self._gone = False
        self.error = None
        if batch.reset is not None:  # truncated, rewritten, replaced, appeared
            self._reset()
            how = "created again" if batch.reset == "appeared" else batch.reset
            self.note = f"{self.path} was {how}: read again from its start"
            changed = True
        elif batch.lines:
            self.note = None
        if batch.lines:
            self.reader.feed(batch.lines)
            self.line_no = batch.lines[-1].line_no
            changed = True
        self.offset = batch.offset
        return changed


class ClaudeApp(SessionViewKeys):
    """Read-only live view of a Claude Code transcript (see module doc). Its result is the
    session chosen on the home screen (`o`), if any."""

    TITLE = "ds4tui · Claude Code"
    CSS = """
    #head { height: auto; padding: 0 1; }
    #body { height: 1fr; }
    #categories { width: auto; max-width: 50%; }
    #cat-table { width: auto; }
    #requests { width: 1fr; }
    #status { height: auto; padding: 0 1; color: $text-muted; }
    """
    def __init__(self, path: Path, env: Mapping[str, str] | None = None, watch: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.path = Path(path)
        self.env = dict(os.environ if env is None else env)
        self.watch = watch
        self.clock = clock
        self.tail = ClaudeTail(self.path)
        self.map: dict[str, Any] | None = None
        self.cache: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static("reading the transcript…", id="head")
        with Horizontal(id="body"):
            with Vertical(id="categories"):
                yield DataTable(id="cat-table", cursor_type="none", zebra_stripes=True)
            with Vertical(id="requests"):
                yield DataTable(id="req-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#cat-table", DataTable).add_columns("Category", "Tokens", "")
        self.query_one("#req-table", DataTable).add_columns("#", "time", "read share", "read", "write", "TTL", "cost", "miss")
        self.refresh_data(force=True)
        self.set_interval(1.0, self._tick)

    def action_refresh_session(self) -> None:
        """`r`: read the transcript again from its start and say how much was read."""
        self.tail = ClaudeTail(self.path)
        self.refresh_data(force=True)
        if self.tail.error:
            self.notify(literal(self.tail.error, keep_newlines=False), severity="error")
        else:
            self.reread_notice(self.tail.line_no, self.tail.offset)

    def _tick(self) -> None:
        self.refresh_data(force=False)

    def refresh_data(self, force: bool) -> None:
        """Read new lines (when watching or forced); redraw the tables when something changed,
        and the header (countdown) every time."""
        changed = self.tail.poll() if (self.watch or force) else False
        if changed or force or self.map is None:
            conv = self.tail.reader.conversation()
            self.map = context_map(conv, self.env)
            self.cache = cache_report(conv)
            self._draw_tables()
        self._draw_head()

    def _draw_tables(self) -> None:
        assert self.map is not None and self.cache is not None
        cats = self.query_one("#cat-table", DataTable)
        cats.clear()
        for term in self.map["categories"]:
            if not shown_category(term):
                continue
            cats.add_row(term["label"], fmt_tokens(term["tokens"]), "inferred" if term["inferred"] else "")
            for child in term.get("children", ()):
                if child["tokens"]:
                    cats.add_row("  " + child["label"], fmt_tokens(child["tokens"]), "")
                    for grand in child.get("children", ()):
                        cats.add_row("    " + literal(grand["label"], keep_newlines=False), fmt_tokens(grand["tokens"]), "")
        reqs = self.query_one("#req-table", DataTable)
        reqs.clear()
        for r in self.cache["history"]["records"]:
            share = "—" if r["share"] is None else f"{r['share']:.1%}"
            ttl = "1h" if r["cacheWrite1h"] and not r["cacheWrite5m"] else ("5m" if r["cacheWrite"] else "")
            when = time.strftime("%H:%M:%S", time.localtime(r["time"])) if r["time"] else "—"
            miss = f"{r['miss']['cause']} ({r['miss']['source']})" if r["miss"] else ""
            tag = " sub" if r["sidechain"] else (" syn" if r["synthetic"] else "")
            cost = "—" if r["costUsd"] is None else f"${r['costUsd']:.4f}"
            reqs.add_row(f"{r['index']}{tag}", when, share, fmt_tokens(r["cacheRead"]), fmt_tokens(r["cacheWrite"]), ttl, cost, miss)
        if reqs.row_count:
            reqs.move_cursor(row=reqs.row_count - 1)

    def _draw_head(self) -> None:
        if self.map is None or self.cache is None:
            return
        m, c = self.map, self.cache
        window = m["contextWindow"] or 1
        total = m["total"]
        ac = m["autocompact"]
        state = c["state"]
        now = self.clock()
        remaining = None if state["expiresAt"] is None else max(state["expiresAt"] - now, 0.0)
        ahead = dated_ahead(state["anchor"], now)
        if state["expiresAt"] is None:
            countdown = "cache: no write yet"
        elif ahead is not None:
            countdown = f"cache {state['tier']}: {ahead}"
        elif remaining:
            countdown = f"cache {state['tier']}: {fmt_seconds(remaining)} left"
        else:
            countdown = f"cache {state['tier']}: expired {fmt_gap(now - state['expiresAt'])} ago"
        until = f"{fmt_tokens(ac['tokensUntil'])} tokens until autocompact" if ac["enabled"] else "autocompact off"
        title = literal(m["title"] or self.path.name, keep_newlines=False)
        lines = [
            f"[b]{title}[/b] · {m['model'] or 'model unknown'} · claude-code (read-only)",
            f"{fmt_tokens(total)} / {fmt_tokens(window)} ({100 * total / window:.0f}%)"
            + (" estimated" if m["totalSource"] != "provider" else "")
            + (f" ({fmt_tokens(m['provider']['contextTokens'])} reported + {fmt_tokens(m['laterEstimate'])} est. since the last reply)"
               if m["totalSource"] == "provider" and m["laterEstimate"] else "")
            + f" · {until} (at {fmt_tokens(ac['threshold'])}) · {countdown}",
        ]
        self.query_one("#head", Static).update("\n".join(lines))
        problems = len(m["problems"])
        status = [f"{len(c['history']['records'])} requests, {len(c['history']['misses'])} misses"]
        if problems:
            status.append(f"⚠ {problems} problem{'' if problems == 1 else 's'}")
        for said in (self.tail.error, self.tail.note):
            if said:
                status.append(literal(said, keep_newlines=False))
        self.query_one("#status", Static).update(" · ".join(status))
