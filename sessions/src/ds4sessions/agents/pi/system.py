"""Pi 1.x system messages replayed into the one system message a request carries.

Pi stores `system` messages in the session (the first one with the prompt and tools, later ones
with changes). pi-ai 1.6.0 (`transcript.js` `getCurrentSystemMessage`, `utils/text.js`
`contentText`, `getSystemMessageText`; checked in `.cache/pi`) folds them, in order, into one:

- `content`: every non-empty message content is *appended*, joined by a blank line (a string as
  is; else its `text` blocks joined by `\\n`);
- `sections`: patched by name (`null` deletes one), in first-set order;
- tools: `toolsRemoved` then `toolsAdded` of each message, by `name`;
- `timestamp`: the first system message's (0 when only tools exist).

The effective prompt text is the content, then each section, non-empty parts blank-line joined.
This is the one replay in ds4tui: the planner inputs (fixed tokens, spec §1.3) and the compaction
port both use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ds4sessions.agents.base import listed


def content_text(content: Any, sep: str = "\n") -> str:
    """pi-ai `contentText`: a string as is, else the `text` blocks' text joined by `sep`."""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return ""
    return sep.join(
        b["text"] for b in content if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


class SystemReplay:
    """`getCurrentSystemMessage`, one system message at a time (`apply`), so a live context can
    extend it in O(new messages)."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.sections: dict[str, str] = {}
        self.tools: dict[str, Mapping[str, Any]] = {}
        self.timestamp: Any = None
        self.seen = False

    def apply(self, message: Mapping[str, Any]) -> None:
        """Fold one `system` message in (other roles are ignored)."""
        if message.get("role") != "system":
            return
        self.seen = True
        if self.timestamp is None:
            self.timestamp = message.get("timestamp")
        text = content_text(message.get("content"))
        if text:
            self.content.append(text)
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            for name, value in sections.items():
                if value is None:
                    self.sections.pop(name, None)
                elif isinstance(value, str):
                    self.sections[name] = value
        for tool in listed(message.get("toolsRemoved")):
            if isinstance(tool, Mapping):
                self.tools.pop(str(tool.get("name")), None)
        for tool in listed(message.get("toolsAdded")):
            if isinstance(tool, Mapping):
                self.tools[str(tool.get("name"))] = tool

    @property
    def prompt(self) -> str:
        """pi-ai `getSystemMessageText` of the replayed message: content, then each section."""
        return "\n\n".join(p for p in ("\n\n".join(self.content), *self.sections.values()) if p)

    def message(self) -> dict[str, Any] | None:
        """The replayed system message (Pi's shape), None when no system message had a timestamp
        and no tool is active."""
        if self.timestamp is None and not self.tools:
            return None
        result: dict[str, Any] = {"role": "system", "content": "\n\n".join(self.content)}
        if self.sections:
            result["sections"] = dict(self.sections)
        if self.tools:
            result["toolsAdded"] = list(self.tools.values())
        result["timestamp"] = self.timestamp if self.timestamp is not None else 0
        return result


def current_system_message(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """pi-ai `getCurrentSystemMessage`: every `system` message of `messages` replayed into one."""
    replay = SystemReplay()
    for message in messages:
        replay.apply(message)
    return replay.message()


def system_prompt_text(message: Mapping[str, Any] | None) -> str:
    """pi-ai `getSystemMessageText`: content, then each section, non-empty parts joined by blank lines."""
    if message is None:
        return ""
    parts = [content_text(message.get("content"))]
    parts += [v for v in (message.get("sections") or {}).values() if isinstance(v, str)]
    return "\n\n".join(p for p in parts if p)
