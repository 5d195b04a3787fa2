"""The Retrieval tab in a small app of its own: summary, candidate rows, literal evidence,
the EntrySelected message, and an SVG snapshot (oversized-turn session crafted from sample 01)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.derive.retrieval import LiveRetrieval
from ds4sessions.derive.retrieval import RetrievalView as RetrievalResultView
from ds4sessions.derive.retrieval_index import session_db_path
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from ds4tui.widgets.retrieval import RetrievalView
from tests.conftest import FIXTURES
from tests.sessions.test_retrieval_index import oversized_session

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"


@pytest.fixture
def view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RetrievalResultView:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    path = oversized_session(SAMPLE, tmp_path / "oversized.jsonl")
    return LiveRetrieval().retrieve(open_snapshot(path), timestamp=0)


class RetrievalApp(App):
    """Shows one retrieval view and records the entries selected."""

    def __init__(self, view: RetrievalResultView | None) -> None:
        super().__init__()
        self.retrieval = view
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield RetrievalView(id="retrieval")

    def on_mount(self) -> None:
        self.query_one(RetrievalView).show(self.retrieval)
        self.query_one(DataTable).focus()

    def on_retrieval_view_entry_selected(self, message: RetrievalView.EntrySelected) -> None:
        self.selected.append(message.entry_id)


async def test_rows_evidence_and_selection(view: RetrievalResultView) -> None:
    app = RetrievalApp(view)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        widget = app.query_one(RetrievalView)
        table = app.query_one(DataTable)
        assert table.row_count == len(view.rows) == len(widget.rows)
        first = table.get_row_at(0)
        assert (first[0], str(first[1]), str(first[4])) == ("1", "fab69129", "sent")
        summary = str(app.query_one("#retrieval-summary", Static).render())
        assert "Query terms Which · ERR_TEST_FAILURE · test · failed" in summary
        assert "maxRetrievedHistoryTokens" in summary
        evidence = str(app.query_one("#retrieval-evidence", Static).render())
        assert 'Source entry: "fab69129"' in evidence
        assert view.evidence_text in evidence
        await pilot.press("down")
        await pilot.pause()
        assert app.selected[0] == "fab69129"
        assert app.selected[-1] == view.rows[1].entry_id
        excluded = [str(table.get_row_at(i)[6]) for i in range(table.row_count) if str(table.get_row_at(i)[4]) == "no"]
        assert excluded and all(text for text in excluded)
        widget.show(None)
        await pilot.pause()
        assert table.row_count == 0


async def test_session_text_is_shown_literally(view: RetrievalResultView) -> None:
    import dataclasses

    hostile = dataclasses.replace(view, request_text="[bold red]boom[/] \x1b[2J", evidence_text="[link=x]y[/link]\x1b]0;t\x07")
    app = RetrievalApp(hostile)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        summary = str(app.query_one("#retrieval-summary", Static).render())
        assert "[bold red]boom[/] \\x1b[2J" in summary
        evidence = str(app.query_one("#retrieval-evidence", Static).render())
        assert "[link=x]y[/link]\\x1b]0;t\\x07" in evidence


def test_snapshot_oversized_turn_evidence(snap_compare, view: RetrievalResultView) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(RetrievalApp(view), terminal_size=(120, 36))


def test_cli_retrieve_json_and_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from ds4tui.cli import app

    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    path = oversized_session(SAMPLE, tmp_path / "oversized.jsonl")
    runner = CliRunner()
    first = runner.invoke(app, ["retrieve", str(path), "--json"])
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert data["sourceEntryIds"][0] == "fab69129"
    assert data["retrieval"]["queryTerms"] == ["Which", "ERR_TEST_FAILURE", "test", "failed"]
    assert data["index"]["added"] == 22 and data["index"]["path"] == str(session_db_path(path))
    again = json.loads(runner.invoke(app, ["retrieve", str(path), "--json", "--rebuild-index"]).output)
    assert again["index"]["added"] == 22
    assert again["evidenceText"].split("\n")[:5] == data["evidenceText"].split("\n")[:5]
    text = runner.invoke(app, ["retrieve", str(path)])
    assert text.exit_code == 0
    assert "Query terms: Which, ERR_TEST_FAILURE, test, failed" in text.output
    assert '  1 fab69129   toolResult ' in text.output
    assert runner.invoke(app, ["index-rebuild"]).exit_code == 0
    assert runner.invoke(app, ["retrieve", str(tmp_path / "missing.jsonl")]).exit_code == 2
