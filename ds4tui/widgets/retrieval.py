"""The Retrieval tab: what the current request asks for, what DS4's retrieval found, what it
injects and what it left out for budget.

`RetrievalView.show(view)` takes a `ds4sessions.derive.retrieval.RetrievalView`. Top: the request, its
query terms and the totals (candidates, evidence sent against `maxRetrievedHistoryTokens`,
alternate-branch and duplicate candidates). Middle: a `DataTable` of candidates (rank, entry,
role, score, sent/excluded, tokens, and the match reason or, when excluded, why). Bottom: the
evidence text exactly as it would be injected. Highlighting a row posts
`RetrievalView.EntrySelected(entry_id)` (the app jumps to that entry on the map). Session text is
always shown literally (`ds4tui.text.literal_text`).
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

from typing import TYPE_CHECKING

from ds4tui.text import fmt_tokens, literal_text

if TYPE_CHECKING:  # annotations only: the derive stages load after the first paint
    from ds4sessions.derive.retrieval import RetrievalRow
    from ds4sessions.derive.retrieval import RetrievalView as RetrievalResultView

#: (column key, header label) of the candidate table, in order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("rank", "#"),
    ("entry", "Entry"),
    ("role", "Role"),
    ("score", "Score"),
    ("state", "Sent"),
    ("tokens", "Tokens"),
    ("reason", "Reason"),
)
REASON_WIDTH = 90


class RetrievalView(Widget):
    """The Retrieval tab's content (see the module docstring). Call `show(view)` with each new
    `ds4sessions.derive.retrieval.RetrievalView` (None: nothing to show yet)."""

    DEFAULT_CSS = """
    RetrievalView { height: 1fr; }
    RetrievalView #retrieval-summary { height: auto; max-height: 6; padding: 0 1; }
    RetrievalView #retrieval-table { height: 1fr; min-height: 5; }
    RetrievalView #retrieval-evidence-box { height: 1fr; border-top: solid $panel; padding: 0 1; }
    """

    class EntrySelected(Message):
        """A candidate row was highlighted: `entry_id` is its session entry."""

        def __init__(self, entry_id: str) -> None:
            super().__init__()
            self.entry_id = entry_id

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        """An empty view until `show` is called."""
        super().__init__(name=name, id=id, classes=classes)
        self._view: RetrievalResultView | None = None
        self._rows: tuple[RetrievalRow, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static("No retrieval yet.", id="retrieval-summary")
        yield DataTable(id="retrieval-table", cursor_type="row")
        with VerticalScroll(id="retrieval-evidence-box"):
            yield Static("", id="retrieval-evidence")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)

    @property
    def view(self) -> RetrievalResultView | None:
        """The retrieval shown, if any."""
        return self._view

    @property
    def rows(self) -> tuple[RetrievalRow, ...]:
        """The candidate rows in table order."""
        return self._rows

    def show(self, view: RetrievalResultView | None) -> None:
        """Show `view` (None clears the tab)."""
        self._view = view
        self._rows = view.rows if view is not None else ()
        self.query_one("#retrieval-summary", Static).update(self._summary(view))
        evidence = self.query_one("#retrieval-evidence", Static)
        if view is None:
            evidence.update("")
        elif view.evidence_text:
            evidence.update(Text.assemble(Text("Injected evidence\n", style="bold"), literal_text(view.evidence_text)))
        else:
            evidence.update(Text("No evidence injected.", style="dim"))
        self._fill_table()

    def unavailable(self, reason: str) -> None:
        """Say in one line why the agent's sessions get no retrieval (`Capabilities.retrieval`)."""
        self._view = None
        self._rows = ()
        self.query_one("#retrieval-summary", Static).update(Text(reason, style="dim"))
        self.query_one("#retrieval-evidence", Static).update("")
        self._fill_table()

    # -- rendering ---------------------------------------------------------------------------

    @staticmethod
    def _summary(view: RetrievalResultView | None) -> Text:
        if view is None:
            return Text("No retrieval yet.", style="dim")
        result = view.result
        out = Text()
        out.append("Request ", style="bold")
        out.append_text(literal_text(view.request_text or "(no user message)", keep_newlines=False))
        out.append("\nQuery terms ", style="bold")
        if view.query_terms:
            for i, term in enumerate(view.query_terms):
                if i:
                    out.append(" · ", style="dim")
                out.append_text(literal_text(term, "#87afd7", keep_newlines=False))
        else:
            out.append("none", style="dim")
        sent = len(view.source_entry_ids)
        out.append(
            f"\n{result.status} · {result.candidate_count} candidates · {sent} sent, "
            f"{fmt_tokens(view.selected_tokens)} of {fmt_tokens(view.max_tokens)} maxRetrievedHistoryTokens · "
            f"{result.alternate_branch_candidates} on other branches · {result.duplicate_candidates} duplicates · "
            f"{view.committed_count} entries already sent",
            style="dim",
        )
        for warning in result.warnings:
            out.append_text(Text("\n" + warning, style="yellow"))
        if result.fallback_reason:
            out.append_text(Text("\nretrieval failed: " + result.fallback_reason, style="red"))
        return out

    def _fill_table(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in self._rows:
            candidate = row.candidate
            if row.selected:
                state = Text("sent", style="bold #87d787")
                reason = literal_text(row.reason, keep_newlines=False)
            else:
                state = Text("no", style="#d7875f")
                reason = literal_text(row.why, "#d7875f", keep_newlines=False)
                if row.reason:
                    reason.append_text(literal_text(f" ({row.reason})", "dim", keep_newlines=False))
            reason.truncate(REASON_WIDTH, overflow="ellipsis")
            table.add_row(
                "" if candidate.rank is None else str(candidate.rank + 1),
                literal_text(row.entry_id, keep_newlines=False),
                literal_text(row.role or row.entry_type, keep_newlines=False),
                "—" if row.score is None else f"{row.score:.1f}",
                state,
                fmt_tokens(row.tokens),
                reason,
                key=row.entry_id,
            )

    @on(DataTable.RowHighlighted, "#retrieval-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.EntrySelected(event.row_key.value))
