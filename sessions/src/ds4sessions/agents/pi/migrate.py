"""In-memory migration of version 1 and 2 session files to version 3 (never written back).

Pi session format §3: Pi migrates old files on load (and rewrites them when the agent opens
them; ds4tui never does):

- v1 → v2: each non-header entry gets an id and `parentId` = the previous entry's id (the first
  gets `null`); a compaction's `firstKeptEntryIndex` (an index into the parsed lines, header = 0)
  becomes `firstKeptEntryId` and the index is dropped. Pi draws random 8-hex ids, so two loads
  of the same file differ; ds4tui assigns **deterministic** ids from the line number instead
  (`v1_entry_id`), so a v1 file reads the same every time (they cannot match Pi's ids anyway).
- v2 → v3: the message role `hookMessage` is renamed to `custom` (also for v1 files).

Migration works line by line, so a growing v1 file can be fed incrementally.
"""

from __future__ import annotations

from typing import Any

CURRENT_VERSION = 3
"""The session format version Pi 1.6.0 writes (Pi session format §3)."""


def v1_entry_id(line_no: int) -> str:
    """The id ds4tui gives the v1 entry on 1-based line `line_no`: `v1-` + six-digit line number.

    Deterministic replacement for Pi's random ids (Pi session format §3); cannot collide within a
    file because line numbers are unique. Example: line 2 → `v1-000002`.
    """
    return f"v1-{line_no:06d}"


def header_version(header: dict[str, Any]) -> float:
    """The format version a header declares: its numeric `version`, 1 when absent or null.

    Pi uses `header.version ?? 1` (Pi session format §3). A non-numeric version is taken as
    current (no migration), as Pi's numeric comparisons would also not migrate it.
    """
    version = header.get("version")
    if version is None:
        return 1
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        return version
    return CURRENT_VERSION


class Migrator:
    """Applies Pi's v1→v2→v3 migration to parsed lines as they arrive, in file order.

    Create one per file with the header's version (`header_version`); call `note_item()` for every
    parsed line after the header that is not an entry (a later `session` line, a non-object), and
    `migrate()` for every entry object. Version 3 files pass through untouched.
    """

    def __init__(self, version: float) -> None:
        self.version = version
        self._prev_id: str | None = None
        self._item_ids: list[str | None] = [None]  # index 0 = the header, as in Pi's entry list

    @property
    def needed(self) -> bool:
        """True when the file is older than version 3."""
        return self.version < CURRENT_VERSION

    def note_item(self) -> None:
        """Count a parsed non-entry line, so `firstKeptEntryIndex` keeps Pi's indexing."""
        if self.version < 2:
            self._item_ids.append(None)

    def migrate(self, obj: dict[str, Any], line_no: int) -> dict[str, Any]:
        """Migrate one entry object in place (it must be freshly parsed) and return it."""
        if self.version < 2:
            entry_id = v1_entry_id(line_no)
            obj["id"] = entry_id
            obj["parentId"] = self._prev_id
            self._prev_id = entry_id
            index = obj.get("firstKeptEntryIndex")
            if obj.get("type") == "compaction" and isinstance(index, (int, float)) and not isinstance(index, bool):
                del obj["firstKeptEntryIndex"]
                # Pi: `entries[index]`; the id is set only when it names an entry already read
                if 0 < index < len(self._item_ids) and index == int(index):
                    target = self._item_ids[int(index)]
                    if target is not None:
                        obj["firstKeptEntryId"] = target
            self._item_ids.append(entry_id)
        if self.version < 3 and obj.get("type") == "message":
            message = obj.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"
        return obj
