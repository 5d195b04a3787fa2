"""The session picker: a modal list of discovered Pi sessions, newest first."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from ds4sessions.discovery import list_sessions
from ds4tui.text import fmt_bytes, literal


class SessionPicker(ModalScreen[Path | None]):
    """Choose a session file; Enter opens it, Escape cancels."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label("Open a Pi session (Enter opens, Esc cancels)")
            yield DataTable(id="picker-table", cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("modified", "name / cwd", "model", "entries", "size")
        sessions = list_sessions()
        for info in sessions:
            table.add_row(
                dt.datetime.fromtimestamp(info.modified).strftime("%Y-%m-%d %H:%M"),
                literal(info.name or info.cwd, keep_newlines=False)[:50],
                info.model or "",
                str(info.entries),
                fmt_bytes(info.size),
                key=str(info.path),
            )
        if not sessions:
            self.query_one(Label).update("No Pi sessions found under the agent directory (Esc to go back)")
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(Path(str(event.row_key.value)))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
