"""The Claude Code plug-in (`ds4sessions.agents.registry` lists it): discovery, recognition, reader."""

from __future__ import annotations

import json
from pathlib import Path

from typing import Any, Mapping

from ds4core.models import ModelTable

from ds4sessions.agents.base import CLAUDE_CODE, Capabilities, SessionInfo
from ds4sessions.agents.claude.discovery import discover, subagent_meta
from ds4sessions.agents.claude.reader import CAPABILITIES, MAX_LINE_BYTES, ClaudeReader
from ds4sessions.agents.plugin import ConversationAgent

#: Row types only Claude Code writes (docs/claude-code-format.md §2).
CLAUDE_TYPES = {"user", "assistant", "system", "attachment", "queue-operation", "last-prompt", "mode", "summary",
                "ai-title", "file-history-snapshot", "permission-mode", "progress", "custom-title"}


LOCAL_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>")
"""How Claude Code's user rows that carry a local command's output or caveat start."""


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or () if isinstance(b, Mapping) and b.get("type") == "text")


def _tag(text: str, name: str) -> str | None:
    """The text inside `<name>…</name>` in `text`, stripped; None without the tag."""
    start = text.find(f"<{name}>")
    end = text.find(f"</{name}>")
    if start < 0 or end < start:
        return None
    return text[start + len(name) + 2:end].strip()


def looks_like_claude(head: bytes) -> bool:
    """True when a complete line of `head` is a Claude Code row: a JSON object whose `type` is a
    Claude Code row type and that has a `sessionId`, or `uuid` + `parentUuid` keys (Pi's rows have
    `id`/`parentId`), or a `queue-operation`/`last-prompt` row."""
    for raw in head.splitlines()[:200]:
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(row, dict):
            continue
        kind = row.get("type")
        if not isinstance(kind, str) or kind not in CLAUDE_TYPES:
            continue
        if kind in ("queue-operation", "last-prompt", "file-history-snapshot", "ai-title"):
            return True
        if "parentUuid" in row and "uuid" in row:
            return True
        if kind == "summary" and "leafUuid" in row:
            return True
    return False


class ClaudeCodeAgent(ConversationAgent):
    """Claude Code (`claude-code`): read-only; prompt-cache TTL recorded (5m/1h writes); DS4's
    plan and retrieval as a what-if. Its categories are Claude Code's `/context` rows
    (`ds4sessions.agents.claude.cockpit`)."""

    name: str = CLAUDE_CODE
    label: str = "Claude Code"
    capabilities: Capabilities = CAPABILITIES
    max_line_bytes = MAX_LINE_BYTES

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

    default_provider = "anthropic"
    """The provider this agent's bare model ids belong to (for the model table's prices)."""

    def price(self, model: str) -> Any:
        """This agent's own price of `model` (`agents.base.Price`), None when its table has none."""
        from ds4sessions.agents.claude.prices import claude_code_price

        return claude_code_price(model)

    def is_prompt(self, message: Mapping[str, Any], meta: Any) -> bool:
        """A turn starts at a prompt the user typed or a slash command, not at a local command's
        output or its caveat (Claude Code writes them as user rows: `<local-command-stdout>`,
        `<local-command-caveat>`)."""
        from ds4sessions.ingest.conversation import is_prompt

        return is_prompt(message, meta) and not _text_of(message).lstrip().startswith(LOCAL_OUTPUT)

    def prompt_preview(self, message: Mapping[str, Any]) -> str:
        """A slash command as the user typed it (`/compact keep the tests`, from Claude Code's
        `<command-name>` and `<command-args>` tags), else the prompt's text, one line."""
        text = _text_of(message)
        name = _tag(text, "command-name")
        if name is not None:
            text = f"{name} {_tag(text, 'command-args') or ''}"
        return " ".join(text.split())[:80]

    def account(self, conv: Any, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
        """Claude Code's `/context` rows as the dashboard's categories (`cockpit.account`)."""
        from ds4sessions.agents.claude.cockpit import account

        return account(conv, memo, models)

    def cache_facts(self, snapshot: Any, now: float, models: ModelTable | None = None, *,
                    memo: dict[str, Any] | None = None) -> Any:
        """The prompt cache as `ds4tui cache` reports it (`cockpit.cache_view`)."""
        from ds4sessions.agents.claude.cockpit import cache_facts

        return cache_facts(snapshot, now, memo=memo)

    def map_json(self, path: Path, *, exact: bool = True, models: ModelTable | None = None) -> dict[str, Any]:
        """`map --json`: Claude Code's `/context` map (`views.context_map`)."""
        import os

        from ds4sessions.agents.claude.views import context_map

        return context_map(self._read(path), os.environ)

    def cache_json(self, path: Path, *, at: float | None = None, models: ModelTable | None = None) -> dict[str, Any]:
        """`cache --json`: `views.cache_report` at `at` (default: the last request's time)."""
        from ds4sessions.agents.claude.views import cache_report

        return cache_report(self._read(path), at)

    def context_json(self, path: Path) -> dict[str, Any]:
        """`context --json`: the messages the model saw (`views.context_messages`)."""
        from ds4sessions.agents.claude.views import context_messages

        return context_messages(self._read(path))

    def _read(self, path: Path) -> Any:
        from ds4sessions.agents.claude.reader import read_lines

        reader = self.reader(path)
        reader.feed(read_lines(Path(path)))
        return reader.conversation()
