"""The Codex plug-in (`ds4sessions.agents.base.Agent`): discovery, recognition, reader factory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ds4sessions.agents.base import CODEX, SessionInfo
from ds4sessions.agents.codex import discovery
from ds4sessions.agents.codex.reader import CAPABILITIES, CodexReader


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


class CodexAgent:
    """OpenAI Codex CLI rollouts. Read-only (`CAPABILITIES.read_only_reason`).

    `context_window` overrides the recorded window for every reader made (tokens; default
    `$DS4TUI_CODEX_CONTEXT_WINDOW`); the configured
    window for the 95 % note comes from the `config.toml` of the Codex home holding the rollout
    (else `$CODEX_HOME`).
    """

    name = CODEX
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
