"""The session picker: a modal list of discovered Pi sessions, newest first."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from rich.text import Text

from ds4sessions.agents.pi.discovery import list_sessions, session_roots, unreadable_sessions
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
        table.add_columns("modified", "name", "cwd", "model", "entries", "size", "file")
        sessions = list_sessions()
        for info in sessions:
            table.add_row(
                dt.datetime.fromtimestamp(info.modified).strftime("%Y-%m-%d %H:%M"),
                Text(literal(info.name or "", keep_newlines=False)[:40]),
                Text(literal(info.cwd, keep_newlines=False)[-40:]),
                Text(info.model or ""),
                str(info.entries),
                fmt_bytes(info.size),
                Text(literal(info.path.name, keep_newlines=False)),
                key=str(info.path),
            )
        skipped = unreadable_sessions()
        roots = ", ".join(str(r) for r in session_roots())
        if not sessions:
            self.query_one(Label).update(Text(f"No Pi sessions found in {roots} (Esc to go back)"))
        elif skipped:
            self.query_one(Label).update(
                Text(f"Open a Pi session (Enter opens, Esc cancels) · {len(skipped)} unreadable file(s) skipped")
            )
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(Path(str(event.row_key.value)))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
