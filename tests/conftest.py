"""Shared test helpers.

`../shared` (next to the project root) holds the reference material: Pi-written sessions with the
context Pi built, DS4 vectors and bad inputs. Tests that need it use the `shared_dir` fixture,
which skips with a clear reason when the folder is absent. Small fixtures that must always run
are copied into `tests/fixtures/`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

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
SKIP_NO_SHARED = "../shared (Pi sample sessions, DS4 vectors, bad inputs) is absent; set DS4TUI_SHARED to run"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared reference folder; skips the test when it is absent."""
    if SHARED is None:
        pytest.skip(SKIP_NO_SHARED)
    return SHARED


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
