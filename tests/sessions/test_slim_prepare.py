"""`SlimReader._prepare`, the short route of the one-shot map read (issue 14): what it answers
for a line must be what the general route (`PiSessionReader._read_line` + `_add_entry`) gives."""

from __future__ import annotations

from pathlib import Path

from ds4core.categories import message_parts
from ds4core.tokens import CharsV1Counter
from ds4sessions.agents.pi.slim import SlimReader, StandInLedger


def _reader() -> SlimReader:
    return SlimReader(None, StandInLedger(CharsV1Counter(), message_parts))


def test_a_message_entry_without_its_message_takes_the_general_route(tmp_path: Path) -> None:
    """`{"type": "message"}` without a `message` key: not the short route's (it raised KeyError
    and the whole read failed); the general route keeps it as an entry without a message."""
    reader = _reader()
    assert reader._prepare(10, b'{"type":"message","id":"a","parentId":null}') is None
    lines = [b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}', b'{"type":"message","id":"a","parentId":null}']
    offsets = [0, len(lines[0]) + 1]
    entries = reader.feed((k + 1, offsets[k], raw) for k, raw in enumerate(lines))
    assert [(e.type, e.id, e.message) for e in entries] == [("message", "a", None)]
