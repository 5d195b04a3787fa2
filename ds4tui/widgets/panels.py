"""The dashboard's text panels: header line, category list, turn list, inspector, diagnostics."""

from __future__ import annotations

import json
from typing import Any, Mapping

from rich.console import Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static  # noqa: F401

from ds4tui.widgets.lines import TextLines
from ds4tui.widgets.steady import SteadyStatic

from ds4sessions.ingest.snapshot import Snapshot
from ds4tui.header import HeaderFacts, compose_header
from ds4tui.render import calibrated_of, calibration_line, category_lines, fitted_category_lines
from ds4tui.text import fmt_bytes, fmt_tokens, literal, literal_text
from ds4tui.widgets.turns import TurnList, plan_cell as _plan_cell  # noqa: F401  (the turn list lives in widgets.turns)
from ds4tui.viewmodel import HeaderModel, LegendModel, TurnRow, ViewModel, turn_times  # noqa: F401  (turn_times: kept importable here)

PREVIEW_CHARS = 2000
"""Characters of an entry's content shown in the inspector."""


def empty_note(file_size: int, problems: int) -> str:
    """The header's words for a file with no session entry yet: waiting for Pi when nothing in it
    went wrong, else what was read and how many problems (`d` lists them): bytes of random data
    or one oversized line are not "an empty session"."""
    if problems:
        return f"no session in this file ({fmt_bytes(file_size)}): {problems:,} problem{'' if problems == 1 else 's'} (d)"
    return f"empty session ({fmt_bytes(file_size)}): waiting for Pi to write"


def header_facts(snap: Snapshot | None, *, demo: bool, following: bool, bridge: str = "") -> HeaderFacts:
    """The header's facts for `snap` (None: nothing read yet): `facts_of` its view model's
    header (`used` is the calibrated total, the same number the legend adds up to)."""
    from ds4tui.viewmodel import header

    return facts_of(header(snap), demo=demo, following=following, bridge=bridge)


def facts_of(header: HeaderModel, *, demo: bool, following: bool, bridge: str = "") -> HeaderFacts:
    """The header's facts for the view model's `header` (the same as `header_facts` of its
    snapshot: `used` is the calibrated total, the legend's)."""
    if header.state == "loading":
        return HeaderFacts(status="loading", demo=demo, paused=not following)
    if header.state == "empty":
        return HeaderFacts(status="empty", empty_note=empty_note(header.file_size, header.problems),
                           problems=header.problems, demo=demo, paused=not following)
    return HeaderFacts(
        used=header.used,
        window=header.window,
        measured=header.measured,
        model=header.model_key,
        known_model=header.model_known,
        name=header.name,
        cwd=header.cwd_name,
        demo=demo,
        paused=not following,
        deleted=header.deleted,
        invalid_header=header.not_a_session,
        problems=header.problems,
        bridge=bridge,
        reading=header.reading,
        agent=header.agent,
        note=header.note,
        as_of=header.as_of,
    )


class SessionHeader(TextLines):
    """One line (never wrapped): fill (tokens / window) · model · session name (cwd) · badges ·
    the bridge state; items drop by priority when the line is narrow (`ds4tui.header`). Renders
    a `ds4tui.viewmodel.HeaderModel`."""

    _bridge: str = ""
    _last: tuple = ()

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(wrap=False, id=id, classes=classes)

    def set_bridge(self, text: str) -> None:
        """Show the ds4tui bridge state (from `ds4sessions.bridge.status(...).header`)."""
        if text != self._bridge:
            self._bridge = text
            if self._last:
                self.show(*self._last[:1], **self._last[1])

    def on_resize(self) -> None:
        """Re-fit the line to the new width."""
        if self._last:
            self.show(*self._last[:1], **self._last[1])

    def show(self, header: HeaderModel | None, *, demo: bool, following: bool) -> None:
        """Redraw for `header` (None: nothing loaded yet)."""
        header = header or HeaderModel("loading")
        self._last = (header, {"demo": demo, "following": following})
        facts = facts_of(header, demo=demo, following=following, bridge=self._bridge)
        self.update(compose_header(facts, self.size.width or 80))


class CategoryList(TextLines):
    """Categories with dotted leaders, tokens and share of the window (calibrated to the
    provider's count), then how the numbers were made (provider, estimate, ratio). Renders a
    `ds4tui.viewmodel.LegendModel`."""

    _legend: LegendModel | None = None
    _room: int | None = None

    def on_resize(self) -> None:
        """Re-fit the dotted leaders to the new width (and lay out again: the scroll bar of the
        legend's container follows the content's new size)."""
        if self._legend is not None:
            self.show(self._legend, layout=True)

    def show(self, legend: LegendModel | None, *, layout: bool | None = None) -> None:
        """Redraw for `legend` (None: nothing yet), its calibrated rows; `layout` as in
        `TextLines.update` (default: only when the number of lines changed)."""
        self._legend = legend
        if legend is None or legend.calibrated is None:
            self.update("", layout=layout)
            return
        cal = legend.calibrated
        width = max((self.size.width or 46) - 2, 24)  # room for a vertical scroll bar
        extra: list[Text] = []
        if legend.unknown_window:
            extra.append(Text(legend.unknown_window, style="yellow"))
        for note in legend.notes:
            extra.append(Text(literal(note, keep_newlines=False), style="dim"))
        extra.append(calibration_line(cal, legend.estimate.estimator))
        if legend.provider and legend.provider.later_messages:
            extra.append(Text(f"+{legend.provider.later_messages} messages since the last reply are estimated", style="dim"))
        elif legend.provider:
            # the same height either way: a legend that grows and shrinks by a line with every
            # reply would lay the whole screen out again each time
            extra.append(Text("every message is counted in the last reply's usage", style="dim"))
        self._room = self._available()
        lines = fitted_category_lines(cal, width=width, room=self._room, extra=extra, max_children=3,
                                      wrap=self.size.width or None)
        self.update(Group(*lines), layout=layout)

    def _available(self) -> int | None:
        """The lines the legend's panel shows without scrolling (None: not laid out yet)."""
        parent = self.parent
        height = parent.scrollable_content_region.height if isinstance(parent, Widget) else 0
        return height if height > 0 else None

    def refit(self) -> None:
        """Fit again when the panel's height changed (its container was resized)."""
        if self._legend is not None and self._available() != self._room:
            self.show(self._legend, layout=True)


class LegendScroll(VerticalScroll):
    """The legend's panel: tells its `CategoryList` to fit its new height when resized."""

    def on_resize(self) -> None:
        for legend in self.query(CategoryList):
            legend.refit()


def _content_preview(message: Mapping[str, Any]) -> str:
    """Readable text of a message's content: text, thinking, tool calls, images noted."""
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary", ""))
    if role == "bashExecution":
        return f"$ {message.get('command', '')}\n{message.get('output', '')}"
    content = message.get("content")
    out: list[str] = []
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    for block in content or ():
        if not isinstance(block, Mapping):
            out.append(json.dumps(block))
        elif block.get("type") == "text":
            out.append(str(block.get("text", "")))
        elif block.get("type") == "thinking":
            out.append("[thinking] " + str(block.get("thinking", "")))
        elif block.get("type") == "toolCall":
            out.append(f"→ {block.get('name')}({json.dumps(block.get('arguments'), ensure_ascii=False)})")
        elif block.get("type") == "image":
            out.append(f"[image {block.get('mimeType', '?')}, {len(str(block.get('data', '')))} base64 chars]")
        else:
            out.append(json.dumps(block, ensure_ascii=False))
    if role == "system" and isinstance(message.get("sections"), Mapping):
        out += [f"[{k}] {v}" for k, v in message["sections"].items() if isinstance(v, str)]
    if role == "system":
        out += [f"[tool] {t.get('name')}: {t.get('description', '')}" for t in message.get("toolsAdded") or () if isinstance(t, Mapping)]
    return "\n".join(out)


def _usage_flag(message: Mapping[str, Any]) -> str:
    """Why an assistant reply's usage does not measure the context (bad input B10), or ""."""
    from ds4core.usage import usage_of

    usage = usage_of(message)
    if usage.missing:
        return "no usage recorded: cost unknown (not $0.00)"
    if usage.partial:
        return f"{message.get('stopReason')} reply: partial usage, not a context measurement"
    if usage.is_zero:
        return "usage all zero: cost unknown (not $0.00), not a context measurement"
    return ""


class EntryInspector(TextLines):
    """The selected entry: id, type/role, tool, tokens by estimator, content preview."""

    def show_cell(self, snap: Snapshot, category: str, tokens_per_cell: int) -> None:
        """A cell that belongs to no entry: free space, unattributed or inferred system tokens."""
        cal = calibrated_of(snap)
        row = next((r for r in cal.rows if r.id == category), None)
        label = row.label if row is not None else snap.best.table.label(category)
        total = f"{fmt_tokens(row.tokens)} tokens in all ({cal.percent(row.tokens):.1f}% of the window)" if row else ""
        self.update(Group(
            Text(f"{label}", style="bold"),
            Text(f"one cell = {tokens_per_cell:,} tokens · {total}", style="dim"),
            Text("not an entry of the session" + (" (provider total − our estimate)" if category == "unattributed" else
                 " (space the agent keeps free)" if category in snap.best.table.reserved else "")),
        ))

    def show_entry(self, snap: Snapshot, entry_id: str) -> None:
        """Show a session entry that is not in the context (e.g. a retrieval source)."""
        self.update(Group(*_entry_inspector_text(snap, entry_id)))

    def show(self, snap: Snapshot, message_index: int | None) -> None:
        """Show context message `message_index` of `snap` (None: a hint)."""
        if message_index is None or not (0 <= message_index < len(snap.context.messages)):
            self.update(Text("Select a cell on the map or a turn to inspect its entry.", style="dim"))
            return
        message = snap.context.messages[message_index]
        entry_id = snap.context.message_entry_ids[message_index]
        entry = snap.reader.by_id.get(entry_id) if entry_id else None
        head = Text()
        head.append(f"entry {entry_id or '—'}", style="bold")
        head.append(f" · {message.get('role', '?')}")
        tool = message.get("toolName") or message.get("customType")
        if tool:
            head.append(f" · {literal(tool, keep_newlines=False)}")
        label = snap.context.labels.get(entry_id or "")
        if label:
            head.append(f" · label {literal(label, keep_newlines=False)}", style="magenta")
        if entry is not None and entry.line_no is not None:
            head.append(f" · line {entry.line_no}", style="dim")
        elif entry is not None and entry.type != "message":
            head.append(f" · {literal(entry.type, keep_newlines=False)}", style="dim")
        if snap.exact is snap.breakdown:  # an agent counted once, by its own estimator
            counts = f"tokens: {snap.best.counter} {_count_of(snap.best, message_index)}"
        else:
            counts = f"tokens: chars-v1 {_count_of(snap.breakdown, message_index)} · cl100k {_count_of(snap.exact, message_index)}"
        tokens = Text(counts, style="dim")
        cal = calibrated_of(snap)
        if cal.source == "provider" and cal.estimate and abs(cal.factor - 1) >= 0.005:
            raw = snap.best.message_tokens[message_index] if message_index < len(snap.best.message_tokens) else 0
            tokens.append(
                f" · raw estimate {fmt_tokens(raw)} ({snap.best.counter}) ×{cal.factor:.2f}"
                f" ≈ {fmt_tokens(round(raw * cal.factor))} as the map counts it",
                style="dim",
            )
        usage = message.get("usage") if message.get("role") == "assistant" else None
        lines = [head, tokens]
        request_for = getattr(snap.context, "request_for", None)
        if request_for is not None:  # an agent that records usage per request, not on its messages
            request = request_for(message_index)
            if request is not None:
                u = request.usage
                lines.append(Text(
                    f"request {request.index + 1}: input {u.input:,} · cache read {u.cache_read:,} · cache write "
                    f"{u.cache_write:,} · output {u.output:,}" + (" · synthetic (no provider reply)" if request.synthetic else ""),
                    style="dim"))
            usage = None
        elif message.get("role") == "assistant":
            flag = _usage_flag(message)
            if flag:
                lines.append(Text(flag, style="yellow"))
        if isinstance(usage, Mapping):
            lines.append(Text(
                f"usage: input {usage.get('input', 0)} · cache read {usage.get('cacheRead', 0)}"
                f" · cache write {usage.get('cacheWrite', 0)} · output {usage.get('output', 0)}"
                + (f" · {message.get('stopReason')}" if message.get("stopReason") else ""),
                style="dim",
            ))
        preview = _content_preview(message)
        more = len(preview) - PREVIEW_CHARS
        lines.append(literal_text(preview[:PREVIEW_CHARS]))
        if more > 0:
            lines.append(Text(f"… {more} more characters", style="dim"))
        self.update(Group(*lines))


def _count_of(breakdown: Any, index: int) -> str:
    """Message `index`'s tokens in `breakdown` (the snapshot's own counts: nothing is counted on
    the UI thread), or "…" while that breakdown is not computed yet."""
    if breakdown is None or index >= len(breakdown.message_tokens):
        return "…"
    return fmt_tokens(breakdown.message_tokens[index])


def _entry_inspector_text(snap: Snapshot, entry_id: str) -> list[Text]:
    entry = snap.reader.by_id.get(entry_id)
    if entry is None:
        return [Text(f"entry {entry_id} is not in the file", style="yellow")]
    head = Text()
    head.append(f"entry {entry_id}", style="bold")
    head.append(f" · {entry.type}" + (f" · {entry.role}" if entry.role else ""))
    if entry.line_no is not None:
        head.append(f" · line {entry.line_no}", style="dim")
    lines = [head, Text("not in the current context (dropped by a compaction, or on another branch)", style="yellow")]
    message = entry.message
    if isinstance(message, Mapping):
        preview = _content_preview(message)
    else:
        preview = str(entry.raw.get("summary") or json.dumps(entry.raw, ensure_ascii=False))
    lines.append(literal_text(preview[:PREVIEW_CHARS]))
    return lines


class DiagnosticsView(SteadyStatic):
    """Counted problems found while reading the file, with line numbers."""

    def show(self, snap: Snapshot) -> None:
        """List the reader's diagnostics and context warnings for `snap`."""
        from ds4tui.render import problem_lines

        diag = snap.reader.diagnostics
        lines = [Text(f"{snap.path} · {fmt_bytes(snap.file_size)} · {snap.reader.entry_count:,} entries", style="bold")]
        problems = problem_lines(snap)
        lines += [literal_text(p, keep_newlines=False, style="yellow") for p in problems] or [Text("no problems", style="green")]
        if diag.items:
            lines.append(Text("\nevery diagnostic, in file order:", style="bold"))
        for item in diag.items[:500]:
            lines.append(literal_text(str(item), keep_newlines=False))
        if len(diag.items) > 500:
            lines.append(Text(f"… {len(diag.items) - 500} more", style="dim"))
        self.update(Group(*lines))


class StatusLine(SteadyStatic):
    """One line above the footer: the outcome of the last steering action."""

    def report(self, text: str, *, error: bool = False) -> None:
        """Show `text` (an error in the error colour)."""
        self.set_class(error, "-error")
        self.update(literal(text, keep_newlines=False))
