"""Incremental reader of Pi session files (JSONL): header, entries, id index, labels, name, leaf.

Rules from the Pi session format (§3, §4, §8, §11) and Pi's `SessionManager` (SM):

- One JSON object per line. Blank lines are skipped; a line that does not parse is skipped and
  counted (Pi skips every malformed line anywhere); CRLF works (the `\\r` is JSON whitespace).
- Header first: blank and malformed lines before it are skipped; the first parsable line must be
  `{"type":"session","id":<string>}`, otherwise the file is **not a session** (Pi refuses it).
  ds4tui still reads the rest read-only (a salvage, reported via `status`) and assumes version 3.
- A UTF-8 BOM makes Pi reject the file (it does not strip it). ds4tui reports the BOM as a
  diagnostic that says so, strips it and reads on.
- Invalid UTF-8 is decoded with U+FFFD, as Node's `readFileSync(…, "utf8")` does, and counted.
- v1/v2 files are migrated in memory only (`ds4sessions.agents.pi.migrate`); the file is never opened
  for writing.
- `by_id`: a later duplicate id wins; `labels`: resolved over the whole file in file order, the
  last label entry per target wins, an absent/empty label clears it; `session_name`: the last
  `session_info` in file order, trimmed, empty clears; `leaf_id`: the last entry in file order,
  whatever its type.

`PiSessionReader.feed()` does work proportional to the new lines only, so the tailer can call it
on every append. `read_session()` reads a whole file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from ds4sessions.ingest.diagnostics import EXCERPT_CHARS, Diagnostics, MissingParent, PendingTail, Problem
from ds4sessions.agents.pi.entries import KNOWN_TYPES, LABEL, MESSAGE, SESSION_INFO, Entry
from ds4sessions.ingest.limits import (
    MAX_LINE_BYTES,
    NOT_PARSED,
    OversizedLine,
    iter_lines,
    line_length,
    line_problem,
    line_problem_and_value,
)
from ds4sessions.safety import open_regular
from ds4sessions.agents.pi.schema import conform_entry, has_surrogate_escape
from ds4sessions.agents.pi.migrate import CURRENT_VERSION, Migrator, header_version

BOM = b"\xef\xbb\xbf"

SessionStatus = Literal["empty", "session", "not_a_session"]
"""`empty`: no parsable line yet (a 0-byte file is an empty session, not an error);
`session`: a valid header was read; `not_a_session`: the first parsable line is no header."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


try:
    from orjson import JSONDecodeError as _FastError, loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib alone stays exact
    _fast_loads = None


def _parse_json(text: str) -> Any:
    """`JSON.parse` semantics: NaN/Infinity are rejected like in JavaScript. Raises ValueError.

    orjson parses first (3.5× the stdlib's speed; object keys are cached and shared, so the
    parsed entries take less memory). A line orjson refuses goes to the stdlib, which decides:
    a lone surrogate escape (`"\\ud800"`, valid for JSON.parse and the stdlib, refused by
    orjson), `1e400` (Infinity, as in JavaScript), nesting beyond orjson's 1,024 levels, and
    every malformed line (so error messages are the stdlib's). Both keep the last of duplicate
    keys at the first one's position, as JavaScript does. One difference from the stdlib, in
    JavaScript's favour: an integer outside [-2⁶³, 2⁶⁴) becomes the nearest float, as
    JSON.parse makes it a double (the stdlib keeps an exact int; tokens are equal either way
    because `ds4core.jsjson` writes such ints as the double).
    """
    if _fast_loads is not None:
        try:
            return _fast_loads(text)
        except _FastError:
            pass
    return json.loads(text, parse_constant=_reject_constant)


class PiSession:
    """The state read from one Pi session file (what `build_context` consumes).

    Attributes (all grow in place as a `PiSessionReader` is fed; copy what must stay fixed):

    - `path`: the file, when known;
    - `header`: the header object as stored (not migrated), or None;
    - `status`: `SessionStatus`;
    - `version`: the format version the file declares (1 when the header has none; 3 assumed for
      a file without a header);
    - `entries`: every entry in file order, unknown types included;
    - `by_id`: id → entry (a later duplicate id wins);
    - `labels`: target id → label text, in Pi's insertion order;
    - `session_name`: the current name, or None;
    - `leaf_id`: id of the last entry in file order (None when there is none or it has no id);
    - `diagnostics`: the problems found;
    - `end_offset`: byte offset just past the last complete line read (where a torn tail starts);
    - `last_line_no`: number of the last line read (0 before any);
    - `identity`: a number shared by a reader and every frozen copy of it (`PiSessionReader.freeze`),
      for per-session caches: the same file read by the same reader.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.header: dict[str, Any] | None = None
        self.status: SessionStatus = "empty"
        self.version: float = CURRENT_VERSION
        self.entries: list[Entry] = []
        self.by_id: dict[str, Entry] = {}
        self.labels: dict[str, str] = {}
        self.session_name: str | None = None
        self.leaf_id: str | None = None
        self.diagnostics = Diagnostics()
        self.end_offset = 0
        self.last_line_no = 0
        self.identity = id(self)

    @property
    def session_id(self) -> str | None:
        """The session id from the header (None without a valid header)."""
        return self.header.get("id") if self.header is not None else None

    @property
    def cwd(self) -> str | None:
        """The working directory from the header (None when absent)."""
        cwd = self.header.get("cwd") if self.header is not None else None
        return cwd if isinstance(cwd, str) else None

    @property
    def parent_session(self) -> str | None:
        """Path of the session this one was forked from: `parentSession` (v1: `branchedFrom`)."""
        if self.header is None:
            return None
        parent = self.header.get("parentSession", self.header.get("branchedFrom"))
        return parent if isinstance(parent, str) else None

    @property
    def migrated(self) -> bool:
        """True when the file is an older version migrated in memory (Pi would rewrite it)."""
        return self.version < CURRENT_VERSION

    @property
    def entry_count(self) -> int:
        """Entries read (`len(entries)`; what every agent's session state answers)."""
        return len(self.entries)

    @property
    def leaf(self) -> Entry | None:
        """The last entry in file order (Pi's leaf on load), or None."""
        return self.entries[-1] if self.entries else None


_MAY_BE_PLAIN = frozenset([b"", *(bytes([c]) for c in b"{ \t\r\x0b\x0c\x1c\x1d\x1e\x1f")])
"""The first byte (`raw[:1]`) of a line `feed_lines` may read (a JSON object, maybe after
whitespace, or a blank or empty line): `_feed_batch` reads any other line itself. (A set: `in`
a bytes string is a substring search, ~5x slower per line.)"""

C_LINES_PER_CALL = 500
"""Lines the C short route reads per call (`_feed_batch`): ~2 ms. The dashboard reads on a worker
thread; between calls Python may hand the GIL to its event loop (a 16 MiB slice in one call held
it ~0.2 s and delayed the first paint of a large session by ~60 ms)."""


_SHARED_MESSAGE_KEYS = ("role", "provider", "model", "api", "stopReason", "toolName")
"""A message's keys whose string values repeat across a session (`slim._SHARED_VALUES`)."""


def _share_values(obj: dict[str, Any], shared: dict[str, str], by_id: Mapping[str, Entry]) -> None:
    """Make the values of a parsed `message` entry that repeat across a session one object each,
    in place (issue 32: ~340 bytes an entry of a 10,000-turn session): equal values, so the
    entry reads the same. `type` "message" is the module's constant; a `parentId` read before
    is that entry's own id string; the message's `_SHARED_MESSAGE_KEYS` values and each content
    block's `type` (and a tool call's `name`) are the first equal string `shared` holds. What
    the C route does as it adds an entry (`_cprep.Preparer.feed_lines`)."""
    obj["type"] = MESSAGE
    parent = obj.get("parentId")
    if type(parent) is str and parent:
        earlier = by_id.get(parent)
        if earlier is not None and type(earlier.id) is str and earlier.id is not parent:
            obj["parentId"] = earlier.id
    message = obj.get("message")
    if type(message) is not dict:
        return
    share = shared.setdefault
    for key in _SHARED_MESSAGE_KEYS:
        value = message.get(key)
        if type(value) is str:
            message[key] = share(value, value)
    content = message.get("content")
    if type(content) is list:
        for block in content:
            if type(block) is dict:
                kind = block.get("type")
                if type(kind) is str:
                    block["type"] = kind = share(kind, kind)
                    if kind == "toolCall":
                        name = block.get("name")
                        if type(name) is str:
                            block["name"] = share(name, name)


class PiSessionReader(PiSession):
    """Builds a `PiSession` from complete lines, incrementally.

    Feed it the complete lines of one file in order (`feed`), e.g. from the tailer. After the
    tailer reports a reset (file truncated or rewritten), start a new reader. Never raises for bad
    content; everything is recorded in `diagnostics`.
    """

    def __init__(self, path: Path | None = None, parse: Callable[[int, bytes], Any] | None = None) -> None:
        """`parse`: a check and parse of a line in C (`slim.c_parser()`, `_cprep.Preparer.parse`:
        the parsed entry of a line that is plainly a well-formed message entry, else False); a
        version-3 session's lines after its header then take that short route when it answers,
        the others the general one (`_read_line`), with the same entries and diagnostics either
        way. None: every line the general way."""
        super().__init__(path)
        self._shadowed: dict[str, list[Entry]] = {}  # id → earlier entries a later duplicate replaced
        self._shared: dict[str, str] = {}  # repeated string values, one object each (`_share_values`)
        self._migrator = Migrator(CURRENT_VERSION)
        self._first_content: tuple[int, int] | None = None  # (line, offset) of the first non-blank line
        self._parse = parse
        # The C preparer's whole-batch route (`feed_lines`) when `parse` is its `parse` method.
        preparer = getattr(parse, "__self__", None)
        self._feed_c = getattr(preparer, "feed_lines", None) if type(preparer).__name__ == "Preparer" else None

    def feed(self, lines: Iterable[tuple[int, int, bytes]]) -> list[Entry]:
        """Read complete lines: (1-based line number, byte offset of the line start, the line's
        bytes without its `\\n`; a trailing `\\r` is allowed). Returns the new entries, in order.

        Work is proportional to the new lines. Feeding any line clears a pending tail (it is the
        completed line, or a new tail follows): after each tailer poll call `feed(batch.lines)`,
        then `set_pending_tail(batch.pending_bytes)`.
        """
        feed_c = self._feed_c
        if feed_c is not None and type(lines) in (list, tuple):
            return self._feed_batch(lines, feed_c)  # type: ignore[arg-type]
        new: list[Entry] = []
        before = self.last_line_no
        parse = self._parse
        for line_no, offset, raw in lines:
            if parse is not None and self.status == "session" and self.version >= CURRENT_VERSION:
                # a plain message line: every check of `_read_line` is known to pass (a plain
                # `bytes` line under the size cap, not too deep, valid UTF-8 JSON, no lone
                # surrogate, an object of the plain message keys whose message conforms, so
                # `conform_entry` fixes nothing and a version-3 entry needs no migration)
                obj = parse(offset, raw)
                if obj is not False:
                    length = len(raw) + 1
                    self.last_line_no = line_no
                    self.end_offset = offset + length
                    new.append(self._add_entry(obj, line_no, offset, length))
                    continue
            entry = self._read_line(line_no, offset, raw, line_length(raw) + 1)
            if entry is not None:
                new.append(entry)
        if self.last_line_no != before:
            self.diagnostics.pending = None
        return new

    def _feed_batch(self, lines: list[tuple[int, int, bytes]] | tuple[tuple[int, int, bytes], ...], feed_c: Any) -> list[Entry]:
        """`feed(lines)` for a list or tuple of lines, with the short route in C for whole runs
        of lines (`_cprep.Preparer.feed_lines`: parse and add each plain message line, no Python
        frame per line); each line it leaves is read here as the loop of `feed` reads it, with
        the entry it parsed. Same entries, diagnostics and state (tests/sessions/test_c_reader.py)."""
        start = len(self.entries)
        before = self.last_line_no
        read = self._read_line
        index, n = 0, len(lines)
        while index < n:
            obj = None
            if self.status == "session" and self.version >= CURRENT_VERSION:
                index, obj = feed_c(self, Entry, lines, index, C_LINES_PER_CALL)
                if obj is True or index >= n:  # (True: `C_LINES_PER_CALL` lines read; go on)
                    continue
            line_no, offset, raw = lines[index]
            if obj is not None:  # plain, but an entry `_add_entry` reports on or records
                length = len(raw) + 1
                self.last_line_no = line_no
                self.end_offset = offset + length
                self._add_entry(obj, line_no, offset, length)
            else:  # not plain, or not after a version-3 header: the general route
                read(line_no, offset, raw, line_length(raw) + 1)
            index += 1
            # the lines after it that `feed_lines` would leave too (not a JSON object, not blank:
            # a file of scalars or text), read here without a C call each
            for line_no, offset, raw in islice(lines, index, None):
                if raw[:1] in _MAY_BE_PLAIN:
                    break
                read(line_no, offset, raw, line_length(raw) + 1)
                index += 1
        if self.last_line_no != before:
            self.diagnostics.pending = None
        return self.entries[start:]

    def set_pending_tail(self, length: int) -> None:
        """Record (length > 0) or clear (0) the partial last line the tailer holds back.

        It starts at `end_offset` and will be line `last_line_no + 1`; it is not a problem while
        the writer may still finish it (Pi session format §2).
        """
        self.diagnostics.pending = (
            PendingTail(self.last_line_no + 1, self.end_offset, length) if length > 0 else None
        )

    def feed_final_tail(self, line_no: int, offset: int, raw: bytes) -> Entry | None:
        """Read the unterminated last line at a final (idle) read, as Pi does on load.

        A complete JSON object is accepted as an entry (Pi parses it too); anything else is skipped
        and counted as `Problem.PARTIAL_LAST_LINE`. Returns the entry, if any.
        """
        self.diagnostics.pending = None
        text = (raw[len(BOM) :] if offset == 0 and raw.startswith(BOM) else raw).decode("utf-8", "replace")
        if text.strip() and line_problem(raw) is not None:
            # too long or too deep: said as for a complete line (not "an interrupted writer")
            return self._read_line(line_no, offset, raw, len(raw))
        try:
            obj = _parse_json(text) if text.strip() else None
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            if text.strip():
                self.diagnostics.add(
                    Problem.PARTIAL_LAST_LINE,
                    f"unterminated last line of {len(raw)} bytes is not a complete JSON object "
                    "(skipped, as Pi does; a writer was probably interrupted)",
                    line_no,
                    offset,
                    text[:EXCERPT_CHARS],
                )
            self.last_line_no = line_no
            return None
        return self._read_line(line_no, offset, raw, len(raw))

    def _read_line(self, line_no: int, offset: int, raw: bytes, length: int) -> Entry | None:
        diagnostics = self.diagnostics
        self.last_line_no = line_no
        self.end_offset = offset + length
        too_big, parsed = line_problem_and_value(raw)  # before any parser: size cap and depth bound (ingest.limits)
        if too_big is not None:
            kind = Problem.OVERSIZED if isinstance(raw, OversizedLine) or len(raw) > MAX_LINE_BYTES else Problem.TOO_DEEP
            diagnostics.add(kind, too_big, line_no, offset, raw[:EXCERPT_CHARS].decode("utf-8", "replace"))
            return None
        if offset == 0 and raw.startswith(BOM):
            diagnostics.add(
                Problem.BOM,
                "file starts with a UTF-8 BOM: Pi itself rejects this file (it does not strip the "
                "BOM, so the header does not parse); ds4tui strips it and reads on",
                line_no,
                offset,
            )
            raw = raw[len(BOM) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            text = raw.decode("utf-8", "replace")
            diagnostics.add(
                Problem.INVALID_UTF8,
                f"invalid UTF-8 at byte {offset + err.start} (decoded as U+FFFD, as Pi does)",
                line_no,
                offset,
            )
        if not text.strip():
            return None
        if self._first_content is None:
            self._first_content = (line_no, offset)
        try:
            # a large line whose depth was measured on orjson's parse of its bytes: that parse
            # is `_parse_json(text)` (valid UTF-8 that orjson accepts), not made a second time
            obj = _parse_json(text) if parsed is NOT_PARSED else parsed
        except ValueError as err:
            diagnostics.add(Problem.MALFORMED, f"not valid JSON ({err}); skipped", line_no, offset, text[:EXCERPT_CHARS])
            return None
        if self.status == "empty":
            self._read_header(obj, line_no, offset, text)
            if self.status == "session":
                return None
        if not isinstance(obj, dict):
            diagnostics.add(
                Problem.NON_OBJECT, f"JSON {type(obj).__name__}, not an object; skipped", line_no, offset, text[:EXCERPT_CHARS]
            )
            self._migrator.note_item()
            return None
        if obj.get("type") == "session":
            diagnostics.add(Problem.EXTRA_HEADER, "second session header; ignored (as Pi does)", line_no, offset)
            self._migrator.note_item()
            return None
        obj, fixes = conform_entry(obj, surrogates=has_surrogate_escape(raw))  # wrong-typed fields (agents.pi.schema)
        if fixes:
            shown = ", ".join(fixes[:4]) + (f", … ({len(fixes)} fields)" if len(fixes) > 4 else "")
            diagnostics.add(Problem.BAD_FIELD, f"fields of the wrong type, replaced: {shown}", line_no, offset)
        return self._add_entry(self._migrator.migrate(obj, line_no), line_no, offset, length)

    def _read_header(self, obj: Any, line_no: int, offset: int, text: str) -> None:
        if isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str):
            self.header = obj
            self.status = "session"
            self.version = header_version(obj)
            self._migrator = Migrator(self.version)
            return
        self.status = "not_a_session"
        first_line, first_offset = self._first_content or (line_no, offset)
        what = f'a "{obj.get("type")}" entry' if isinstance(obj, dict) and "type" in obj else "no session header"
        skipped = f"line {first_line} does not parse; " if first_line != line_no else ""
        self.diagnostics.add(
            Problem.NOT_A_SESSION,
            f"header invalid at line {first_line}: {skipped}the first parsable line (line {line_no}) is {what}, "
            'not {"type":"session","id":<string>}. Pi refuses this file. Read-only salvage: version 3 '
            "assumed, session id unknown (the file name may supply it); never append to this file",
            first_line,
            first_offset,
            text[:EXCERPT_CHARS] if first_line == line_no else None,
        )

    def _add_entry(self, obj: dict[str, Any], line_no: int, offset: int, length: int) -> Entry:
        diagnostics = self.diagnostics
        entry_type = obj.get("type")
        entry_id = obj.get("id")
        parent_id = obj.get("parentId")
        timestamp = obj.get("timestamp")
        if entry_type == MESSAGE and type(obj) is dict:
            entry_type = MESSAGE
            _share_values(obj, self._shared, self.by_id)
            parent_id = obj.get("parentId")
        entry = Entry(
            type=entry_type if isinstance(entry_type, str) else "",
            id=entry_id if isinstance(entry_id, str) else None,
            parent_id=parent_id if isinstance(parent_id, str) and parent_id else None,
            timestamp=timestamp if isinstance(timestamp, str) else "",
            raw=obj,
            line_no=line_no,
            offset=offset,
            length=length,
        )
        self.entries.append(entry)
        self.leaf_id = entry.id
        if entry.type not in KNOWN_TYPES:
            diagnostics.unknown_types[entry.type] += 1

        if entry.id is None:
            diagnostics.add(Problem.MISSING_ID, f'"{entry.type}" entry without a string id', line_no, offset)
        else:
            earlier = self.by_id.get(entry.id)
            if earlier is not None:
                diagnostics.add(
                    Problem.DUPLICATE_ID,
                    f"id {entry.id} already used on line {earlier.line_no}; the later entry wins (as in Pi)",
                    line_no,
                    offset,
                )
                self._shadowed.setdefault(entry.id, []).append(earlier)  # before by_id moves on
            self.by_id[entry.id] = entry
            diagnostics.missing_parents.pop(entry.id, None)
        if entry.parent_id is not None and entry.parent_id not in self.by_id:
            diagnostics.missing_parents.setdefault(entry.parent_id, []).append(MissingParent(entry.id, line_no))

        if entry.type == LABEL:
            target = obj.get("targetId")
            if isinstance(target, str):
                label = obj.get("label")
                if isinstance(label, str) and label:
                    self.labels[target] = label
                else:
                    self.labels.pop(target, None)
        elif entry.type == SESSION_INFO:
            name = obj.get("name")
            self.session_name = (name.strip() or None) if isinstance(name, str) else None
        return entry


    def freeze(self) -> PiSession:
        """A read-only `PiSession` of the state now, that later `feed` calls do not change.

        Cheap (O(labels + diagnostics), not O(entries)): entries are append-only, so the frozen
        session sees a prefix of the same list (`EntryPrefix`) and an id index that ignores entries
        read later (`IdIndexAt`); header, status, leaf, name, labels and diagnostics are copied.
        Safe to read on another thread while this reader is fed (list/dict reads are atomic in
        CPython).
        """
        frozen = PiSession(self.path)
        frozen.header = self.header
        frozen.status = self.status
        frozen.version = self.version
        frozen.entries = EntryPrefix(self.entries, len(self.entries))  # type: ignore[assignment]
        frozen.by_id = IdIndexAt(self.by_id, self._shadowed, self.last_line_no, len(self.by_id))  # type: ignore[assignment]
        frozen.labels = dict(self.labels)
        frozen.session_name = self.session_name
        frozen.leaf_id = self.leaf_id
        frozen.diagnostics = self.diagnostics.copy()
        frozen.end_offset = self.end_offset
        frozen.last_line_no = self.last_line_no
        frozen.identity = self.identity
        return frozen


class EntryPrefix(Sequence[Any]):
    """The first `length` items of an append-only list, as a read-only sequence (O(1) to make).

    Used for a frozen session's entries and for the planner inputs' per-message columns: the
    owner only ever appends to the list (or replaces it with a new one), so the prefix never
    changes."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Entry], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            return self._items[start:stop:step]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("entry index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._items[: self._length])

    @property
    def base(self) -> list[Entry]:
        """The underlying append-only list (valid for indices below `len(self)`)."""
        return self._items

    def __reversed__(self) -> Iterator[Entry]:
        items = self._items
        for i in range(self._length - 1, -1, -1):
            yield items[i]

    def __repr__(self) -> str:
        return f"EntryPrefix({self._length} entries)"


class IdIndexAt(Mapping[str, Entry]):
    """A reader's `by_id` as it was after line `last_line_no` (O(1) to make).

    Entries read later are invisible; an id a later duplicate took over maps to the entry that
    held it then (from the reader's record of replaced entries). `len` is the id count then.
    """

    __slots__ = ("_live", "_shadowed", "_last_line", "_length")

    def __init__(self, live: dict[str, Entry], shadowed: dict[str, list[Entry]], last_line_no: int, length: int) -> None:
        self._live = live
        self._shadowed = shadowed
        self._last_line = last_line_no
        self._length = length

    def get(self, key, default=None):  # type: ignore[override]
        entry = self._live.get(key)
        if entry is None:
            return default
        if entry.line_no <= self._last_line:
            return entry
        for earlier in reversed(self._shadowed.get(key, ())):
            if earlier.line_no <= self._last_line:
                return earlier
        return default

    def __getitem__(self, key: str) -> Entry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[str]:
        return (key for key in list(self._live) if self.get(key) is not None)

    def __repr__(self) -> str:
        return f"IdIndexAt({self._length} ids, line {self._last_line})"


def read_session(path: str | Path) -> PiSession:
    """Read a whole Pi session file (binary, streamed line by line; never opened for writing).

    An unterminated last line is handled as at a final read (`PiSessionReader.feed_final_tail`):
    a complete JSON object is an entry, a torn fragment is skipped and counted. A missing file
    raises `FileNotFoundError` (an `OSError`), a FIFO/device/socket `NotRegularFile` (an
    `OSError`, never opened for reading); bad content never raises. Lines over the size cap or
    nested too deep are skipped and counted (`ds4sessions.ingest.limits`).
    """
    path = Path(path)
    reader = PiSessionReader(path)
    feed_whole_file(reader, path)
    return reader


def feed_whole_file(reader: Any, path: Path) -> int:
    """Feed every line of `path` to `reader` (a `PiSessionReader` or one with its `feed` /
    `feed_final_tail`), streamed; an unterminated last line goes to `feed_final_tail` as at a
    final read. Returns the bytes read. Raises what `open_regular` raises (a missing file, a
    FIFO/device/socket)."""
    tail: tuple[int, int, bytes] | None = None

    def complete_lines(f: Any) -> Iterable[tuple[int, int, bytes]]:
        nonlocal tail
        for line_no, offset, raw, complete in iter_lines(f):
            if complete:
                yield line_no, offset, raw
            else:
                tail = (line_no, offset, raw)

    with os.fdopen(open_regular(path), "rb") as f:
        reader.feed(complete_lines(f))
        size = f.tell()
    if tail is not None:
        reader.feed_final_tail(*tail)
    return size
