"""The README screenshot is the app as it is now (scripts/screenshots.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("screenshots_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_readme_screenshot_is_not_stale() -> None:
    script = _script()
    want = script.normalize(await script.render_dashboard())
    have = script.normalize((ROOT / "screenshots" / "dashboard.svg").read_text(encoding="utf-8"))
    assert want == have, "screenshots/dashboard.svg is stale: run `uv run python scripts/screenshots.py`"


def test_help_writes_nothing(tmp_path: Path) -> None:
    svg = ROOT / "screenshots" / "dashboard.svg"
    before = svg.stat().st_mtime_ns
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--check" in out.stdout and "usage:" in out.stdout
    assert svg.stat().st_mtime_ns == before
