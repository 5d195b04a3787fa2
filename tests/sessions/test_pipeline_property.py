"""Property: real session lines, torn at random byte positions and randomly corrupted, pass
through the tailer and the reader without an exception; every complete valid line becomes
exactly one entry; every malformed line is counted with its line number; nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4sessions.ingest.diagnostics import Problem
from ds4sessions.agents.pi.reader import PiSessionReader
from ds4sessions.ingest.tailer import Tailer
from tests.conftest import FIXTURES

SAMPLE_LINES = (FIXTURES / "pi" / "01-tools-and-image.jsonl").read_bytes().splitlines()
HEADER, ENTRIES = SAMPLE_LINES[0], SAMPLE_LINES[1:]


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[bytes], list[int]]:
    """A header plus a random selection of real entry lines, some cut short (malformed)."""
    picks = draw(st.lists(st.sampled_from(range(len(ENTRIES))), min_size=1, max_size=25))
    lines = [HEADER]
    for index in picks:
        line = ENTRIES[index]
        if draw(st.integers(0, 5)) == 0:
            line = line[: draw(st.integers(1, len(line) - 1))]  # a torn, malformed line
        lines.append(line)
    cuts = draw(st.lists(st.integers(0, sum(len(x) + 1 for x in lines)), max_size=12))
    return lines, sorted(set(cuts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=sessions())
def test_torn_and_corrupted_lines_are_read_once_or_counted(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    lines, cuts = data
    blob = b"".join(line + b"\n" for line in lines)
    path = Path(tmp_path_factory.mktemp("prop")) / "s.jsonl"
    path.write_bytes(b"")
    tailer = Tailer(path)
    reader = PiSessionReader(path)
    written = 0
    for cut in [*cuts, len(blob)]:
        with path.open("ab") as f:
            f.write(blob[written:cut])
        written = max(written, cut)
        batch = tailer.poll()
        assert batch.reset is None
        reader.feed(batch.lines)
        reader.set_pending_tail(batch.pending_bytes)
    assert path.read_bytes() == blob
    valid, malformed = [], []
    for line_no, line in enumerate(lines[1:], start=2):
        try:
            json.loads(line)
            valid.append(line_no)
        except ValueError:
            malformed.append(line_no)
    assert [e.line_no for e in reader.entries] == valid
    assert [d.line_no for d in reader.diagnostics.of_kind(Problem.MALFORMED)] == malformed
