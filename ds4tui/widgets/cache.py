"""Prompt-cache widgets: the live `CacheCountdown` and the `CachePanel` (history, misses, cost
check, bridge request metadata, DS4's cache-aware decision). Self-contained; fed with `ds4sessions.derive.cache.CacheView`.

Everything that comes from the session (entry ids, model names, miss details naming entries) is
shown through `ds4tui.text.literal`, never parsed as markup.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static  # noqa: F401

from ds4core.epoch import to_datetime
from ds4tui.widgets.lines import TextLines
from ds4tui.widgets.steady import SteadyStatic

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the derive stages load after the first paint
    from ds4core.cache_policy import CandidateEpoch, GateCheck
    from ds4core.cache_state import CacheState, RequestRecord
    from ds4sessions.derive.cache import CacheView, DecisionView
from ds4tui.text import fmt_tokens, literal

#: Colour per cache status; the words are always shown too.
STATUS_STYLE = {
    "warm": "bold #87d787",
    "expiring": "bold #d7af5f",
    "cold": "bold #5fafff",
    "unknown": "#8a8f98",
}
STATUS_GLYPH = {"warm": "●", "expiring": "◐", "cold": "○", "unknown": "?"}
SPARK = "▁▂▃▄▅▆▇█"


def _clock_time(seconds: float | None) -> str:
    when = to_datetime(seconds) if seconds is not None else None
    return when.strftime("%H:%M:%S") if when is not None else f"{'—':<8}"  # (as wide as a time: the columns stay)


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:.6f}".rstrip("0").rstrip(".") if value else "$0"


class CacheCountdown(TextLines):
    """The cache state of the current model, ticking every second even when the session is idle.

    Line 1: glyph, status in words and the countdown (`● warm · 4:12 left`), coloured by status;
    line 2: why (lifetime and tier, or why there is no countdown). `now` is the clock (epoch
    seconds; inject one in tests). With `bell` / `notify`, the app rings the terminal bell /
    shows a notification once when a cache crosses the expiring threshold (once per expiry time).
    """

    DEFAULT_CSS = """
    CacheCountdown { height: auto; padding: 0 1; }
    """

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.time,
        bell: bool = False,
        notify: bool = False,
        compact: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__("", wrap=not compact, name=name, id=id, classes=classes)
        self._now = now
        self._bell = bell
        self._notify = notify
        self._compact = compact
        """One line (`● cache warm · 4:12 left`) with the reason as the tooltip (the header)."""
        self._view: CacheView | None = None
        self._why = ""  # what the missing cache view waits for (`waiting`)
        self._alerted_for: float | None = None
        self.state: CacheState | None = None
        """The state shown by the last tick (None before the first view)."""

    def on_mount(self) -> None:
        """Start the one-second tick."""
        self.set_interval(1.0, self.tick)
        self.tick()

    def show(self, view: CacheView | None) -> None:
        """Show `view` (None: no session yet) and redraw now."""
        self._view = view
        self.tick()

    def reset(self) -> None:
        """Forget the session's cache view (another session opens) and say it is waiting."""
        self._view, self._why, self._alerted_for, self.state = None, "", None, None
        self.tick()

    def waiting(self, why: str) -> None:
        """While there is no cache view yet: say what it waits for (`why`, e.g. "reading…" while
        a first read comes in slices, "after the plan…" while the derive pass runs); "" for the
        plain "waiting…"."""
        if why != self._why:
            self._why = why
            if self._view is None:
                self.tick()

    def tick(self) -> None:
        """Recompute the state at `now()` and redraw; alert once at the expiring threshold."""
        view = self._view
        if view is None:
            self.state = None
            why = self._why
            if getattr(self, "_compact", False):
                self.update(Text(f"cache: {why or 'waiting…'}", style="dim"))
            else:
                self.update(Text(f"prompt cache: {why or 'waiting for the session…'}", style="dim"))
            return
        state = view.state_at(self._now())
        self.state = state
        line = Text()
        line.append(f"{STATUS_GLYPH[state.status]} ", style=STATUS_STYLE[state.status])
        line.append("cache ", style="bold")
        line.append(state.words, style=STATUS_STYLE[state.status])
        if getattr(self, "_compact", False):
            self.tooltip = literal(state.reason, keep_newlines=False)
            self.update(line)
        else:
            if view.model_key:
                line.append(f"  {literal(view.model_key, keep_newlines=False)}", style="dim")
            reason = Text(literal(state.reason, keep_newlines=False), style="dim")
            self.update(Group(line, reason))
        if state.status == "expiring" and state.expires_at_s != self._alerted_for:
            self._alerted_for = state.expires_at_s
            if self._bell:
                self.app.bell()
            if self._notify:
                self.notify(f"Prompt cache expires in {state.countdown}", title="ds4tui", severity="warning")


def _share_bar(share: float | None, width: int = 10) -> Text:
    if share is None:
        return Text("·" * width, style="dim")
    filled = round(share * width)
    return Text("█" * filled, style="#87d787") + Text("░" * (width - filled), style="#3a3a3a")


def _row(record: RequestRecord) -> Text:
    usage = record.event.usage
    text = Text()
    text.append(f"#{record.number:<4}", style="dim")
    text.append("  ")
    text.append(f"{_clock_time(record.event.time_s)} ")
    text.append_text(_share_bar(record.share))
    text.append(f" {record.share:6.1%}" if record.share is not None else "      —")
    text.append(f"  read {fmt_tokens(usage.cache_read):>6} write {fmt_tokens(usage.cache_write):>6}")
    text.append(f"  {_usd(record.price.catalog_usd):>10}")
    if record.event.kind == "cache_warm":
        text.append("  cache warm", style="dim")
    elif not record.event.counted:
        text.append("  aborted/error", style="dim")
    if record.miss is not None:
        text.append(f"  miss: {record.miss.cause}", style="bold #d75f5f")
    return text


def _sparkline(records: tuple[RequestRecord, ...], width: int) -> Text:
    text = Text()
    for record in records[-width:]:
        if record.share is None:
            text.append(" ")
            continue
        glyph = SPARK[min(len(SPARK) - 1, int(record.share * len(SPARK)))]
        text.append(glyph, style="bold #d75f5f" if record.cold else "#87d787")
    return text


def _epoch_cells(epoch: CandidateEpoch | None) -> list[str]:
    if epoch is None:
        return ["—"] * 6
    return [
        fmt_tokens(int(epoch.tail_tokens)),
        fmt_tokens(int(epoch.reusable_prefix_tokens)),
        _usd(epoch.cold.total),
        _usd(epoch.warm.total),
        _usd(epoch.epoch_cost),
        "sliding" if epoch.sliding else "stable",
    ]


def _gate(gate: GateCheck) -> Text:
    mark = Text("✓ " if gate.passed else "✗ ", style="#87d787" if gate.passed else "#d75f5f")
    value = gate.value
    shown = f"{value:.4g}" if isinstance(value, float) else str(value)
    if gate.name == "mode":
        detail = f"mode {shown} (needs auto)"
    else:
        detail = f"{gate.name} {shown} (min {gate.threshold})"
    return mark + Text(detail)


def decision_renderable(view: DecisionView) -> RenderableType:
    """DS4's decision as a table: nominal and extended side by side, gates, winner, hysteresis."""
    title = f"DS4 cache-aware policy · mode {view.mode}"
    if view.what_if:
        title += f" (what-if; your configuration says {view.configured_mode})"
    table = Table(title=title, title_justify="left", expand=False, show_edge=False, pad_edge=False)
    table.add_column("")
    table.add_column("nominal", justify="right")
    table.add_column("extended", justify="right")
    labels = ["tail tokens", "reusable prefix", "cold request", "warm request", "epoch cost", "plan"]
    for label, left, right in zip(labels, _epoch_cells(view.nominal), _epoch_cells(view.extended)):
        table.add_row(label, left, right)
    lines: list[RenderableType] = [table]
    comparison = view.comparison
    if comparison is not None:
        margin = comparison.improvement_ratio
        margin_text = f"{margin:+.1%}" if margin is not None else "—"
        lines.append(Text(
            f"winner {comparison.winner} · margin {margin_text} (needs > {comparison.minimum_improvement_ratio:.0%})"
            + ("" if view.compared_by_ds4 else " · DS4 does not compare now")
        ))
    if view.decision is not None:
        gates = Text("gates: ")
        for index, gate in enumerate(view.decision.gates):
            if index:
                gates.append("  ")
            gates.append_text(_gate(gate))
        lines.append(gates)
    h = view.hysteresis_after
    lines.append(Text(f"hysteresis: stick {'yes' if h.stick_extended else 'no'} · loss streak {h.loss_streak}"
                      f" · next request uses the {view.candidate} tail"))
    if view.note:
        lines.append(Text(literal(view.note, keep_newlines=False), style="yellow"))
    return Group(*lines)


def _bridge_line(view: CacheView) -> Text:
    """The bridge's request metadata: exact fixed tokens of the last request, lines matched."""
    line = Text("Bridge: ", style="bold")
    line.append(f"fixed tokens {view.bridge_fixed_tokens or 0:,}")
    line.append(" (system prompt + tools as Pi sent them in the last request, chars-v1)", style="dim")
    line.append(f" · {view.bridge_matched} of {len(view.history.records)} requests matched to "
                f"{view.bridge_requests} metadata lines", style="dim")
    return line


class CachePanel(SteadyStatic):
    """The cache tab: history chart (sparkline and bar rows of the cache-read share per request),
    miss explanations, cost cross-check, the bridge's request metadata (exact fixed tokens; only
    when the session has some) and DS4's decision (configured mode and the `auto` what-if).
    `rows` is how many recent requests get a bar row."""

    DEFAULT_CSS = """
    CachePanel { height: auto; padding: 0 1; }
    """

    def __init__(self, *, rows: int = 8, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__("", name=name, id=id, classes=classes)
        self.rows = rows

    def show(self, view: CacheView | None) -> None:
        """Redraw for `view` (None: nothing loaded yet)."""
        if view is None:
            self.update(Text("cache: waiting…" if getattr(self, "_compact", False) else "prompt cache: waiting for the session…", style="dim"))
            return
        self.update(Group(*self._parts(view)))

    def _parts(self, view: CacheView) -> list[RenderableType]:
        history = view.history
        records = history.records
        parts: list[RenderableType] = []
        head = Text("Cache history", style="bold")
        share = history.overall_share
        head.append(f" · {len(records)} requests · overall read share {share:.1%}" if share is not None
                    else f" · {len(records)} requests")
        parts.append(head)
        if records:
            parts.append(Text("share ") + _sparkline(records, max(10, (self.size.width or 80) - 8)))
            for record in records[-self.rows:]:
                parts.append(_row(record))
        misses = history.misses
        parts.append(Text(f"Misses ({len(misses)})", style="bold"))
        for record in misses[-self.rows:]:
            assert record.miss is not None
            line = Text(f"#{record.number:<4}  {_clock_time(record.event.time_s)} ")
            line.append(record.miss.cause, style="bold")
            line.append(" — " + literal(record.miss.detail, keep_newlines=False))
            parts.append(line)
        disagreements = history.disagreements
        who = _agent_name(view.agent)
        if disagreements:
            parts.append(Text(f"Cost check: {len(disagreements)} requests disagree with the catalog", style="bold yellow"))
            for record in disagreements[-self.rows:]:
                price = record.price
                parts.append(Text(
                    f"#{record.number:<4}  {who} recorded {_usd(price.recorded_usd)}, catalog {_usd(price.catalog_usd)}"
                    f" ({literal(price.pricing_source or '?', keep_newlines=False)})", style="yellow"))
        else:
            checked = sum(1 for r in records if r.price.agrees is not None)
            source = literal(view.pricing_source or "no prices", keep_newlines=False)
            if checked:
                parts.append(Text(f"Cost check: {who}'s recorded costs match the catalog ({checked} requests; {source})",
                                  style="dim"))
            else:  # (Claude Code, Codex, Gemini CLI record no cost per request; nothing was compared)
                parts.append(Text(f"Cost check: no recorded costs to check ({who} records none here; {source})",
                                  style="dim"))
        if view.bridge_fixed_tokens is not None:
            parts.append(_bridge_line(view))
        for decision in (view.decision, view.what_if):
            if decision is not None:
                parts.append(Text(""))
                parts.append(decision_renderable(decision))
        return parts


def _agent_name(agent: str) -> str:
    """The label of the agent `agent` (an id of `agents.base.AGENTS`) as the registry names it."""
    from ds4sessions.agents.registry import all_agents

    return next((getattr(a, "label", a.name) for a in all_agents() if a.name == agent), agent)
