"""A Pi reader that counts each message as it is read and keeps only a small stand-in of it.

For a one-shot open whose output is the map's numbers (`ds4tui map --json`, issue 14), the
parsed messages are needed only to be counted and for a few facts. `SlimReader` is a
`PiSessionReader` (same diagnostics, ids, tree, labels; unchanged rules) except that each
`message` entry's message is, right after it is read, counted by the given ledger and replaced
by a stand-in dict (`StandIn`) that carries the count; a `StandInLedger` answers it, so building
the context, the facts, the breakdown and the turns from this reader gives exactly what the full
reader gives, with a fraction of the memory.

The stand-in is the message with every key kept except:
- `content`: for a `user` message, the first 81 characters of its whitespace-normalised preview
  text (what `ds4sessions.ingest.live._preview` reads: the preview of the stand-in equals the
  preview of the message); for an `assistant` message, one `{"type": "toolCall", "id": …}` per
  tool-call block (what the turn list's tool-call count and the tool-pairing check read), or
  `()` without tool calls (both read it as no calls);
  for any other role, `""`;
- `details` and `isError` (a tool result's UI details and flag: read by nothing that counts,
  builds the context, the facts or the turns).

The entry's `timestamp` (ISO string) is dropped too ("", as for an entry without one): the
context builder reads it only for compactions, branch summaries and custom messages, which are
kept whole; turns take their time from the message's own `timestamp`.

A context edit that replaces a message's content (Pi §7 step 4) makes a new dict from the
stand-in: its other keys, hence its count, are the full message's. Messages kept whole: a
message whose `content` is null (the context builder replaces it) and anything that is not a
dict. Not for the live app (the TUI shows messages' content): `ds4sessions.ingest.live
.open_map_snapshot` uses it; `tests/sessions/test_slim_reader.py` checks that it gives the same
`map --json` as the full reader on every shared sample, bad input and synthetic sessions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ds4core.categories import in_llm_context, message_parts
from ds4core.tokens import MessageCount, TokenLedger

from ds4sessions.agents.pi.entries import MESSAGE, Entry, StandIn
from ds4sessions.agents.pi.reader import BOM, PiSessionReader, _parse_json
from ds4sessions.agents.pi.schema import conform_entry, has_surrogate_escape
from ds4sessions.safety import open_regular

PREVIEW_KEPT = 81
"""Characters of a user message's normalised text kept (the preview shows 80; see module doc)."""


def _user_stand_in(content: Any) -> str:
    """The first `PREVIEW_KEPT` characters of the normalised text `_preview` makes of `content`;
    `_preview(stand-in) == _preview(content)` (the 81st character decides whether a trailing
    space of the first 80 is a separator that the preview keeps: `split` drops it either way)."""
    return " ".join(prompt_text(content).split())[:PREVIEW_KEPT]


def prompt_text(content: Any) -> str:
    """The text a user prompt's `content` shows in the turn list: the string, or its text blocks
    joined by spaces, or "[image]" for content without text (the turn preview,
    `ds4sessions.ingest.live._preview`, and the stand-in keep the same rule)."""
    if isinstance(content, str):
        return content
    return " ".join(
        b.get("text", "") for b in content or () if (type(b) is dict or isinstance(b, Mapping)) and b.get("type") == "text"
    ) or ("[image]" if content else "")


_SHARED_VALUES = frozenset({"role", "provider", "model", "api", "stopReason", "toolName"})
"""Message keys whose string values repeat across a session: the stand-ins share one object per
distinct value (values are equal either way; orjson shares keys, not values)."""


DEFER_BYTES = 4096
"""A message whose line is longer than this is counted only when a snapshot asks for it (read
again from the file then): a long session's large tool results are mostly cut by compactions
or on other branches, and tokenizing them is most of the cost of reading them."""


class StaleSession(Exception):
    """A message read again from the file no longer matches what was read first (the file was
    rewritten meanwhile): the caller reads the file the full way (`open_snapshot`)."""


class StandInLedger(TokenLedger):
    """A `TokenLedger` that answers a `StandIn` with the count it carries (no identity memo:
    one slot per message instead of a memo entry), or, for a message whose count was deferred
    (`DEFER_BYTES`), counts the message read again from the file by `reader`
    (`SlimReader.reread`). Any other message is counted as usual. Raises ValueError for a
    stand-in with no count by this ledger's counter, `StaleSession` when its line changed: a
    count of the stand-in's own content is never returned."""

    reader: SlimReader | None = None

    def count(self, message: Mapping[str, Any]) -> MessageCount:
        """See `TokenLedger.count`; a `StandIn` carries its count (or where to read it)."""
        if type(message) is StandIn:
            counted = getattr(message, "counted", None)
            if counted is not None and counted[0] is None and self.reader is not None:
                full = self.reader.reread(message, counted[1], counted[2])
                if full is None:
                    raise StaleSession(f"{self.reader.path}: a message changed while the file was read")
                result = self.count_split(full, message_parts(full))
                message.counted = counted = (self.counter.name, result)  # type: ignore[attr-defined]
            if counted is None or counted[0] != self.counter.name:
                raise ValueError("a message stand-in has no count by " + self.counter.name)
            return counted[1]
        return super().count(message)


def stand_in(message: dict[str, Any], shared: dict[str, str] | None = None) -> StandIn | None:
    """The stand-in of `message` (see the module doc), or None to keep the message whole.
    `shared`: a dict of string values seen before (`_SHARED_VALUES` keys), to reuse them."""
    content = message.get("content", "")
    if content is None:
        return None
    slim = StandIn(message)  # a copy, made in C
    if "details" in slim:
        del slim["details"]
    if "isError" in slim:
        del slim["isError"]
    if shared is not None:
        share = shared.setdefault
        for key in _SHARED_VALUES.intersection(slim):
            value = slim[key]
            if type(value) is str:
                slim[key] = share(value, value)
    if "content" in slim:
        role = message.get("role")
        if role == "user":
            slim["content"] = _user_stand_in(content)
        elif role == "assistant":
            calls = (
                [{"type": "toolCall", "id": b.get("id")} for b in content if type(b) is dict and b.get("type") == "toolCall"]
                if type(content) is list else None
            )
            slim["content"] = calls or ()  # no call: the empty tuple (one object; reads as no calls)
        else:
            slim["content"] = ""
    return slim


class SlimReader(PiSessionReader):
    """`PiSessionReader` that counts every message with `ledgers` as it is read and keeps a
    stand-in instead (module doc). `entries[i].raw` is then the stand-in (`Entry.message`
    returns it); the entry's other fields are the full reader's."""

    def __init__(self, path: Path | None, ledger: StandInLedger) -> None:
        """`ledger` must split messages with `ds4core.categories.message_parts`; the snapshot
        built from this reader must count with it (it reads deferred messages through this
        reader: `ledger.reader` is set here)."""
        super().__init__(path)
        self._ledger = ledger
        ledger.reader = self
        self._shared: dict[Any, Any] = {}  # equal strings and counts, one object each

    def _add_entry(self, obj: dict[str, Any], line_no: int, offset: int, length: int) -> Entry:
        if obj.get("type") == MESSAGE:
            message = obj.get("message")
            if type(message) is dict:
                share = self._shared.setdefault
                slim = stand_in(message, self._shared)
                if slim is not None:
                    if not in_llm_context(message):  # `counted_parts` never asks the ledger
                        pass
                    elif length > DEFER_BYTES:
                        slim.counted = (None, offset, length)  # counted if a snapshot needs it
                    else:
                        ledger = self._ledger
                        count = ledger.count_split(message, message_parts(message))
                        slim.counted = share((ledger.counter.name, count), (ledger.counter.name, count))
                    parent = obj.get("parentId")
                    if type(parent) is str:
                        earlier = self.by_id.get(parent)
                        if earlier is not None:  # the parent's id string (equal), not a copy
                            obj["parentId"] = earlier.id
                    entry = super()._add_entry(obj, line_no, offset, length)
                    # The entry keeps the stand-in as its `raw` (`Entry.message` returns it): the
                    # parsed object is dropped here. Set once, before anything else sees the entry.
                    object.__setattr__(entry, "raw", slim)
                    object.__setattr__(entry, "timestamp", "")  # read only for non-message entries
                    return entry
        return super()._add_entry(obj, line_no, offset, length)

    def full_message(self, slim: StandIn, entry_id: str | None) -> dict[str, Any] | None:
        """The message `slim` stands for, read again from the file (its line, by the entry's
        offset and length, parsed and conformed as the first read did), or None when it cannot
        be found or its stand-in is no longer `slim`'s value (the file changed)."""
        candidates = [self.by_id.get(entry_id)] + list(self._shadowed.get(entry_id, ())) if entry_id else []
        entry = next((e for e in candidates if e is not None and e.raw is slim), None)
        if entry is None:
            return None
        return self.reread(slim, entry.offset, entry.length)

    def reread(self, slim: StandIn, offset: int, length: int) -> dict[str, Any] | None:
        """The message of the line at `offset` (`length` bytes with its newline, if any), read
        again, parsed and conformed as the first read did; None when that fails or its stand-in
        is not equal to `slim`."""
        try:
            with os.fdopen(open_regular(self.path), "rb") as f:  # type: ignore[arg-type]
                f.seek(offset)
                raw = f.read(length)
        except OSError:
            return None
        if len(raw) == length and raw.endswith(b"\n"):
            raw = raw[:-1]
        if offset == 0 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        try:
            obj = _parse_json(raw.decode("utf-8", "replace"))
        except ValueError:
            return None
        if type(obj) is not dict:
            return None
        obj, _ = conform_entry(obj, surrogates=has_surrogate_escape(raw))
        message = obj.get("message")
        if type(message) is not dict:
            return None
        if self.version < 3 and message.get("role") == "hookMessage":  # as `Migrator.migrate`
            message = {**message, "role": "custom"}
        again = stand_in(message)
        return message if again is not None and again == slim else None
