"""The dashboard's text panels: header line, category list, turn list, inspector, diagnostics."""

from __future__ import annotations

import json
from typing import Any, Mapping

from rich.console import Group
from rich.text import Text
from textual.widgets import DataTable, Static

from ds4core.categories import message_parts
from ds4core.tokens import Cl100kCounter, CharsV1Counter, TokenLedger
from ds4sessions.ingest.live import Snapshot
from ds4tui.header import HeaderFacts, compose_header, first_prompt_of, session_display_name
from ds4tui.render import calibrated_of, calibration_line, category_lines
from ds4tui.text import fmt_bytes, fmt_tokens, literal, literal_text

PREVIEW_CHARS = 2000
"""Characters of an entry's content shown in the inspector."""


def header_facts(snap: Snapshot | None, *, demo: bool, following: bool, bridge: str = "") -> HeaderFacts:
    """The header's facts for `snap` (None: nothing read yet). `used` is the calibrated total,
    the same number the legend adds up to."""
    if snap is None:
        return HeaderFacts(status="loading", demo=demo, paused=not following)
    reader = snap.reader
    if reader.status == "empty" and not reader.entries:
        note = f"empty session ({fmt_bytes(snap.file_size)}): waiting for Pi to write"
        return HeaderFacts(status="empty", empty_note=note, demo=demo, paused=not following)
    cal = calibrated_of(snap)
    return HeaderFacts(
        used=cal.used,
        window=snap.context_window,
        measured=cal.source == "provider",
        model=snap.model_key,
        known_model=snap.model is not None,
        name=session_display_name(reader.session_name, snap.path, first_prompt_of(snap.context.messages)),
        cwd=(reader.cwd or "").rstrip("/").rsplit("/", 1)[-1],
        demo=demo,
        paused=not following,
        deleted=snap.deleted,
        invalid_header=reader.status == "not_a_session",
        problems=reader.diagnostics.total + len(snap.context.warnings),
        bridge=bridge,
    )


class SessionHeader(Static):
    """One line (never wrapped): fill (tokens / window) · model · session name (cwd) · badges ·
    the bridge state; items drop by priority when the line is narrow (`ds4tui.header`)."""

    _bridge: str = ""
    _last: tuple = ()

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

    def show(self, snap: Snapshot | None, *, demo: bool, following: bool) -> None:
        """Redraw for `snap` (None: nothing loaded yet)."""
        self._last = (snap, {"demo": demo, "following": following})
        facts = header_facts(snap, demo=demo, following=following, bridge=self._bridge)
        self.update(compose_header(facts, self.size.width or 80))


class CategoryList(Static):
    """Categories with dotted leaders, tokens and share of the window (calibrated to the
    provider's count), then how the numbers were made (provider, estimate, ratio)."""

    _snap: Snapshot | None = None

    def on_resize(self) -> None:
        """Re-fit the dotted leaders to the new width."""
        if self._snap is not None:
            self.show(self._snap)

    def show(self, snap: Snapshot) -> None:
        """Redraw for `snap` using its best breakdown, calibrated."""
        self._snap = snap
        bd = snap.best
        cal = calibrated_of(snap)
        width = max((self.size.width or 46) - 2, 24)  # room for a vertical scroll bar
        lines = category_lines(cal, width=width, max_children=3)
        if snap.model is None:
            lines.append(Text(f"window unknown for {snap.model_key or 'this session'}", style="yellow"))
        lines.append(calibration_line(cal, bd.counter))
        if snap.provider and snap.provider.later_messages:
            lines.append(Text(f"+{snap.provider.later_messages} messages since the last reply are estimated", style="dim"))
        self.update(Group(*lines))


class TurnList(DataTable):
    """One row per turn: index, time, first words of the prompt, tool calls, tokens."""

    def show(self, snap: Snapshot) -> None:
        """Replace the rows (keeps the cursor row when it still exists)."""
        self._snap = snap
        with self.prevent(self.RowHighlighted):
            self._fill(snap)

    _plan: Any = None

    def show_plan(self, snap: Snapshot, plan: Any) -> None:
        """Fill the plan column from a DS4 `PlanView` (None: unknown)."""
        self._plan = plan
        if plan is None or not self.row_count or "plan" not in self.columns:
            return
        for turn in snap.turns:
            key = str(turn.first_message)
            if key in self.rows:
                self.update_cell(key, "plan", self._plan_cell(turn))

    def _plan_cell(self, turn: Any) -> Text:
        plan = self._plan
        if plan is None:
            return Text("")
        ids = set(turn.entry_ids)
        pinned = bool(ids & set(plan.pinned_entry_ids))
        out = ids & plan.excluded_entry_ids
        if out and out == ids:
            text = Text("excluded", style="dim")
        elif out:
            text = Text("partial", style="yellow")
        else:
            text = Text("kept", style="green")
        if pinned:
            text.append(" ◆", style="magenta")
        return text

    def on_resize(self) -> None:
        """Fit the prompt column to the new width."""
        snap = getattr(self, "_snap", None)
        if snap is not None:
            self.show(snap)

    def _fill(self, snap: Snapshot) -> None:
        cursor = self.cursor_row
        self.clear(columns=True)
        times = turn_times(snap.turns)
        time_width = max((len(t) for t in times), default=5) or 5
        # index 4, time 5 (11 with a date), tools 5, tokens 7, plan 8, one cell of padding each side.
        prompt_width = max((self.size.width or 80) - 4 - time_width - 5 - 7 - 8 - 2 * 6 - 1, 10)
        self.add_column("#", key="index", width=4)
        self.add_column("time", key="time", width=time_width)
        self.add_column("prompt", key="prompt", width=prompt_width)
        self.add_column("tools", key="tools", width=5)
        self.add_column("tokens", key="tokens", width=7)
        self.add_column("plan", key="plan", width=8)
        for turn, when in zip(snap.turns, times):
            self.add_row(
                Text(str(turn.index) if turn.index else "·", justify="right"),
                when,
                literal_text(turn.prompt, keep_newlines=False),
                Text(str(turn.tool_calls), justify="right"),
                Text(fmt_tokens(turn.tokens), justify="right"),
                self._plan_cell(turn),
                key=str(turn.first_message),
            )
        if self.row_count:
            self.move_cursor(row=min(max(cursor, 0), self.row_count - 1))


def turn_times(turns: Any, today: Any = None) -> list[str]:
    """The time column of the turn list: "HH:MM" when every turn is from today (local time),
    else "MM-DD HH:MM" for all, so times never seem to run backwards across days. The row before
    the first prompt (a compaction summary written after the turns it keeps) shows no time when
    it is later than the next turn. `today` is a `datetime.date` (default: today)."""
    import datetime as _dt

    local = [t.time.astimezone() if t.time is not None else None for t in turns]
    today = today or _dt.date.today()
    dated = any(when is not None and when.date() != today for when in local)
    out = [when.strftime("%m-%d %H:%M" if dated else "%H:%M") if when is not None else "" for when in local]
    if len(turns) > 1 and not turns[0].index and local[0] is not None and local[1] is not None and local[0] > local[1]:
        out[0] = ""
    return out


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


class EntryInspector(Static):
    """The selected entry: id, type/role, tool, tokens by estimator, content preview."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._chars = TokenLedger(CharsV1Counter(), message_parts)
        self._cl100k = TokenLedger(Cl100kCounter(), message_parts)

    def show_cell(self, snap: Snapshot, category: str, tokens_per_cell: int) -> None:
        """A cell that belongs to no entry: free space, unattributed or inferred system tokens."""
        from ds4core.categories import CATEGORIES

        label = CATEGORIES.get(category, category)
        cal = calibrated_of(snap)
        row = next((r for r in cal.rows if r.id == category), None)
        total = f"{fmt_tokens(row.tokens)} tokens in all ({cal.percent(row.tokens):.1f}% of the window)" if row else ""
        self.update(Group(
            Text(f"{label}", style="bold"),
            Text(f"one cell = {tokens_per_cell:,} tokens · {total}", style="dim"),
            Text("not an entry of the session" + (" (provider total − our estimate)" if category == "unattributed" else "")),
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
        if entry is not None:
            head.append(f" · line {entry.line_no}", style="dim")
        tokens = Text(
            f"tokens: chars-v1 {fmt_tokens(self._chars.count(message).total)}"
            f" · cl100k {fmt_tokens(self._cl100k.count(message).total)}",
            style="dim",
        )
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
        if message.get("role") == "assistant":
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


def _entry_inspector_text(snap: Snapshot, entry_id: str) -> list[Text]:
    entry = snap.reader.by_id.get(entry_id)
    if entry is None:
        return [Text(f"entry {entry_id} is not in the file", style="yellow")]
    head = Text()
    head.append(f"entry {entry_id}", style="bold")
    head.append(f" · {entry.type}" + (f" · {entry.role}" if entry.role else ""))
    head.append(f" · line {entry.line_no}", style="dim")
    lines = [head, Text("not in the current context (dropped by a compaction, or on another branch)", style="yellow")]
    message = entry.message
    if isinstance(message, Mapping):
        preview = _content_preview(message)
    else:
        preview = str(entry.raw.get("summary") or json.dumps(entry.raw, ensure_ascii=False))
    lines.append(literal_text(preview[:PREVIEW_CHARS]))
    return lines


class DiagnosticsView(Static):
    """Counted problems found while reading the file, with line numbers."""

    def show(self, snap: Snapshot) -> None:
        """List the reader's diagnostics and context warnings for `snap`."""
        from ds4tui.render import problem_lines

        diag = snap.reader.diagnostics
        lines = [Text(f"{snap.path} · {fmt_bytes(snap.file_size)} · {len(snap.reader.entries)} entries", style="bold")]
        problems = problem_lines(snap)
        lines += [literal_text(p, keep_newlines=False, style="yellow") for p in problems] or [Text("no problems", style="green")]
        if diag.items:
            lines.append(Text("\nevery diagnostic, in file order:", style="bold"))
        for item in diag.items[:500]:
            lines.append(literal_text(str(item), keep_newlines=False))
        if len(diag.items) > 500:
            lines.append(Text(f"… {len(diag.items) - 500} more", style="dim"))
        self.update(Group(*lines))
