"""The header line (ds4tui.header): one line, items dropped by priority, never wrapped."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from ds4tui.header import HeaderFacts, compose_header
from ds4tui.widgets.panels import turn_times

FULL = HeaderFacts(
    used=183_000, window=200_000, measured=True, model="anthropic/claude-opus-4-5",
    name="ledger-core: nightly reconcile errors", cwd="ledger-core", problems=2,
    bridge="bridge: not installed",
)


def test_everything_fits_on_a_wide_line() -> None:
    line = compose_header(FULL, 200).plain
    assert line == (
        " ds4tui · 183k / 200k (92%) · ⚠ 2 problems (d) · anthropic/claude-opus-4-5 · "
        "ledger-core: nightly reconcile errors · (ledger-core) · bridge: not installed"
    )


@pytest.mark.parametrize("width", [160, 120, 100, 80, 70, 60, 40, 30])
def test_items_drop_by_priority_instead_of_wrapping(width: int) -> None:
    line = compose_header(FULL, width).plain
    assert "\n" not in line and len(line) <= width
    assert "183k / 200k (92%)" in line  # the fill stays longest
    # Whole items or nothing: never half an item ("bridge: not / installed").
    for item in ("bridge: not installed", "anthropic/claude-opus-4-5", "(ledger-core)"):
        assert item in line or item.split()[0] not in line.split(" · ")[-1]
    assert not line.endswith(" ·")


def test_the_bridge_goes_first_and_the_fill_last() -> None:
    assert "bridge" not in compose_header(FULL, 120).plain
    assert "anthropic/claude-opus-4-5" in compose_header(FULL, 80).plain
    assert compose_header(FULL, 40).plain == " ds4tui · 183k / 200k (92%)"
    assert compose_header(FULL, 20).plain == " ds4tui · 183k / 20…"


def test_an_estimate_is_marked_and_states_are_words() -> None:
    est = HeaderFacts(used=3_500, window=None, measured=False, model=None, known_model=False, name="x")
    assert compose_header(est, 100).plain == " ds4tui · 3.5k est. · model unknown · x"
    assert compose_header(HeaderFacts(status="loading", demo=True), 80).plain == " ds4tui · [demo] · reading the session file…"


def test_turn_times_show_the_date_when_not_today() -> None:
    utc = dt.timezone.utc
    day1 = dt.datetime(2026, 3, 13, 23, 50, tzinfo=utc)
    turns = [
        SimpleNamespace(index=0, time=day1 + dt.timedelta(days=1)),  # a compaction summary, written later
        SimpleNamespace(index=256, time=day1),
        SimpleNamespace(index=257, time=day1 + dt.timedelta(hours=16)),
    ]
    local = [t.time.astimezone() for t in turns]
    out = turn_times(turns, today=local[2].date() + dt.timedelta(days=30))
    assert out == ["", local[1].strftime("%m-%d %H:%M"), local[2].strftime("%m-%d %H:%M")]
    same_day = [SimpleNamespace(index=1, time=day1)]
    assert turn_times(same_day, today=local[1].date()) == [local[1].strftime("%H:%M")]


def test_one_problem_is_singular() -> None:
    from ds4tui.header import HeaderFacts, compose_header

    line = compose_header(HeaderFacts(used=1000, window=200_000, problems=1), 120).plain
    assert "⚠ 1 problem (d)" in line


def test_a_long_name_and_folder_end_in_an_ellipsis() -> None:
    """A new-user trial: titles were cut mid-word with no sign of it."""
    long = HeaderFacts(used=1000, window=200_000, measured=True, model="m", name="n" * 60, cwd="c" * 50)
    line = compose_header(long, 300).plain
    assert " · " + "n" * 39 + "…" + " · " in line and "(" + "c" * 29 + "…)" in line


def test_clip_is_the_one_cut_and_marks_it() -> None:
    from ds4tui.text import clip

    assert clip("short", 5) == "short" and clip("shorter", 5) == "shor…"
    assert clip("Fix 404 for unknown ids", 13) == "Fix 404 for…"  # no space before the mark
    assert clip("日本語のテキスト", 7) == "日本語…"  # wide characters: cells, not characters
    assert clip("abc", 1) == "…" and clip("abc", 0) == ""


def test_a_first_read_in_slices_says_how_far_it_is() -> None:
    facts = HeaderFacts(used=150_000, window=200_000, model="anthropic/x", reading=(21 << 20, 84 << 20))
    line = compose_header(facts, 160).plain
    assert "reading 25% of 84.0 MiB…" in line and line.index("reading") < line.index("150k")
    assert "150k / 200k (75%) est. as at 25%" in line  # the number is the session's at that point (issue 36)
    # kept when the line is narrow (priority 0, with the numbers it qualifies)
    assert "reading 25%" in compose_header(facts, 50).plain
    assert "reading" not in compose_header(HeaderFacts(used=150_000, window=200_000), 160).plain


def test_a_file_of_bad_lines_is_not_an_empty_session() -> None:
    from ds4tui.widgets.panels import empty_note

    bad = compose_header(HeaderFacts(status="empty", empty_note=empty_note(20_000, 92), problems=92), 160)
    assert "no session in this file (19.5 KiB): 92 problems (d)" in bad.plain
    assert any("yellow" in str(span.style) for span in bad.spans)
    empty = compose_header(HeaderFacts(status="empty", empty_note=empty_note(0, 0)), 160).plain
    assert "empty session (0 B): waiting for Pi to write" in empty
