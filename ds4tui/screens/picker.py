"""The session picker: a modal list of discovered Pi sessions, newest first, and a field for
typing the path of any session file (`~` expanded; a missing or unreadable path is reported in
the dialog, which stays open)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Label

from rich.text import Text

from ds4sessions.agents.pi.discovery import list_sessions, session_roots, unreadable_sessions
from ds4tui.text import fmt_bytes, literal


class SessionPicker(ModalScreen[Path | None]):
    """Choose a session file from the list (Enter opens it) or type its path in the field
below (Enter opens it); Escape cancels. Returns the path or None."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label("Open a Pi session (Enter opens, Esc cancels)")
            yield DataTable(id="picker-table", cursor_type="row")
            yield Input(placeholder="or type a session file's path and press Enter (Tab moves here)", id="picker-path")
            yield Label("", id="picker-error")

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
        if sessions:
            table.focus()
        else:
            self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Open a typed path when it names a readable file; else say why and stay open."""
        from ds4tui.text import literal_text

        typed = event.value.strip()
        if not typed:
            return
        path = Path(typed).expanduser()
        error = self.query_one("#picker-error", Label)
        if not path.exists():
            error.update(literal_text(f"no such file: {path}", style="bold red", keep_newlines=False))
        elif not path.is_file():
            error.update(literal_text(f"not a file: {path}", style="bold red", keep_newlines=False))
        else:
            self.dismiss(path)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(Path(str(event.row_key.value)))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
