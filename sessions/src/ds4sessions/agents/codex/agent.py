"""The Codex plug-in (`ds4sessions.agents.base.Agent`): discovery, recognition, reader factory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from typing import Any

from ds4core.models import ModelTable

from ds4sessions.agents.base import CODEX, SessionInfo
from ds4sessions.agents.codex import discovery
from ds4sessions.agents.codex.reader import CAPABILITIES, CodexReader
from ds4sessions.agents.plugin import ConversationAgent


def looks_like_rollout(head: bytes) -> bool:
    """True when the first non-empty line of `head` is a Codex rollout row: a JSON object with
    `type` "session_meta" and a `payload` object holding a string `id` (codex-rs protocol.rs
    `RolloutLine`/`SessionMetaLine`), or a pre-2025-09 bare meta line `{id, timestamp, instructions}`."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    head = head.lstrip()
    first, newline, _ = head.partition(b"\n")
    try:
        row = json.loads(first)
    except (ValueError, RecursionError):
        # a first line longer than the head (long base instructions): judge by its opening keys
        return not newline and _META_START.match(first[:512]) is not None
    if not isinstance(row, dict):
        return False
    payload = row.get("payload")
    if row.get("type") == "session_meta" and isinstance(payload, dict) and isinstance(payload.get("id"), str):
        return True
    return "type" not in row and isinstance(row.get("id"), str) and isinstance(row.get("timestamp"), str) and "instructions" in row


WINDOW_ENV = "DS4TUI_CODEX_CONTEXT_WINDOW"
"""Environment variable: a context window (tokens) that overrides the recorded `model_context_window`."""


def window_override() -> int | None:
    """`$DS4TUI_CODEX_CONTEXT_WINDOW` as a positive int (tokens), None when unset or invalid."""
    raw = os.environ.get(WINDOW_ENV, "").replace("_", "").replace(",", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


_META_START = re.compile(rb'^\{\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*(?:"ordinal"\s*:\s*\d+\s*,\s*)?"type"\s*:\s*"session_meta"')
"""How a rollout's first line starts (`RolloutLine`: timestamp, 0.171's ordinal, then the item's type)."""


class CodexAgent(ConversationAgent):
    """OpenAI Codex CLI rollouts. Read-only (`CAPABILITIES.read_only_reason`); DS4's plan and
    retrieval as a what-if; categories and Codex's own "% left" (`ds4sessions.agents.codex.cockpit`).

    `context_window` overrides the recorded window for every reader made (tokens; default
    `$DS4TUI_CODEX_CONTEXT_WINDOW`); the configured
    window for the 95 % note comes from the `config.toml` of the Codex home holding the rollout
    (else `$CODEX_HOME`).
    """

    name = CODEX
    label = "Codex"
    capabilities = CAPABILITIES

    def __init__(self, context_window: int | None = None) -> None:
        self.context_window = context_window

    def discover(self) -> list[SessionInfo]:
        """Every rollout under `$CODEX_HOME` (sessions/ and archived_sessions/), newest first."""
        return discovery.discover()

    def recognizes(self, head: bytes) -> bool:
        """True when `head` starts like a Codex rollout (see `looks_like_rollout`)."""
        return looks_like_rollout(head)

    def reader(self, path: Path) -> CodexReader:
        """A fresh incremental reader for `path`."""
        home = discovery.home_of(path) or discovery.codex_home()
        window = self.context_window if self.context_window is not None else window_override()
        return CodexReader(path, context_window=window, configured_window=discovery.configured_window(home),
                           auto_compact_limit=discovery.configured("model_auto_compact_token_limit", home),
                           find_thread=lambda thread: discovery.find_thread(thread, home))

    def is_prompt(self, message: Any, meta: Any) -> bool:
        """A turn starts at a user message Codex recorded as the user's (`message.user`)."""
        return message.get("role") == "user" and meta is not None and meta.source == "message.user" and meta.category is None

    default_provider = "openai"
    """The provider this agent's bare model ids belong to (for the model table's prices)."""

    def price(self, model: str) -> Any:
        """This agent's own price of `model` (`agents.base.Price`), None when its table has none."""
        from ds4sessions.agents.codex.prices import openai_price

        return openai_price(model)

    def account(self, conv: Any, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
        """Codex's categories and its own context count (`cockpit.account`)."""
        from ds4sessions.agents.codex.cockpit import account

        return account(conv, memo, models)

    def cache_facts(self, snapshot: Any, now: float, models: ModelTable | None = None) -> Any:
        """The prompt cache with OpenAI's prices; a countdown only when configured (`cockpit.cache_view`)."""
        from ds4sessions.agents.codex.cockpit import cache_facts

        return cache_facts(snapshot, now, models)

    def map_json(self, path: Path, *, exact: bool = True, models: ModelTable | None = None) -> dict[str, Any]:
        """`map --json`: `view.map_json` of the rollout (streamed)."""
        from ds4sessions.agents.codex import view

        return view.map_json(self._read(path), exact=exact)

    def cache_json(self, path: Path, *, at: float | None = None, models: ModelTable | None = None) -> dict[str, Any]:
        """`cache --json`: `view.cache_json` at `at` (default: the rollout's last time)."""
        import time

        from ds4sessions.agents.codex import view

        conv = self._read(path)
        when = at if at is not None else conv.extra.get("lastTime")
        return view.cache_json(conv, time.time() if when is None else when, view.configured_retention())

    def context_json(self, path: Path) -> dict[str, Any]:
        """`context --json`: `view.context_json` of the rollout."""
        from ds4sessions.agents.codex import view

        return view.context_json(self._read(path))

    def _read(self, path: Path) -> Any:
        from ds4sessions.agents.codex.reader import feed_rollout

        reader = self.reader(path)
        feed_rollout(reader, Path(path))
        return reader.conversation()
