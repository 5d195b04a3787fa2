"""Pi session entries: one `Entry` per non-header line, the parsed object kept whole.

Pi session format §4-§5: every non-header line has `type`, `id`, `parentId`, `timestamp`; the
rest depends on the type. Messages stay plain dicts exactly as Pi stores them, so unknown fields
survive and Pi's JSON can be reproduced in meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MESSAGE = "message"
MODEL_CHANGE = "model_change"
THINKING_LEVEL_CHANGE = "thinking_level_change"
COMPACTION = "compaction"
BRANCH_SUMMARY = "branch_summary"
CUSTOM = "custom"
CUSTOM_MESSAGE = "custom_message"
LABEL = "label"
SESSION_INFO = "session_info"
USAGE = "usage"
CONTEXT_EDIT = "context_edit"

KNOWN_TYPES = frozenset(
    {
        MESSAGE,
        MODEL_CHANGE,
        THINKING_LEVEL_CHANGE,
        COMPACTION,
        BRANCH_SUMMARY,
        CUSTOM,
        CUSTOM_MESSAGE,
        LABEL,
        SESSION_INFO,
        USAGE,
        CONTEXT_EDIT,
    }
)
"""Entry types of Pi 1.6.0 (Pi session format §5); any other type is kept and ignored."""

CONTEXT_TYPES = frozenset({MESSAGE, COMPACTION, BRANCH_SUMMARY, CUSTOM_MESSAGE})
"""Entry types that can put a message into the LLM context (Pi session format §5, §7 step 5)."""


class StandIn(dict):  # type: ignore[type-arg]
    """A `message` entry's message, kept without its content by a one-shot reader that counted
    it as it was read (`ds4sessions.agents.pi.slim`); a plain dict in every other respect.
    Such an entry's `raw` is the stand-in itself (`Entry.message` returns it). `counted` =
    (counter name, the message's `MessageCount` by that counter), when it is in the LLM context."""

    __slots__ = ("counted",)


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry (non-header line) of a Pi session file.

    - `type`: the entry type (§5), "" when the line has no string `type`;
    - `id` / `parent_id`: tree links (§4); `id` is None when the line has no string id,
      `parent_id` is None for a root (also for an empty or non-string `parentId`);
    - `timestamp`: the entry's ISO-8601 string as stored ("" if absent);
    - `raw`: the whole parsed object, unknown fields kept (for v1/v2 files: after the in-memory
      migration, see `ds4sessions.agents.pi.migrate`); treat it as read-only. (A one-shot
      `SlimReader` keeps only the message's `StandIn` here: see `message`.);
    - `line_no`: 1-based line number in the file; `offset`: byte offset of the line start;
      `length`: bytes of the line including its newline (a torn last line has none).
    """

    type: str
    id: str | None
    parent_id: str | None
    timestamp: str
    raw: dict[str, Any]
    line_no: int
    offset: int
    length: int

    @property
    def message(self) -> dict[str, Any] | None:
        """The agent message of a `message` entry (§6), else None."""
        if self.type != MESSAGE:
            return None
        raw = self.raw
        if type(raw) is StandIn:
            return raw
        message = raw.get("message")
        return message if isinstance(message, dict) else None

    @property
    def role(self) -> str | None:
        """The message role of a `message` entry (`user`, `assistant`, `toolResult`, …), else None."""
        message = self.message
        if message is None:
            return None
        role = message.get("role")
        return role if isinstance(role, str) else None

    @property
    def is_known_type(self) -> bool:
        """True for the entry types Pi 1.6.0 writes (§5)."""
        return self.type in KNOWN_TYPES
