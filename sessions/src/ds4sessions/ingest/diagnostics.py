"""Counted, visible problems found while reading a session file.

A reader never raises for bad file content: every problem becomes a `Diagnostic` here, is counted
by kind, and can be shown to the user (`Diagnostics.summary()`). The kinds follow the reader
checklist of the Pi session format (§11): malformed lines, UTF-8 BOM, invalid UTF-8, non-object
lines, a missing or invalid header, entries without an id, duplicate ids, parents that name no
entry, and a partial last line (pending while the writer may still finish it, "partial" at a
final read).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum


class Problem(StrEnum):
    """Kinds of problems a session reader reports (Pi session format §11)."""

    BOM = "bom"
    """The file starts with a UTF-8 byte order mark (Pi itself rejects such a file)."""
    INVALID_UTF8 = "invalid_utf8"
    """The line holds bytes that are not valid UTF-8 (decoded with U+FFFD, as Node does)."""
    MALFORMED = "malformed"
    """The line is not valid JSON (Pi skips it)."""
    NON_OBJECT = "non_object"
    """The line is valid JSON but not an object (e.g. `null`, `42`, a list)."""
    NOT_A_SESSION = "not_a_session"
    """The first parsable line is not `{"type":"session","id":<string>}`."""
    EXTRA_HEADER = "extra_header"
    """A `session` line after the header (Pi ignores it; it is no entry)."""
    MISSING_ID = "missing_id"
    """An entry without a string `id` (kept in file order, not addressable)."""
    DUPLICATE_ID = "duplicate_id"
    """An entry reuses an earlier entry's id (the later one wins, as in Pi's index)."""
    MISSING_PARENT = "missing_parent"
    """An entry's `parentId` names no entry of the file (the branch path ends there)."""
    OVERSIZED = "oversized"
    """The line is longer than the size cap (`ingest.limits.MAX_LINE_BYTES`); skipped unread."""
    TOO_DEEP = "too_deep"
    """The line's JSON nests deeper than `ingest.limits.MAX_DEPTH`; skipped before parsing."""
    BAD_FIELD = "bad_field"
    """An entry field has a type Pi never writes (`"text": 5`, a tool call id object, usage
    2**70, a lone surrogate); replaced by a neutral value (`agents.pi.schema`)."""
    PARTIAL_LAST_LINE = "partial_last_line"
    """At a final read, the unterminated last line is not a complete JSON object (Pi skips it)."""


MAX_KEPT_PER_KIND = 200
"""Diagnostics kept per kind (all are counted; only the first ones are kept for display)."""

EXCERPT_CHARS = 80
"""Characters of a bad line shown in a diagnostic."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem.

    `line_no` is 1-based, `offset` the byte offset of the line start (both None when the problem
    is not tied to a line); `excerpt` holds the first `EXCERPT_CHARS` characters of the line as
    read (shown quoted and escaped by `__str__`, so control characters stay visible).
    """

    kind: Problem | str  # (a line-based reader's own kinds are strings: `agents.base.LineDiagnostic`)
    message: str
    line_no: int | None = None
    offset: int | None = None
    excerpt: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line_no} (byte {self.offset}): " if self.line_no is not None else ""
        shown = f" — {json.dumps(self.excerpt, ensure_ascii=False)}" if self.excerpt is not None else ""
        return f"{where}{self.message}{shown}"


@dataclass(frozen=True, slots=True)
class PendingTail:
    """An unterminated last line held back while the writer may still finish it (not a problem yet).

    `line_no` is the line it will become, `offset` its first byte, `length` its bytes so far.
    """

    line_no: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class MissingParent:
    """An entry whose `parentId` names no entry (yet): the entry's id and line."""

    entry_id: str | None
    line_no: int


@dataclass
class Diagnostics:
    """All problems of one session file, counted by kind.

    - `items`: kept diagnostics in the order found (at most `MAX_KEPT_PER_KIND` per kind);
    - `counts`: how many of each kind were found (never capped);
    - `missing_parents`: parent id → entries naming it, while no entry with that id has been read
      (a parent that shows up later in the file resolves them);
    - `unknown_types`: entry type → count, for entry types this reader does not know (kept and
      ignored like Pi does; information, not a problem);
    - `pending`: the held-back partial last line, if the tailer reports one.
    """

    items: list[Diagnostic] = field(default_factory=list)
    counts: Counter[Problem] = field(default_factory=Counter)
    missing_parents: dict[str, list[MissingParent]] = field(default_factory=dict)
    unknown_types: Counter[str] = field(default_factory=Counter)
    pending: PendingTail | None = None

    def add(
        self,
        kind: Problem,
        message: str,
        line_no: int | None = None,
        offset: int | None = None,
        excerpt: str | None = None,
    ) -> None:
        """Count one problem and keep it for display unless its kind already has enough."""
        self.counts[kind] += 1
        if self.counts[kind] <= MAX_KEPT_PER_KIND:
            self.items.append(Diagnostic(kind, message, line_no, offset, excerpt))

    def copy(self) -> Diagnostics:
        """An independent copy (what a frozen snapshot holds): O(kept items + orphans)."""
        return Diagnostics(
            items=list(self.items),
            counts=Counter(self.counts),
            missing_parents={parent: list(children) for parent, children in self.missing_parents.items()},
            unknown_types=Counter(self.unknown_types),
            pending=self.pending,
        )

    def count(self, kind: Problem) -> int:
        """How many problems of `kind` were found (missing parents: entries still orphaned)."""
        if kind is Problem.MISSING_PARENT:
            return sum(len(children) for children in self.missing_parents.values())
        return self.counts[kind]

    def of_kind(self, kind: Problem) -> list[Diagnostic]:
        """The kept diagnostics of one kind, in file order (missing parents: built on demand)."""
        if kind is Problem.MISSING_PARENT:
            return [
                Diagnostic(kind, f"entry {child.entry_id} names missing parent {parent}", child.line_no)
                for parent, children in self.missing_parents.items()
                for child in children
            ]
        return [d for d in self.items if d.kind is kind]

    @property
    def total(self) -> int:
        """Number of problems of all kinds (the pending tail is not a problem)."""
        return sum(self.count(kind) for kind in Problem)

    def summary(self) -> str:
        """One line per problem kind found, e.g. `malformed: 1 (line 23)`; "no problems" if none.

        Lists up to three line numbers per kind, the unknown entry types and the pending tail.
        """
        parts: list[str] = []
        for kind in Problem:
            n = self.count(kind)
            if not n:
                continue
            lines = [d.line_no for d in self.of_kind(kind) if d.line_no is not None][:3]
            where = f" (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}{', …' if n > 3 else ''})" if lines else ""
            parts.append(f"{kind.value}: {n}{where}")
        if self.unknown_types:
            kinds = ", ".join(f"{name} ×{n}" for name, n in sorted(self.unknown_types.items()))
            parts.append(f"unknown entry types (kept, not in context): {kinds}")
        if self.pending is not None:
            parts.append(
                f"pending: partial line {self.pending.line_no} ({self.pending.length} bytes at byte "
                f"{self.pending.offset}) waits for its newline"
            )
        return "\n".join(parts) if parts else "no problems"
