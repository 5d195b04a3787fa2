"""What the first paint waits for: the modules imported on the UI thread before the map is first
shown with a session's data. The bridge status check at the first snapshot imported the bridge's
facade (`ds4sessions.bridge.channel`), which loads the steering commands and DS4's planner:
~100 ms on the UI thread inside the first paint (issue 14); it needs only the status module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "01-tools-and-image.jsonl"

CHILD = r"""
import asyncio, json, sys
from pathlib import Path
from ds4tui.app import Ds4App
from ds4tui.screens.dashboard import DashboardScreen

seen = []
show = DashboardScreen._show
def probe(self, message):
    show(self, message)
    if not seen:
        seen.append(sorted(m for m in sys.modules if m.startswith(("ds4sessions.bridge", "ds4sessions.steering", "ds4core.planner"))))

async def main():
    app = Ds4App(Path(sys.argv[1]), watch=False, retrieval=False)
    DashboardScreen._show = probe
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(500):
            if seen:
                break
            await pilot.pause(0.01)
    print(json.dumps(seen[0] if seen else None))

asyncio.run(main())
"""


def test_the_first_show_loads_no_steering_or_planner_module(tmp_path: Path) -> None:
    session = tmp_path / FIXTURE.name
    session.write_bytes(FIXTURE.read_bytes())
    out = subprocess.run([sys.executable, "-c", CHILD, str(session)], capture_output=True, text=True, timeout=120, check=True)
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert modules is not None, "the app never showed the session"
    assert "ds4sessions.bridge.status" in modules  # the header's bridge state was checked
    assert not [m for m in modules if m in ("ds4sessions.bridge.channel", "ds4sessions.bridge.commands")
                or m.startswith(("ds4sessions.steering", "ds4core.planner"))], modules
