"""Shared test helpers.

`../shared` (next to the project root) holds the reference material: Pi-written sessions with the
context Pi built, DS4 vectors and bad inputs. Tests that need it use the `shared_dir` fixture,
which skips with a clear reason when the folder is absent. Small fixtures that must always run
are copied into `tests/fixtures/`.

A skipped snapshot test keeps its SVG (not "unused", never deleted by `--snapshot-update`), and
the run ends with the skipped tests grouped by reason (`tests/snapshot_skips.py`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def find_shared() -> Path | None:
    """Return the shared reference folder (`$DS4TUI_SHARED` or `../shared`), or None."""
    env = os.environ.get("DS4TUI_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared")
    for cand in candidates:
        if (cand / "sessions-pi").is_dir():
            return cand
    return None


SHARED = find_shared()


def pytest_configure(config: pytest.Config) -> None:
    """Skipped snapshot tests keep their snapshots (`tests/snapshot_skips.py`)."""
    from tests.snapshot_skips import keep_skipped_snapshot_files

    keep_skipped_snapshot_files()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """End the run with what was skipped and why: one line per reason (`pytest -rs` lists each
    test)."""
    from tests.snapshot_skips import skip_summary

    skipped = [r for r in terminalreporter.stats.get("skipped", []) if getattr(r, "skipped", False)]
    if not skipped:
        return
    terminalreporter.section(f"skipped: {len(skipped)} tests, by reason", sep="-")
    for line in skip_summary(skipped, ROOT):
        terminalreporter.write_line(line)
SKIP_NO_SHARED = "../shared (Pi sample sessions, DS4 vectors, bad inputs) is absent; set DS4TUI_SHARED to run"


def shared_params(values: Iterable[Any]) -> list[Any]:
    """`values` for `pytest.mark.parametrize` over files of `../shared`; without any (no
    `../shared`), one skipped case that says so (pytest's own reason would be "got empty parameter
    set")."""
    values = list(values)
    return values or [pytest.param(None, id="no-shared", marks=pytest.mark.skip(reason=SKIP_NO_SHARED))]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared reference folder; skips the test when it is absent."""
    if SHARED is None:
        pytest.skip(SKIP_NO_SHARED)
    return SHARED


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out like `../shared` with the samples copied into `tests/fixtures/` (never
    skips; the same bytes with or without `../shared`):

    - `sessions-pi/`: 01-tools-and-image, 03-compaction, 04-tree-branches-labels,
      05-extensions-models (`tests/fixtures/pi/`);
    - `sessions-claude/projects/`: the Claude Code sample with its subagent
      (`tests/fixtures/claude-home/`);
    - `sessions-codex/`: the two Codex rollouts and their config (`tests/fixtures/codex/sample/`).

    The home screen, `sessions`/`usage` and overview tests place copies of these in a fake home.
    """
    import shutil

    root = tmp_path_factory.mktemp("samples")
    (root / "sessions-pi").mkdir()
    for path in sorted((FIXTURES / "pi").glob("*.jsonl")):
        shutil.copyfile(path, root / "sessions-pi" / path.name)
    shutil.copytree(FIXTURES / "claude-home", root / "sessions-claude")
    shutil.copytree(FIXTURES / "codex" / "sample", root / "sessions-codex")
    return root


@pytest.fixture(autouse=True)
def _utc_and_isolated_agent_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Deterministic local time (UTC), an empty Pi agent dir and a private ds4tui state dir and
    cache dir, so no test reads the real `~/.pi` (sessions, models.json) or writes the real
    state or cache dir."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    agent = tmp_path_factory.mktemp("pi-agent")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path_factory.mktemp("ds4tui-state")))
    monkeypatch.setenv("DS4TUI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ds4tui-cache"))  # never the user's


@pytest.fixture
def sample01() -> Path:
    """A real Pi-written session that always ships with the tests (01-tools-and-image)."""
    return FIXTURES / "pi" / "01-tools-and-image.jsonl"


def traced_peak(call: Callable[[], Any]) -> tuple[Any, int]:
    """(`call()`, the peak of the bytes Python allocated while it ran: tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
