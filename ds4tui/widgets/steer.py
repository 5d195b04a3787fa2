"""Confirm-before-write dialogs for steering the context: pin, list pins, collapse, compaction.

Self-contained `ModalScreen`s; each returns the user's decision through `dismiss()` and writes
nothing itself. The app pushes them (`push_screen(screen, callback)` or
`push_screen_wait`) and, on a decision, calls `ds4sessions.steering.steer.pin` / `collapse` or
`ds4sessions.steering.compaction.compact` with the decision's `expected` state and `force` flag, then
reports `WriteResult.describe()` ("appended … to PATH at byte N … (journal #k)") in its status
line. Keys: `y`/Enter write, `n`/Escape cancel; in the collapse dialog ←/→ (or -/+) choose how
many turns; `f` toggles "force" where another process holds the file open.

Session content (prompts, summaries, labels) is shown literally (`ds4tui.text.literal_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Static

from typing import TYPE_CHECKING, Any

from ds4core.models import ModelInfo
from ds4sessions.steering.steer import CollapsePlan, Pin, plan_collapse
from ds4sessions.steering.writer import Expected, FileState, Holder, WriteRefused, describe_holders
from ds4tui.text import clip, literal, literal_text

if TYPE_CHECKING:  # an annotation: the compaction client (httpx) loads when a compaction is prepared
    from ds4sessions.steering.compaction import CompactionPreview

DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} #dialog {{ width: 90; max-width: 95%; height: auto; max-height: 90%; border: thick $accent;
    background: $panel; padding: 0 1; }}
{name} #title {{ text-style: bold; padding: 0 0 1 0; }}
{name} #body {{ height: auto; max-height: 28; }}
{name} #facts {{ height: auto; padding: 1 0 0 0; }}
{name} #warning {{ color: $warning; height: auto; }}
{name} #buttons {{ height: 3; align: right middle; }}
{name} Button {{ margin: 0 0 0 1; min-width: 12; }}
"""


@dataclass(frozen=True)
class WriteDecision:
    """The user confirmed a write: `expected` is the file state they saw (pass it to the write
    so a changed file is refused), `force` overrides the busy / recently-written / open-file
    checks (only when the user asked for it)."""

    expected: Expected
    force: bool = False


@dataclass(frozen=True)
class CollapseDecision(WriteDecision):
    """A confirmed collapse of the last `turns` turns."""

    turns: int = 1


def _usd(value: float | None) -> str:
    if value is None:
        return "?"
    return f"${value:.4f}" if abs(value) >= 0.01 else f"${value:.6f}"


def _holders_note(holders: Sequence[Holder], allowed: bool) -> str:
    if not holders:
        return ""
    who = describe_holders(holders)
    if allowed:
        return f"The file is open in {who}. Pins are fine: labels resolve over the whole file."
    return (
        f"The file is open in {who}: a running agent keeps its own copy and would not see this change. "
        "Refused unless forced (f)."
    )


class _ConfirmScreen(ModalScreen):
    """Shared layout: title, scrollable body, facts, warning, Write / Cancel buttons."""

    BINDINGS = [
        Binding("y", "confirm", "Write"),
        Binding("n,escape,q", "cancel", "Cancel"),
        Binding("enter", "enter", "Close", show=False),
    ]
    can_write = True
    force = False
    refused = False
    """Nothing can be written at all (e.g. nothing to compact): the dialog offers only a way
    out (Esc, q, n or Enter close it; no Write button)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(id="title")
            with VerticalScroll(id="body"):
                yield Static(id="body-text")
            yield Static(id="facts")
            yield Static(id="warning")
            with Horizontal(id="buttons"):
                yield Button("Write (y)", variant="primary", id="confirm")
                yield Button("Cancel (n)", id="cancel")

    def set_content(self, title: str, body: Text | str, facts: Text | str, warning: str = "") -> None:
        """Fill the dialog (plain strings are shown literally)."""
        self.query_one("#title", Static).update(literal_text(title, keep_newlines=False))
        self.query_one("#body-text", Static).update(body if isinstance(body, Text) else literal_text(body))
        self.query_one("#facts", Static).update(facts if isinstance(facts, Text) else literal_text(facts))
        self.query_one("#warning", Static).update(literal_text(warning))
        self.query_one("#warning", Static).display = bool(warning)
        self.query_one("#confirm", Button).disabled = not self.can_write
        self.query_one("#confirm", Button).display = not self.refused
        self.query_one("#cancel", Button).label = "Close (Esc)" if self.refused else "Cancel (n)"
        if self.refused:
            self.query_one("#cancel", Button).focus()

    def action_enter(self) -> None:
        """Enter closes a dialog that can only be closed (a focused button takes Enter first)."""
        if self.refused:
            self.action_cancel()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_confirm(self) -> None:
        if self.can_write:
            self.dismiss(self.decision())

    def decision(self) -> WriteDecision:
        raise NotImplementedError


class PinScreen(_ConfirmScreen):
    """Confirm pinning (or unpinning) one entry. Returns a `WriteDecision` or None.

    `state`: the file as the user sees it; `entry_id`: the entry (or a turn's prompt);
    `preview`: a line of its content; `holders`: processes holding the file open (pins are
    allowed anyway); `path_label`: how to show the file (default: its path).
    """

    DEFAULT_CSS = DIALOG_CSS.format(name="PinScreen")

    def __init__(
        self, state: FileState, entry_id: str, preview: str = "", holders: Sequence[Holder] = (), path_label: str | None = None
    ) -> None:
        super().__init__()
        self.path_label = path_label or str(state.path)
        self.state = state
        self.entry_id = entry_id
        self.preview = preview
        self.holders = tuple(holders)

    def on_mount(self) -> None:
        from ds4sessions.steering.steer import PIN_PREFIX, is_pin

        current = self.state.session.labels.get(self.entry_id)
        pinned = is_pin(current)
        if pinned:
            rest = (current or "").strip()[len(PIN_PREFIX) :].strip()
            new = f'label "{rest}"' if rest else "a cleared label (no label field)"
            title = f"Unpin entry {self.entry_id}?"
        else:
            text = f"{PIN_PREFIX} {current.strip()}" if current and current.strip() else PIN_PREFIX
            new = f'label "{text}"'
            title = f"Pin entry {self.entry_id}?"
        facts = (
            f"Appends a label entry with {new} for {self.entry_id} to {self.path_label}\n"
            f"(child of the current leaf {self.state.leaf_id}; the context does not change; the DS4 plan keeps pinned "
            "groups mandatory)."
        )
        self.set_content(title, self.preview or "(no preview)", facts, _holders_note(self.holders, allowed=True))

    def decision(self) -> WriteDecision:
        return WriteDecision(Expected(self.state.size, self.state.leaf_id))


class PinsScreen(ModalScreen):
    """The pins of the session (`P`): target, label, on the current branch, preview. Enter
    returns the highlighted target id (e.g. to jump to it or unpin it); Escape returns None."""

    DEFAULT_CSS = DIALOG_CSS.format(name="PinsScreen") + "PinsScreen DataTable { height: auto; max-height: 20; }"
    BINDINGS = [Binding("escape,n", "close", "Close"), Binding("enter", "choose", "Choose", show=False)]

    def __init__(self, pins: Sequence[Pin], previews: dict[str, str] | None = None) -> None:
        super().__init__()
        self.pins = tuple(pins)
        self.previews = previews or {}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"Pins ({len(self.pins)})", style="bold"), id="title")
            yield DataTable(id="pins", cursor_type="row")
            yield Static(Text("Enter: go to entry   Esc: close", style="dim"), id="facts")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Entry", "Label", "Branch", "Content")
        for p in self.pins:
            table.add_row(
                p.target_id,
                literal_text(p.label, keep_newlines=False),
                "current" if p.on_branch else ("other" if p.entry else "missing"),
                literal_text(clip(literal(self.previews.get(p.target_id, ""), keep_newlines=False), 50)),
                key=p.target_id,
            )
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)

    def action_choose(self) -> None:
        table = self.query_one(DataTable)
        if self.pins:
            self.dismiss(self.pins[table.cursor_row].target_id)

    def action_close(self) -> None:
        self.dismiss(None)


class JournalScreen(ModalScreen):
    """ds4tui's writes to this session (`J`), newest first: number, time, action, target and
    whether it is in force, undone, or wrote nothing (the CLI's `journal list` for one file).
    `u` (or Enter) on a row asks to undo it and, on `y`, returns its number (the same checks
    as `ds4tui journal undo N` run then); Escape returns None."""

    DEFAULT_CSS = DIALOG_CSS.format(name="JournalScreen") + "JournalScreen DataTable { height: auto; max-height: 16; }"
    BINDINGS = [
        Binding("escape,n", "close", "Close"),
        Binding("u,enter", "ask", "Undo"),
        Binding("y", "confirm", "Yes", show=False),
    ]

    def __init__(self, records: Sequence[Any], path_label: str, journal_path: str = "") -> None:
        super().__init__()
        self.records = tuple(sorted(records, key=lambda r: -r.id))
        self.path_label = path_label
        self.journal_path = journal_path
        self._asked: int | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"Journal: ds4tui's writes to {self.path_label} ({len(self.records)})", style="bold"), id="title")
            yield DataTable(id="journal", cursor_type="row")
            yield Static("", id="facts")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("#", "Time", "Action", "Target", "State")
        for r in self.records:
            target = next((str(e.get("targetId")) for e in r.entries if e.get("targetId")), None) or \
                (r.entry_ids[-1] if r.entry_ids else "")
            table.add_row(str(r.id), r.time[:19].replace("T", " "), r.action, literal_text(target, keep_newlines=False),
                          self._state(r), key=str(r.id))
        self._hint()
        table.focus()

    @staticmethod
    def _state(record: Any) -> str:
        if record.status == "abandoned":
            return "wrote nothing"
        if record.undone_by:
            return f"undone by #{record.undone_by}"
        if record.status != "done":
            return record.status
        if record.undoes:
            return f"in force (undoes #{record.undoes})"
        return "in force" if record.undo is not None else "in force (no undo)"

    def _hint(self, text: str | None = None) -> None:
        default = ("u: undo the highlighted write   Esc: close" if self.records
                   else f"No writes recorded for this session ({self.journal_path}).")
        self.query_one("#facts", Static).update(Text(text or default, style="dim" if text is None else "bold"))

    def action_ask(self) -> None:
        if not self.records:
            return
        record = self.records[self.query_one(DataTable).cursor_row]
        self._asked = record.id
        self._hint(f"Undo #{record.id} ({record.action})? It appends its counter-entry. y: yes   n/Esc: no")

    def action_confirm(self) -> None:
        if self._asked is not None:
            self.dismiss(self._asked)

    def action_close(self) -> None:
        self.dismiss(None)


class CollapseScreen(_ConfirmScreen):
    """Choose how many finished turns to collapse, preview the summary, the token saving and the
    prompt-cache cost, and confirm. Returns a `CollapseDecision` or None.

    `state`: the file as the user sees it; `model`: for prices (None: tokens only); `turns`: the
    initial count; `holders`: processes holding the file open; `path_label`: how to show the file;
    `origin`: where the span's start came from, in words (the highlighted entry, or why not).
    """

    DEFAULT_CSS = DIALOG_CSS.format(name="CollapseScreen")
    BINDINGS = [
        *_ConfirmScreen.BINDINGS,
        Binding("left,minus", "fewer", "Fewer turns"),
        Binding("right,plus,equals_sign", "more", "More turns"),
        Binding("f", "toggle_force", "Force"),
    ]

    def __init__(
        self,
        state: FileState,
        model: ModelInfo | None = None,
        turns: int = 1,
        holders: Sequence[Holder] = (),
        path_label: str | None = None,
        origin: str | None = None,
    ) -> None:
        super().__init__()
        self.path_label = path_label or str(state.path)
        self.state = state
        self.model = model
        self.turns = max(turns, 1)
        self.origin = origin
        self.holders = tuple(holders)
        self.plan: CollapsePlan | None = None

    def on_mount(self) -> None:
        self.refresh_plan()

    def refresh_plan(self) -> None:
        """Re-plan for the current turn count and redraw."""
        try:
            self.plan = plan_collapse(self.state, self.turns, self.model)
        except WriteRefused as err:
            self.plan = None
            self.can_write = False
            self.set_content(f"Collapse {self.turns} turn(s)?", "", "", f"Cannot collapse: {err}")
            return
        plan, cost = self.plan, self.plan.cost
        self.turns = plan.turns
        warnings = []
        if plan.pinned_in_span:
            warnings.append(f"Pinned entries leave the context: {', '.join(plan.pinned_in_span)}")
        note = _holders_note(self.holders, allowed=False)
        if note:
            warnings.append(note + (" [force ON]" if self.force else ""))
        self.can_write = not self.holders or self.force
        facts = Text()
        facts.append(f"Turns: ◀ {plan.turns} ▶ of {plan.available_turns}", style="bold")
        facts.append(f" · {len(plan.span_entry_ids)} entries from {plan.first_prompt_id}\n")
        if self.origin:
            facts.append(f"Span: {self.origin}\n", style="dim")
        effect = cost.token_effect()
        facts.append(effect[0].upper() + effect[1:] + "\n")
        facts.append(
            f"Prompt cache: the span's cached prefix is lost — next request {_usd(cost.next_with_usd)} "
            f"instead of {_usd(cost.next_without_usd)}, {cost.per_request_effect(_usd)}"
        )
        if cost.break_even_requests:
            facts.append(f" (pays off after {cost.break_even_requests})")
        facts.append(
            f"\nAppends a branch_summary (parent {plan.anchor_id}, fromId {plan.from_id}) to {literal(self.path_label)}"
        )
        self.set_content(f"Collapse the last {plan.turns} turn(s)?", plan.summary.text, facts, "\n".join(warnings))

    def action_fewer(self) -> None:
        if self.turns > 1:
            self.turns -= 1
            self.refresh_plan()

    def action_more(self) -> None:
        limit = self.plan.available_turns if self.plan else self.turns
        if self.turns < limit:
            self.turns += 1
            self.refresh_plan()

    def action_toggle_force(self) -> None:
        self.force = not self.force
        self.refresh_plan()

    def decision(self) -> CollapseDecision:
        assert self.plan is not None
        return CollapseDecision(self.plan.expected, self.force, self.plan.turns)


class CompactionScreen(_ConfirmScreen):
    """Preview Pi's compaction (cut point, tokens before/after, cached vs cold summary cost)
    and confirm sending the summary request. Returns a `WriteDecision` or None.

    `preview`: from `ds4sessions.steering.compaction.preview_compaction`, or None with `refusal` saying
    why there is nothing to compact; `endpoint`: where the request would go (`api model @ url`,
    never the key); `holders`: processes holding the file open.
    """

    DEFAULT_CSS = DIALOG_CSS.format(name="CompactionScreen")
    BINDINGS = [*_ConfirmScreen.BINDINGS, Binding("f", "toggle_force", "Force")]

    def __init__(
        self,
        preview: CompactionPreview | None,
        *,
        path: str = "",
        endpoint: str = "",
        refusal: str = "",
        holders: Sequence[Holder] = (),
    ) -> None:
        super().__init__()
        self.preview = preview
        self.path = path
        self.endpoint = endpoint
        self.refusal = refusal
        self.holders = tuple(holders)

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Draw the preview (or the refusal)."""
        p = self.preview
        if p is None:
            self.can_write = False
            self.refused = True
            self.set_content("Compact the context?", "", "", f"Cannot compact: {self.refusal}")
            return
        s = p.settings
        summarised = len(p.messages_to_summarize) + len(p.turn_prefix_messages)
        body = Text()
        body.append(f"Cut point: keep from {p.first_kept_entry_id}", style="bold")
        body.append(" (splits a turn)\n" if p.is_split_turn else "\n")
        body.append(f"keepRecentTokens {s.keep_recent_tokens:,} · reserveTokens {s.reserve_tokens:,}\n")
        body.append(
            f"Tokens: {p.tokens_before:,} before → ~{p.tokens_after:,} after "
            f"({summarised} messages summarised, {len(p.kept_messages)} kept)\n"
        )
        if p.context_window:
            over = " — over it now" if p.over_threshold else ""
            body.append(f"Pi compacts on its own above {p.context_window - s.reserve_tokens:,} of {p.context_window:,}{over}\n")
        if p.read_files or p.modified_files:
            body.append(f"Files: {len(p.read_files)} read, {len(p.modified_files)} modified\n")
        body.rstrip()
        c = p.cost
        facts = Text()
        if c is not None:
            facts.append("Summary request: ", style="bold")
            facts.append(
                f"cached {_usd(c.cached_usd)} ({c.prefix_tokens:,} cached + {c.fresh_tokens:,} new tokens) vs cold "
                f"{_usd(c.cold_usd)} ({c.cold_tokens:,} tokens, Pi's own way), ~{c.output_tokens:,} output tokens\n"
            )
            if c.cache_probably_cold:
                facts.append(f"The prompt cache has probably expired (last request {c.cache_age_seconds:.0f} s ago, "
                             f"lifetime {c.cache_ttl_seconds} s): priced as a cache write.\n")
        facts.append(f"Sends it to {literal(self.endpoint or '(endpoint from the environment)')}, then appends a "
                     f"compaction entry to {literal(self.path)}")
        note = _holders_note(self.holders, allowed=False)
        self.can_write = not self.holders or self.force
        self.set_content("Compact the context?", body, facts, note + (" [force ON]" if note and self.force else ""))

    def action_toggle_force(self) -> None:
        self.force = not self.force
        self.redraw()

    def decision(self) -> WriteDecision:
        assert self.preview is not None
        return WriteDecision(self.preview.expected, self.force)
