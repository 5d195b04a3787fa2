"""The steering keys act on what is highlighted, or say that nothing is (issue 31 item 2): `p`
and `c` with the cursor on free space, on a map cell, on a manifest row (the system row, then an
entry's) and on a turn, each dialog naming the entry it acts on. Real app (`run_test`), a copy of
a real Pi session; the dialogs are cancelled, so nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

from ds4tui.app import Ds4App
from ds4tui.widgets.panels import StatusLine, TurnList
from ds4tui.widgets.pixel_map import PixelMap
from ds4tui.widgets.steer import CollapseScreen, PinScreen
from tests.app.test_dashboard import settle


async def _dialog(pilot, app: Ds4App, key: str, kind: type) -> object | None:  # type: ignore[no-untyped-def]
    """Press `key`; the dialog of `kind` once it is up (None when none came: the status says why)."""
    await pilot.press(key)
    for _ in range(150):
        await pilot.pause(0.02)
        if isinstance(app.screen, kind):
            await pilot.pause(0.05)
            return app.screen
    return None


async def _cancel(pilot, app: Ds4App) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("escape")
    for _ in range(50):
        await pilot.pause(0.02)
        if not isinstance(app.screen, (PinScreen, CollapseScreen)):
            return


def _status(app: Ds4App) -> str:
    return str(app.dashboard.query_one(StatusLine).render())


async def test_p_and_c_act_on_the_highlighted_entry_or_say_nothing_is(tmp_path: Path, sample01: Path) -> None:
    path = tmp_path / "session.jsonl"
    shutil.copyfile(sample01, path)
    before = path.read_bytes()
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        ids = snap.context.message_entry_ids
        prompts = [t for t in snap.turns if t.index]  # turns that start at a prompt
        pixel_map = app.query_one(PixelMap)
        cells = pixel_map.cells

        # 1. free space on the map: nothing selected, in words
        pixel_map.focus()
        await pilot.pause()
        pixel_map.cursor = len(cells) - 1
        await pilot.pause()
        assert cells[pixel_map.cursor].category == "free"
        assert await _dialog(pilot, app, "p", PinScreen) is None
        assert "nothing selected" in _status(app) and "free space" in _status(app)
        collapse = await _dialog(pilot, app, "c", CollapseScreen)
        assert collapse is not None and collapse.origin.startswith("nothing selected")
        await _cancel(pilot, app)

        # 2. a map cell of an entry in the second turn: that entry
        second = prompts[1]
        at = next(i for i, c in enumerate(cells) if c.message_index is not None
                  and second.first_message <= c.message_index <= second.last_message)
        pixel_map.focus()
        pixel_map.cursor = at
        await pilot.pause()
        target = cells[at].entry_id
        pin = await _dialog(pilot, app, "p", PinScreen)
        assert pin is not None and pin.entry_id == target
        await _cancel(pilot, app)
        collapse = await _dialog(pilot, app, "c", CollapseScreen)
        assert collapse is not None and collapse.origin == f"from the selected entry {target}"
        assert collapse.plan is not None and collapse.plan.first_prompt_id == ids[second.first_message]
        await _cancel(pilot, app)

        # 3. the Manifest tab: its system row is no entry; an entry's row is that entry
        await pilot.press("M")
        await pilot.pause(0.1)
        from textual.widgets import DataTable

        manifest = app.dashboard.query_one("ManifestView")
        table = app.dashboard.query_one("#manifest-table", DataTable)
        rows = list(manifest.rows)
        system = next(i for i, row in enumerate(rows) if row.entry_id is None)
        entry_row = next(i for i, row in enumerate(rows) if row.entry_id in ids)
        table.focus()
        table.move_cursor(row=system)
        await pilot.pause(0.05)
        assert await _dialog(pilot, app, "p", PinScreen) is None
        assert "nothing selected" in _status(app) and "manifest row" in _status(app)
        table.move_cursor(row=entry_row)
        await pilot.pause(0.05)
        pin = await _dialog(pilot, app, "p", PinScreen)
        assert pin is not None and pin.entry_id == rows[entry_row].entry_id
        await _cancel(pilot, app)

        # 4. a turn in the turn list: its prompt
        await pilot.press("t")
        turns = app.dashboard.query_one(TurnList)
        turns.focus()
        row = snap.turns.index(second)
        turns.move_cursor(row=row)
        await pilot.pause(0.05)
        pin = await _dialog(pilot, app, "p", PinScreen)
        assert pin is not None and pin.entry_id == ids[second.first_message]
        await _cancel(pilot, app)
        collapse = await _dialog(pilot, app, "c", CollapseScreen)
        assert collapse is not None and collapse.plan is not None
        assert collapse.plan.first_prompt_id == ids[second.first_message]
        assert collapse.turns == len(prompts) - prompts.index(second)
        await _cancel(pilot, app)
    assert path.read_bytes() == before  # every dialog was cancelled: nothing written


async def test_opening_another_session_forgets_the_first(tmp_path: Path, sample01: Path) -> None:
    """Issue 31 item 4: after `o` (here `switch_session`, what the picker calls) the Manifest's
    "since the previous plan" does not compare the new session's plan with the old one's, and
    the old session's notices are gone."""
    from tests.conftest import FIXTURES

    other = FIXTURES / "pi" / "04-tree-branches-labels.jsonl"
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("M")
        await pilot.pause(0.2)
        app.notify("a notice about the first session")
        await pilot.pause(0.1)
        assert any("first session" in n.message for n in app._notifications)
        first = app.derived.plan.session_id
        app.dashboard.switch_session(other)
        for _ in range(300):
            await pilot.pause(0.02)
            if app.snapshot is not None and app.derived is not None and app.derived.plan is not None \
                    and app.derived.plan.session_id != first:
                break
        await pilot.pause(0.3)
        diff = str(app.dashboard.query_one("#manifest-diff").render())
        assert "First plan" in diff and "→" not in diff
        assert all("first session" not in n.message for n in app._notifications)


async def _wait(pilot, until, tries: int = 300) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        await pilot.pause(0.02)
        if until():
            return
    raise AssertionError("timed out")


async def test_the_tui_journal_undoes_a_pin_and_a_collapse(tmp_path: Path, sample01: Path) -> None:
    """Issue 31 item 6: `J` lists ds4tui's writes to the session and undoes the highlighted one
    (`u`, then `y`), with the CLI's checks; a pin and a collapse written from the keyboard are
    undone from it, newest first, and the file only ever grows."""
    import os
    import time

    from ds4sessions.agents.pi import read_session
    from ds4sessions.steering.writer import Journal
    from ds4tui.widgets.steer import JournalScreen

    path = tmp_path / "s.jsonl"
    shutil.copyfile(sample01, path)
    old = time.time() - 60
    os.utime(path, (old, old))  # an idle session (the writer refuses a file written seconds ago)
    original = path.read_bytes()
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot, app)
        target = app.snapshot.context.message_entry_ids[3]
        app.dashboard._select_message(3, sync_turns=True)
        assert await _dialog(pilot, app, "p", PinScreen) is not None
        await pilot.press("y")
        await _wait(pilot, lambda: len(Journal().list(path)) == 1)
        app.refresh_session()
        await _wait(pilot, lambda: target in app.snapshot.context.labels)
        os.utime(path, (old, old))
        collapse = await _dialog(pilot, app, "c", CollapseScreen)
        assert collapse is not None
        await pilot.press("y")
        await _wait(pilot, lambda: len(Journal().list(path)) == 2)
        assert read_session(path).entries[-1].type == "branch_summary"

        for expected in ("collapse", "pin"):  # newest first
            os.utime(path, (old, old))
            screen = await _dialog(pilot, app, "J", JournalScreen)
            assert screen is not None
            live = [r for r in screen.records if not r.undone_by and r.action != "undo"]
            assert live[0].action == expected
            table = screen.query_one("#journal")
            table.move_cursor(row=screen.records.index(live[0]))
            await pilot.press("u")
            await pilot.press("y")
            await _wait(pilot, lambda: Journal().get(live[0].id).undone_by is not None)
            assert "undid #" in _status(app)
        from ds4sessions.agents.pi.context import build_context

        session = read_session(path)
        assert target not in session.labels  # the pin is undone
        now = build_context(session)
        before = build_context(read_session(sample01))
        assert now.messages == before.messages  # the collapse is undone: the context is the original's
    data = path.read_bytes()
    assert data.startswith(original)  # append-only
    records = Journal().list(path)
    assert [r.action for r in records] == ["pin", "collapse", "undo", "undo"]
