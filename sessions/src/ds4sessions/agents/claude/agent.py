"""The Claude Code plug-in (`ds4sessions.agents.registry` lists it): discovery, recognition, reader."""

from __future__ import annotations

import json
from pathlib import Path

from ds4sessions.agents.base import CLAUDE_CODE, Capabilities, SessionInfo
from ds4sessions.agents.claude.discovery import discover, subagent_meta
from ds4sessions.agents.claude.reader import CAPABILITIES, ClaudeReader

#: Row types only Claude Code writes (docs/claude-code-format.md §2).
CLAUDE_TYPES = {"user", "assistant", "system", "attachment", "queue-operation", "last-prompt", "mode", "summary",
                "ai-title", "file-history-snapshot", "permission-mode", "progress", "custom-title"}


def looks_like_claude(head: bytes) -> bool:
    """True when a complete line of `head` is a Claude Code row: a JSON object whose `type` is a
    Claude Code row type and that has a `sessionId`, or `uuid` + `parentUuid` keys (Pi's rows have
    `id`/`parentId`), or a `queue-operation`/`last-prompt` row."""
    for raw in head.splitlines()[:200]:
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        kind = row.get("type")
        if kind not in CLAUDE_TYPES:
            continue
        if kind in ("queue-operation", "last-prompt", "file-history-snapshot", "ai-title"):
            return True
        if "parentUuid" in row and "uuid" in row:
            return True
        if kind == "summary" and "leafUuid" in row:
            return True
    return False


class ClaudeCodeAgent:
    """Claude Code (`claude-code`): read-only; prompt-cache TTL recorded (5m/1h writes)."""

    name: str = CLAUDE_CODE
    capabilities: Capabilities = CAPABILITIES

    def discover(self) -> list[SessionInfo]:
        """Every Claude Code transcript on this machine, newest first (see `discovery`)."""
        return discover()

    def recognizes(self, head: bytes) -> bool:
        """True when `head` holds a Claude Code row (see `looks_like_claude`)."""
        return looks_like_claude(head)

    def reader(self, path: Path) -> ClaudeReader:
        """A fresh incremental reader; a subagent transcript gets its parent session id and its
        `.meta.json` (whose `toolUseId` names the parent's Agent call: sample SUB `.meta.json`)."""
        path = Path(path)
        if path.parent.name == "subagents":
            return ClaudeReader(path, parent=path.parent.parent.name, subagent=subagent_meta(path))
        return ClaudeReader(path)
