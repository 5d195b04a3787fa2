"""What a new-user trial found said wrongly (stop 38): the Cache tab claimed "Pi's recorded
costs match the catalog" for agents that record no cost (0 requests compared), the Timeline
priced unpriced requests at "$0.0000", and a line cap that is not a number ended in "internal
error". Real samples, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys

from ds4tui.app import Ds4App
from tests.app.test_keys_do_what_they_say import SESSIONS
from tests.conftest import ROOT


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=ROOT, check=False)


async def test_the_cost_check_names_the_agent_and_says_when_nothing_was_compared() -> None:
    from rich.text import Text

    from ds4tui.widgets.cache import CachePanel

    for agent, words in (("codex", "Cost check: no recorded costs to check (Codex records none here"),
                         ("pi", "Cost check: Pi's recorded costs match the catalog (")):
        app = Ds4App(SESSIONS[agent], watch=False, retrieval=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause(0.02)
                if app.derived is not None and app.derived.cache is not None:
                    break
            panel = app.screen.query_one(CachePanel)
            lines = [p.plain for p in panel._parts(app.derived.cache) if isinstance(p, Text)]
            assert any(line.startswith(words) for line in lines), (agent, lines)
            assert not any("Pi's recorded" in line for line in lines) or agent == "pi"


def test_an_unpriced_timeline_says_no_price() -> None:
    out = _cli("timeline", str(SESSIONS["codex"]))
    assert out.returncode == 0 and "no price" in out.stdout and "$0.0000" not in out.stdout


def test_a_line_cap_that_is_not_a_size_is_one_line() -> None:
    for value in ("abc", "0", "-1"):
        out = _cli("map", str(SESSIONS["pi"]), env={"DS4TUI_MAX_LINE_BYTES": value})
        assert out.returncode == 2 and "internal error" not in out.stderr, out.stderr
        assert out.stderr.strip() == (f"ds4tui: DS4TUI_MAX_LINE_BYTES={value!r} is not a size in bytes (a whole number "
                                      "of at least 1,024; unset, the default is 33,554,432)")
    assert _cli("map", str(SESSIONS["pi"]), env={"DS4TUI_MAX_LINE_BYTES": "65536"}).returncode == 0


def test_formats_unknown_to_the_reader_are_named_not_dumped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Claude Code row of a type the reader does not know is named with its count (the trial
    saw a Python dict printed: `entryTypes ×{'(bool)': {'count': 2, ...}}`)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(SESSIONS["claude-code"].read_bytes() + b'{"type":"brand_new_kind","uuid":"zz1"}\n'
                     + b'{"type":"brand_new_kind","uuid":"zz2"}\n')
    out = _cli("map", str(path), env={"DS4TUI_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "120"})
    assert out.returncode == 0 and "unknown to this reader: entryTypes brand_new_kind ×2" in out.stdout
    assert "{'" not in out.stdout


def test_a_what_if_plan_names_its_agent() -> None:
    """DS4's plan of a Codex rollout names Codex in its manifest reasons, and its explanation does
    not invite a pin on a read-only session (it read "Pi effective system prompt" and "Pin a turn
    with a Pi label")."""
    import json

    out = _cli("plan", "--json", str(SESSIONS["codex"]))
    assert out.returncode == 0, out.stderr
    text = json.dumps(json.loads(out.stdout))
    assert "Codex effective system prompt" in text and "Pi effective" not in text and "Active Pi tool" not in text
    explained = _cli("plan", str(SESSIONS["codex"]))
    assert "Pin a turn with a Pi label" not in explained.stdout
    assert "Pins are Pi labels starting with ds4:pin: a what-if has none to honour." in explained.stdout
