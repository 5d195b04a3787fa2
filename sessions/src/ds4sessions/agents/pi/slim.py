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
  text (what `ds4sessions.agents.pi.live._preview` reads: the preview of the stand-in equals the
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
dict. Not for the live app (the TUI shows messages' content): `ds4sessions.agents.pi.live
.open_map_snapshot` uses it; `tests/sessions/test_slim_reader.py` checks that it gives the same
`map --json` as the full reader on every shared sample, bad input and synthetic sessions.

The per-line work of the one-shot read (`SlimReader._prepare`: parse, checks, stand-in, count)
runs in C for the common lines when the optional extension `_cprep` is built (sessions/setup.py;
`c_preparer`), with the same answers and the same changes to the shared values, the ledger and
the counter's memo; every other line, and every line where the extension is absent, takes the
Python route (`_prepare_py`). tests/sessions/test_slim_prepare.py compares both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from ds4core.categories import Attribution, Segment, attribute, in_llm_context, js_stringify, message_parts
from ds4core.tokens import CharsV1Counter, Cl100kCounter, MessageCount, PartCount, TokenLedger

from ds4sessions.agents.pi.entries import MESSAGE, Entry, StandIn
from ds4sessions.agents.pi.migrate import CURRENT_VERSION
from ds4sessions.agents.pi.reader import BOM, PiSessionReader, _parse_json
from ds4sessions.agents.pi.schema import (
    _message_conforms,
    conform_entry,
    has_surrogate_escape,
)
from ds4sessions.ingest.diagnostics import MissingParent, Problem
from ds4sessions.ingest.limits import (
    MAX_DEPTH,
    MAX_LINE_BYTES,
    READ_CHUNK,
    OversizedLine,
    iter_lines,
    line_length,
)

try:
    from orjson import JSONDecodeError as _FastError
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; then every line takes the full path
    _fast_loads = None
from ds4sessions.safety import open_regular

try:
    from ds4sessions.agents.pi import _cprep
except ImportError:  # built without a C compiler (sessions/setup.py: optional): the Python route
    _cprep = None

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
    `ds4sessions.agents.pi.live._preview`, and the stand-in keep the same rule)."""
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


_SLOW = object()
"""`SlimReader._fast_line`'s answer for a line that must take the general route."""

_PLAIN_MESSAGE_KEYS = frozenset({"type", "id", "parentId", "timestamp", "message"})
"""The keys of a plain `message` entry (Pi session format §4-§5): of these, `conform_entry`
checks only `message` (`id`, `parentId`, `timestamp` are read with type checks)."""


_C_COUNTERS = {
    Cl100kCounter: (1, Cl100kCounter.text, Cl100kCounter.overhead),
    CharsV1Counter: (2, CharsV1Counter.text, CharsV1Counter.overhead),
}
"""The counters `_cprep` mirrors: its kind, and the methods it mirrors (a counter whose class
has others, e.g. patched by a test, is left to the Python route)."""
_COUNT_SPLIT = TokenLedger.count_split


def _python_rules() -> dict[str, Any]:
    """The constants and field lists of the Python rules that `_cprep` mirrors, in the shape of
    `_cprep.RULES` (its copy, compiled in): equal, or the extension is not used."""
    from ds4core import estimate, tokens
    from ds4sessions.agents.pi import schema

    fixed_block = schema._BLOCK_STR | {"text", "thinking", "arguments"}
    return {
        "PREVIEW_KEPT": PREVIEW_KEPT, "CL100K_CHUNK_CHARS": tokens.CL100K_CHUNK_CHARS,
        "CL100K_MESSAGE_OVERHEAD": tokens.CL100K_MESSAGE_OVERHEAD, "MESSAGE_WRAPPER_TOKENS": estimate.MESSAGE_WRAPPER_TOKENS,
        "CONTENT_BLOCK_WRAPPER_TOKENS": estimate.CONTENT_BLOCK_WRAPPER_TOKENS, "MAX_SAFE": schema.MAX_SAFE,
        "MAX_DATE_MS": schema.MAX_DATE_MS, "STR_FIELDS_MESSAGE": schema._STR_FIELDS_MESSAGE,
        "STR_FIELDS_BLOCK": schema._STR_FIELDS_BLOCK, "USAGE_FIELDS": schema._USAGE_FIELDS, "COST_FIELDS": schema._COST_FIELDS,
        "MESSAGE_CHECKS_OTHER": tuple(k for k in schema._MESSAGE_CHECKS if k not in schema._STR_FIELDS_MESSAGE),
        "BLOCK_CHECKED_OTHER": tuple(k for k in ("text", "thinking", "arguments") if k in schema._BLOCK_CHECKED)
        if schema._BLOCK_CHECKED == fixed_block else (),
        "PLAIN_MESSAGE_KEYS": tuple(k for k in ("type", "id", "parentId", "timestamp", "message") if k in _PLAIN_MESSAGE_KEYS)
        if len(_PLAIN_MESSAGE_KEYS) == 5 else (),
        "SHARED_VALUES": tuple(k for k in ("role", "provider", "model", "api", "stopReason", "toolName") if k in _SHARED_VALUES)
        if len(_SHARED_VALUES) == 6 else (),
        "CONTEXT_ROLES": tuple(r for r in ("system", "user", "assistant", "toolResult", "custom", "branchSummary",
                                           "compactionSummary") if in_llm_context({"role": r})),
    }


_RULES_MATCH: bool | None = None
"""`_cprep.RULES == _python_rules()`, once known."""


def c_preparer(ledger: TokenLedger, shared: dict[Any, Any]) -> Any:
    """The C `_prepare` for a reader with `ledger` and `_shared` = `shared`
    (`_cprep.Preparer`: called as `(offset, raw)`, it answers what `SlimReader._prepare_py`
    answers, or False for a line it leaves to it), or None when it does not apply: the
    extension is not built, orjson is missing, its compiled constants and field lists differ
    from the Python rules' (`_python_rules`), or the ledger or its counter is not one whose
    rules it mirrors (`TokenLedger.count_split`, `Cl100kCounter` / `CharsV1Counter`). The
    limits (`MAX_LINE_BYTES`, `MAX_DEPTH`, `DEFER_BYTES`) are read now, as `_prepare_py` reads
    them at each call."""
    global _RULES_MATCH
    if _cprep is None or _fast_loads is None:
        return None
    if _RULES_MATCH is None:
        _RULES_MATCH = _cprep.RULES == _python_rules()
    if not _RULES_MATCH:
        return None
    counter = ledger.counter
    mirrored = _C_COUNTERS.get(type(counter))
    if (
        mirrored is None or type(ledger).count_split is not _COUNT_SPLIT
        or type(counter).text is not mirrored[1] or type(counter).overhead is not mirrored[2]
        or "text" in vars(counter) or "overhead" in vars(counter)
    ):
        return None
    return _cprep.Preparer(
        loads=_fast_loads, decode_error=_FastError, standin=StandIn, part_count=PartCount,
        message_count=MessageCount, shared=shared, ledger=ledger, kind=mirrored[0],
        js_stringify=js_stringify, max_line_bytes=MAX_LINE_BYTES, max_depth=MAX_DEPTH,
        defer_bytes=DEFER_BYTES,
    )


if _cprep is not None:
    from ds4core import tokens as _tokens

    _tokens.CL100K_FAST_COUNT = _cprep.bpe_count  # (`Cl100kCounter` counts as the C preparers count)


def use_cl100k(encoding: Any) -> bool:
    """Let the C preparers count ASCII texts with `encoding`'s merge ranks (`_cprep.use_cl100k`:
    its own cl100k split and byte-pair merge, ~0.25 µs instead of tiktoken's ~5 µs for a
    50-character text, the same counts) when `encoding` is tiktoken's `cl100k_base` pattern with
    its ranks; a preparer loads them itself at its first tokenization, so this is needed only
    before the ranks are dropped (`ds4tui.mapjson._load_cl100k_lean`). False when the extension
    is not built or the encoding does not qualify (tiktoken then counts every text)."""
    if _cprep is None:
        return False
    return bool(_cprep.use_cl100k(encoding))


def c_parser() -> Any:
    """`_cprep.Preparer.parse` (called as `(offset, raw)`: the parsed entry of a line that is
    plainly a well-formed message entry, else False; see `PiSessionReader.feed`), or None when
    the extension does not apply (`c_preparer`)."""
    preparer = c_preparer(TokenLedger(CharsV1Counter(), message_parts), {})
    return preparer.parse if preparer is not None else None


class CountingLedger(TokenLedger):
    """A `TokenLedger` of `message_parts` whose counts are made in C (`_cprep.Preparer.count`:
    `count_split(message, message_parts(message))` with the same effects on the ledger and its
    counter) for every message the extension ports (a conforming message with a content that is
    not null, in the LLM context, with no image or block counted as its JSON); any other message, and every message when the
    extension does not apply (`c_preparer`), is counted by `TokenLedger.count`. Same answers
    either way (tests/sessions/test_c_reader.py).

    `memo=False` (the live session, issue 32): no identity memo. A memo entry per message holds
    the message and its `MessageCount` (~220 bytes a message and counter: 34 MiB of a
    10,000-turn session's 370 MiB with both counters), while the live path counts a message once
    (an append extends the previous attribution, `attribute(previous=…)`) and again only at a
    full rebuild (a compaction, a branch switch, a re-read), which then counts every message of
    the context again (in C; cl100k's texts come from its counter's own memo by text)."""

    def __init__(self, counter: Any, split: Any = message_parts, memo: bool = True) -> None:
        """See `TokenLedger`; the C route only for `split` = `message_parts`; `memo`: keep the
        identity memo (see the class doc)."""
        super().__init__(counter, split)
        preparer = c_preparer(self, {}) if split is message_parts else None
        self._count_c = preparer.count if preparer is not None else None
        self._memo = memo

    def count(self, message: Mapping[str, Any]) -> MessageCount:
        """See `TokenLedger.count`."""
        if self._memo:
            memo = self._by_identity.get(id(message))
            if memo is not None and memo[0] is message:
                return memo[1]
        count_c = self._count_c
        if count_c is not None:
            result = count_c(message)
            if result is not False:
                if self._memo:
                    self._by_identity[id(message)] = (message, result)
                return result
        return super().count(message) if self._memo else self.count_split(message, self._split(message))


def attribute_fast(
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    ledger: TokenLedger,
    previous: Attribution | None = None,
    copy: Callable[[Sequence[Any]], list[Any]] = list,
) -> Attribution:
    """`ds4core.categories.attribute(messages, entry_ids, ledger, previous, copy)`, equal, with
    its loop in C (`_cprep.attribute`: the 200,000 context messages of the 50,000-turn bench
    session in 0.10 s instead of 0.21 s) for a whole attribution (`previous` None) of
    lists; a `StandInLedger`'s stand-ins are answered by the count they carry, as its `count`
    answers them. Anything else, or without the extension, runs the Python function. Raises what
    it raises (tests/sessions/test_c_attribute.py)."""
    if previous is not None or _cprep is None or type(messages) is not list or type(entry_ids) is not list:
        return attribute(messages, entry_ids, ledger, previous, copy)
    counted_name = ledger.counter.name if type(ledger).count is StandInLedger.count else None
    totals, children, segments, per_message, total = _cprep.attribute(
        messages, entry_ids, ledger.count, counted_name, in_llm_context, Segment, StandIn
    )
    return Attribution(ledger.counter.name, totals, children, segments, per_message, total)


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
        self._prepare_c = c_preparer(ledger, self._shared)  # None: `_prepare_py` alone

    def feed(self, lines: Iterable[tuple[int, int, bytes]]) -> list[Entry]:
        """`PiSessionReader.feed`, with a short route for the common line: once a version-3
        header is read, a line that is plainly a well-formed message entry (`_fast_line`) is
        added without the general checks it would pass anyway; every other line takes
        `PiSessionReader`'s route. Same entries, diagnostics and state either way."""
        new: list[Entry] = []
        append = new.append
        before = self.last_line_no
        fast = self._fast_line if _fast_loads is not None else None
        read = self._read_line
        for line_no, offset, raw in lines:
            entry: Any = _SLOW
            if fast is not None and self.status == "session" and self.version >= CURRENT_VERSION:
                entry = fast(line_no, offset, raw)
            if entry is _SLOW:
                entry = read(line_no, offset, raw, line_length(raw) + 1)
            if entry is not None:
                append(entry)
        if self.last_line_no != before:
            self.diagnostics.pending = None
        return new

    def _fast_line(self, line_no: int, offset: int, raw: bytes) -> Any:
        """The entry of one complete line when `_prepare` takes it, else `_SLOW` (nothing
        changed; the caller reads the line the general way)."""
        prepared = self._prepare(offset, raw)
        if prepared is None:
            return _SLOW
        length = len(raw) + 1
        self.last_line_no = line_no
        self.end_offset = offset + length
        return self._add_prepared(prepared[0], prepared[1], prepared[2], line_no, offset, length)

    def _line_after_c(self, line_no: int, offset: int, raw: bytes, answer: Any) -> None:
        """Read one complete line as `feed` reads it, given what the C preparer answered for it
        (`answer`: False = not ported, None = not plain, or the (id, parentId, stand-in) it
        prepared but did not add): the rest of `_fast_line` / `_prepare`, or the general route.
        Used by `_feed_from` for each line the C block reader leaves (`feed_block`)."""
        if answer is False:
            answer = self._prepare_py(offset, raw)
        if answer is None:
            self._read_line(line_no, offset, raw, line_length(raw) + 1)
            return
        length = len(raw) + 1
        self.last_line_no = line_no
        self.end_offset = offset + length
        self._add_prepared(answer[0], answer[1], answer[2], line_no, offset, length)

    def _prepare(self, offset: int, raw: bytes) -> tuple[Any, Any, StandIn] | None:
        """`_prepare_py(offset, raw)`: by the C extension (`_cprep`, `c_preparer`) when it
        takes the line (the common message lines), else by `_prepare_py` itself. Same answer
        and the same changes to `_shared`, the ledger and its counter either way
        (tests/sessions/test_slim_prepare.py compares both on every line it can find)."""
        prepare_c = self._prepare_c
        if prepare_c is not None:
            prepared = prepare_c(offset, raw)
            if prepared is not False:
                return prepared
        return self._prepare_py(offset, raw)

    def _prepare_py(self, offset: int, raw: bytes) -> tuple[Any, Any, StandIn] | None:
        """(id, parentId, counted stand-in) of a complete line that is plainly a well-formed
        `message` entry, else None. Reads no reader state but `_shared` (values only), so
        it may run in another process (`read_whole_file`).

        "Plainly" means every check of `PiSessionReader._read_line` is known to pass: a plain
        `bytes` line under the size cap with at most `MAX_DEPTH` brackets (so not nested too
        deep), not the first line (no BOM), no `\\uD8..` escape (no lone surrogate), valid
        UTF-8 JSON that orjson parses (what `_parse_json` returns for it), an object whose keys
        are only `type`/`id`/`parentId`/`timestamp`/`message` with `type` "message" and a
        message that conforms (`schema._message_conforms`: then `conform_entry` changes
        nothing), in a version-3 file (the caller's part: no migration), with a stand-in
        (`stand_in`; a null content is kept whole by the general route). The stand-in is
        counted as `_add_entry` counts it."""
        if type(raw) is not bytes or offset == 0 or len(raw) > MAX_LINE_BYTES:
            return None
        if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or (b"\\u" in raw and has_surrogate_escape(raw)):
            return None
        try:
            obj = _fast_loads(raw)  # type: ignore[misc]
        except _FastError:
            return None
        if type(obj) is not dict or obj.get("type") != MESSAGE or not obj.keys() <= _PLAIN_MESSAGE_KEYS:
            return None
        message = obj.get("message")  # (absent: the general route reads the entry)
        if type(message) is not dict or not _message_conforms(message):
            return None
        shared = self._shared
        slim = stand_in(message, shared)
        if slim is None:
            return None
        if not in_llm_context(message):  # `counted_parts` never asks the ledger
            pass
        elif len(raw) + 1 > DEFER_BYTES:
            slim.counted = (None, offset, len(raw) + 1)  # counted if a snapshot needs it
        else:
            ledger = self._ledger
            key = (ledger.counter.name, ledger.count_split(message, message_parts(message)))
            slim.counted = shared.setdefault(key, key)
        return obj.get("id"), obj.get("parentId"), slim

    def _add_prepared(self, entry_id: Any, parent: Any, slim: StandIn, line_no: int, offset: int, length: int) -> Entry:
        """What `_add_entry` does with a `message` entry of id `entry_id` and parentId
        `parent` (as parsed) whose message's stand-in is `slim` (`_prepare`)."""
        by_id = self.by_id
        diagnostics = self.diagnostics
        if type(parent) is str and parent:
            earlier = by_id.get(parent)
            if earlier is not None:  # the parent's id string (equal), not a copy
                parent = earlier.id
        else:
            parent = None
        if type(entry_id) is not str:
            entry_id = None
        entry = Entry(MESSAGE, entry_id, parent, "", slim, line_no, offset, length)
        self.entries.append(entry)
        self.leaf_id = entry_id
        missing = diagnostics.missing_parents
        if entry_id is None:
            diagnostics.add(Problem.MISSING_ID, f'"{MESSAGE}" entry without a string id', line_no, offset)
        else:
            earlier = by_id.get(entry_id)
            if earlier is not None:
                diagnostics.add(
                    Problem.DUPLICATE_ID,
                    f"id {entry_id} already used on line {earlier.line_no}; the later entry wins (as in Pi)",
                    line_no,
                    offset,
                )
                self._shadowed.setdefault(entry_id, []).append(earlier)  # before by_id moves on
            by_id[entry_id] = entry
            if missing:
                missing.pop(entry_id, None)
        if parent is not None and parent not in by_id:
            missing.setdefault(parent, []).append(MissingParent(entry_id, line_no))
        return entry

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


SPLIT_BYTES = 4 << 20
"""A file with at least this many bytes after its header is read by two processes
(`read_whole_file`); a smaller one by this process alone (a fork costs a few milliseconds)."""

CHILD_SHARE = 0.40
"""The share of the bytes after the header that the second process prepares. This process
reads its part faster than the copy (which also pickles its records), then adds the copy's
records (~0.15 s to unpickle, 0.06 s to add in C, for 45 % of the 50,000-turn bench session).
Measured as whole `map --json` processes (farm-bench pairs) on that session: 0.45 had the
shortest read while tiktoken counted every text; since ASCII texts are counted in C
(`use_cl100k`) the copy's pickling weighs more: 0.40 against 0.45 0.99, 0.36 against 0.40 1.01."""


def read_whole_file(reader: SlimReader, path: Path) -> int:
    """`reader.feed_whole_file(reader, path)` (same entries, diagnostics and state; returns the
    bytes read), on two cores for a large version-3 session (POSIX `fork`).

    This process reads up to the header; when more than `SPLIT_BYTES` follow, a forked copy
    of it reads the last `CHILD_SHARE` of the file (from a line start) and prepares each line
    (`SlimReader._prepare`: parse, checks, stand-in and count, the costly part) while this
    process reads the first part as usual; then this process adds the prepared lines in file
    order, a chunk at a time (`_add_records`; a line the copy did not take is read here the
    general way). So every change to the reader's state happens here, in file order, as a
    one-process read makes it. The copy writes its results to an unnamed temporary file
    (pickle) and exits; if anything goes wrong with it, this process reads the rest itself.
    Raises what `open_regular` raises."""
    import pickle

    with os.fdopen(open_regular(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        lines = iter_lines(f)
        tail: list[tuple[int, int, bytes]] = []
        for line_no, offset, raw, complete in lines:  # up to the header (usually line 1)
            if not complete:
                tail.append((line_no, offset, raw))
                break
            reader.feed(((line_no, offset, raw),))
            if reader.status != "empty":
                break
        start = reader.end_offset
        split = None
        if (
            not tail and _fast_loads is not None and hasattr(os, "fork") and reader.status == "session"
            and reader.version >= CURRENT_VERSION and size - start >= SPLIT_BYTES
        ):
            split = _line_start(f.fileno(), start + int((size - start) * (1 - CHILD_SHARE)), size)
        spool = pid = None
        if split is not None:
            import tempfile

            try:  # not a pipe: the copy never waits for this process
                spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, or by `with spool`
                pid = os.fork()
            except OSError:  # no temporary file or no process to be had: one process reads
                if spool is not None:
                    spool.close()
                spool = None
        if spool is None or pid is None:  # one process: the rest as `feed_whole_file` reads it
            if tail:  # (`iter_lines` gives an unterminated line at the end of the file)
                end = f.tell()
                reader.feed_final_tail(*tail[0])
                return end
            f.seek(start)
            return _feed_rest(reader, f, start)
        with spool:
            if pid == 0:  # the copy: prepare the lines from `split` on, write them, exit
                status = 1
                try:
                    _prepare_into(spool, reader, path, split)
                    spool.flush()
                    status = 0
                finally:
                    os._exit(status)
            try:
                f.seek(start)
                _feed_from(reader, f, start, split)
            finally:  # (a read error here still reaps the copy)
                _, wait_status = os.waitpid(pid, 0)
            end = None
            if wait_status == 0 and reader.end_offset == split:
                base = reader.last_line_no
                spool.seek(0)
                try:
                    while True:  # chunk by chunk: never all the records at once (peak memory)
                        item = pickle.load(spool)
                        if type(item) is tuple:
                            last, end = item
                            break
                        _add_records(reader, item, base)
                except Exception:  # noqa: BLE001 - a failure of the copy: this process reads the rest
                    end = None
        if end is None:  # from the first line not added (`end_offset` is its start)
            f.seek(reader.end_offset)
            return _feed_rest(reader, f, reader.end_offset)
        if last is not None:
            k, offset, raw, oversized = last
            reader.feed_final_tail(base + k, offset, OversizedLine(raw, oversized) if oversized is not None else raw)
        return end


def _add_records(reader: SlimReader, records: list[tuple[Any, ...]], base: int) -> None:
    """Add the lines the copy prepared (`_prepare_into`), in order, as `feed` adds them; `base`
    = the line number before the copy's first line. Most are added by the C preparer
    (`add_records`); each record it leaves is added here, then it goes on."""
    add = reader._add_prepared
    read = reader._read_line
    add_c = reader._prepare_c.add_records if reader._prepare_c is not None else None
    index, n = 0, len(records)
    while index < n:
        if add_c is not None:
            index = add_c(reader, Entry, records, index, base)
            if index >= n:
                break
        record = records[index]
        index += 1
        if len(record) == 6:
            k, offset, length, entry_id, parent, slim = record
            reader.last_line_no = line_no = base + k
            reader.end_offset = offset + length
            add(entry_id, parent, slim, line_no, offset, length)
        elif len(record) == 3:  # blank lines up to this one: `_read_line` only moves past them
            k, offset, length = record
            reader.last_line_no = base + k
            reader.end_offset = offset + length
        else:
            k, offset, raw, oversized = record
            raw = OversizedLine(raw, oversized) if oversized is not None else raw
            read(base + k, offset, raw, line_length(raw) + 1)
            # the records after it for the general route too (a file of scalars or text): read
            # here without an `add_records` call each
            for record in islice(records, index, None):
                if len(record) != 4:
                    break
                k, offset, raw, oversized = record
                raw = OversizedLine(raw, oversized) if oversized is not None else raw
                read(base + k, offset, raw, line_length(raw) + 1)
                index += 1
    if records:
        reader.diagnostics.pending = None


def _line_start(fd: int, at: int, size: int) -> int | None:
    """The first line start after byte `at` (just past a newline) before byte `size`, or None."""
    position = at
    while position < size:
        chunk = os.pread(fd, 1 << 16, position)
        if not chunk:
            return None
        cut = chunk.find(b"\n")
        if cut != -1:
            start = position + cut + 1
            return start if start < size else None
        position += len(chunk)
    return None


def _record_of(k: int, offset: int, raw: bytes) -> tuple[int, int, bytes, int | None]:
    """A line for the general route: (k, offset, bytes, None), or (k, offset, head, length)
    for an `OversizedLine` (a bytes subclass that pickle cannot remake)."""
    if type(raw) is bytes:
        return k, offset, raw, None
    return k, offset, bytes(raw), line_length(raw)


CHUNK_LINES = 4096
"""Records per pickle the copy writes (`_prepare_into`)."""


def _prepare_into(spool: Any, reader: SlimReader, path: Path, split: int) -> None:
    """In the forked copy: pickle to `spool` the record of each complete line from byte
    `split` on, in order, in lists of at most about `CHUNK_LINES`: (k, offset, length, id,
    parentId, stand-in) when `_prepare` takes the line, (k, offset, length) for the last of a
    run of blank lines the C preparer passed (`prepare_block`), else `_record_of` (k = line
    number - the line number before `split`); then the tuple (the unterminated last line's
    `_record_of` or None, the bytes read)."""
    import pickle

    from ds4core.tokens import MessageCount, PartCount

    pickler = pickle.Pickler(spool, protocol=pickle.HIGHEST_PROTOCOL)
    # The counts' named tuples are remade by `tuple.__new__` (a C call), not by their Python-level
    # `__new__`: this process's unpickling is on the critical path, the copy's pickling is not.
    pickler.dispatch_table = {PartCount: _tuple_reduce, MessageCount: _tuple_reduce}  # type: ignore[misc]

    def dump(value: Any) -> None:
        pickler.dump(value)
        pickler.clear_memo()  # each pickle stands alone (`pickle.load` reads one at a time)

    records: list[tuple[Any, ...]] = []
    append = records.append
    prepare_block = reader._prepare_c.prepare_block if reader._prepare_c is not None else None
    last = None
    k = 0

    def one_line(offset: int, raw: bytes, answer: Any) -> None:  # what `_prepare` answers, then the record
        if type(raw) is not bytes:
            prepared = None
        elif answer is False:
            prepared = reader._prepare_py(offset, raw)
        elif answer is True:  # (not asked yet)
            prepared = reader._prepare(offset, raw)
        else:
            prepared = answer
        if prepared is not None:
            append((k, offset, len(raw) + 1, prepared[0], prepared[1], prepared[2]))
        else:
            append(_record_of(k, offset, raw))

    with os.fdopen(open_regular(path), "rb") as f:
        f.seek(split)
        for base, data, kind in _line_blocks(f, split):
            if kind == _LINE_TAIL:
                last = _record_of(k + 1, base, data)
                break
            if kind == _ONE_LINE:
                k += 1
                one_line(base, data, True)
            else:
                pos = 0
                while pos < len(data):
                    if len(records) >= CHUNK_LINES:  # (inside a block: a block may hold a million lines)
                        dump(records)
                        records.clear()
                    if prepare_block is not None:
                        pos, k, code, answer = prepare_block(records, None, data, pos, base, k, CHUNK_LINES)
                        if code != 1:  # (0: the block is read; 2: `records` is full)
                            if code:
                                continue
                            break
                    else:
                        answer = True
                    cut = data.index(b"\n", pos)
                    k += 1
                    one_line(base + pos, data[pos:cut], answer)
                    pos = cut + 1
            if len(records) >= CHUNK_LINES:
                dump(records)
                records.clear()
        end = f.tell()
    dump(records)
    dump((last, end))


def _tuple_reduce(value: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """Pickle a named tuple as `tuple.__new__(type(value), tuple(value))` (the same value)."""
    return tuple.__new__, (type(value), tuple(value))


def _feed_rest(reader: SlimReader, f: Any, split: int) -> int:
    """Feed the lines from byte `split` (a line start; `f` is there) to the end as
    `feed_whole_file` does (an unterminated last line as at a final read); returns the file
    offset reached."""
    tail = _feed_from(reader, f, split)
    end = f.tell()
    if tail is not None:
        reader.feed_final_tail(*tail)
    return end


BLOCK_BYTES = READ_CHUNK
"""Bytes read at a time by `_line_blocks`; a line longer than this is read by `iter_lines`."""

_LINES, _ONE_LINE, _LINE_TAIL = 0, 1, 2


def _line_blocks(f: Any, offset: int, stop: int | None = None) -> Iterator[tuple[int, bytes, int]]:
    """The file from byte `offset` (a line start; `f` is there) up to byte `stop` (a line
    start) or its end, as (base, data, kind), base = data's file offset, in file order:
    `_LINES`: complete lines, each with its `\n` (about `BLOCK_BYTES` at a time);
    `_ONE_LINE`: one complete line longer than a block, without its `\n`, read by `iter_lines`
    (an `OversizedLine` over its cap), so memory stays bounded by the cap; `_LINE_TAIL`: the
    unterminated last line (never with `stop`: bytes after the last newline before `stop` are
    left, as a read that stops there leaves them). A line of at most a block over the size cap
    comes whole, not as an `OversizedLine`: every check reads such a line the same way (by its
    length), and it is dropped after its diagnostic."""
    base = offset
    carry = b""
    while True:
        want = BLOCK_BYTES if stop is None else min(BLOCK_BYTES, stop - base - len(carry))
        chunk = f.read(want) if want > 0 else b""
        if not chunk:
            break
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            yield base, data[:cut] if cut < len(data) else data, _LINES
            base += cut
        carry = data[cut:] if cut < len(data) else b""
        if len(carry) > BLOCK_BYTES:  # a line longer than a block: the bounded reader reads it
            f.seek(base)
            _, _, raw, complete = next(iter_lines(f))
            if not complete:
                if stop is None:
                    yield base, raw, _LINE_TAIL
                return
            yield base, raw, _ONE_LINE
            base += line_length(raw) + 1
            f.seek(base)
            carry = b""
    if carry and stop is None:
        yield base, carry, _LINE_TAIL


def _feed_from(reader: SlimReader, f: Any, offset: int, stop: int | None = None) -> tuple[int, int, bytes] | None:
    """Feed the complete lines from byte `offset` (a line start; `f` is there) up to byte
    `stop` (a line start) or the end to `reader`, as `reader.feed` reads them (same entries,
    diagnostics and state: tests/sessions/test_slim_blocks.py), and return the unterminated last
    line (line_no, offset, raw), or None. While the reader is past a version-3 header (what
    `feed`'s short route needs), the C preparer's `feed_block` reads whole blocks of lines
    (`_line_blocks`), and each line it leaves is read here (`SlimReader._line_after_c`) with
    the answer it already made; without the C preparer, every line goes through `feed`."""
    block = reader._prepare_c.feed_block if reader._prepare_c is not None else None
    line_no = before = reader.last_line_no
    tail = None
    for base, data, kind in _line_blocks(f, offset, stop):
        if kind == _LINE_TAIL:
            tail = (line_no + 1, base, data)
            break
        if kind == _ONE_LINE:
            line_no += 1
            reader.feed(((line_no, base, data),))
            continue
        pos = 0
        while pos < len(data):
            # (no C preparer, or a line read the general way changed the reader's state: `feed`)
            fast = block is not None and reader.status == "session" and reader.version >= CURRENT_VERSION
            if fast:
                pos, line_no, code, answer = block(reader, Entry, data, pos, base, line_no)
                if not code:
                    break
            cut = data.index(b"\n", pos)
            line_no += 1
            raw = data[pos:cut]  # (over the size cap: read as `iter_lines`' `OversizedLine` would be)
            if fast:
                reader._line_after_c(line_no, base + pos, raw, answer)
            else:
                reader.feed(((line_no, base + pos, raw),))
            pos = cut + 1
    if reader.last_line_no != before:
        reader.diagnostics.pending = None
    return tail
