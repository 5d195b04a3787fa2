"""An appended line touches what it changed on screen (issue 10): the turn list keeps the
rendered lines of unchanged turns, the map keeps its cell objects for unchanged rows, and the
plan of the previous snapshot stays until the new one arrives."""

from __future__ import annotations

import json
from pathlib import Path

from ds4tui.app import Ds4App
from ds4tui.widgets.pixel_map import PixelMap
from ds4tui.widgets.turns import TurnList
from tests.app.test_dashboard import settle


def _reply(parent: str, entry_id: str, text: str) -> bytes:
    entry = {
        "type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-03-02T08:44:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1772441040000},
    }
    return (json.dumps(entry) + "\n").encode()


async def test_an_append_keeps_unchanged_lines_and_cells(sample01: Path, tmp_path: Path) -> None:
    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes())
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        turns = app.query_one(TurnList)
        pixel_map = app.query_one(PixelMap)
        before_rows = turns._rows
        before_lines = {key[0]: strip for key, (row, strip) in turns._rendered.items()}
        before_cells = list(pixel_map.cells)
        before_plan = app.view.plan
        leaf = app.snapshot.context.branch_entry_ids[-1]
        with path.open("ab") as f:
            f.write(_reply(leaf, "apptest1", "one more question about the widgets"))
        app.refresh_session()
        for _ in range(200):  # the snapshot first, before its plan
            await pilot.pause(0.01)
            if app.view.version > 0 and len(app.view.turns) == len(before_rows) + 1:
                break
        view = app.view
        assert len(view.turns) == len(before_rows) + 1 and view.turns[-1].plan in ("", "kept")
        # the previous turns (but the last, which an append may extend) are the same row
        # objects, so their lines are not drawn again
        assert all(a is b for a, b in zip(view.turns[:-2], before_rows[:-1]))
        await pilot.pause()
        again = {key[0]: strip for key, (row, strip) in turns._rendered.items()}
        kept = [id(r) for r in before_rows if id(r) in before_lines and id(r) in again]
        assert kept and all(again[k] is before_lines[k] for k in kept)
        # the map: the cells of the old messages are the same objects (MapIndex shares them)
        after_cells = pixel_map.cells
        same = sum(1 for a, b in zip(before_cells, after_cells) if a is b and a.category != "free")
        assert same >= sum(1 for c in before_cells if c.category != "free") - 2
        # the plan: the previous one until this snapshot's arrives, then this snapshot's
        if view.plan_version is not None and view.plan_version < view.version:
            assert view.plan is before_plan
        await settle(pilot, app)
        assert app.view.plan_version == app.view.version
