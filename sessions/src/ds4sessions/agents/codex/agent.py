"""The Codex plug-in (`ds4sessions.agents.base.Agent`): discovery, recognition, reader factory."""

from __future__ import annotations

import json
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
    first = head.lstrip().split(b"\n", 1)[0]
    try:
        row = json.loads(first)
    except ValueError:
        return False
    if not isinstance(row, dict):
        return False
    payload = row.get("payload")
    if row.get("type") == "session_meta" and isinstance(payload, dict) and isinstance(payload.get("id"), str):
        return True
    return "type" not in row and isinstance(row.get("id"), str) and isinstance(row.get("timestamp"), str) and "instructions" in row


class CodexAgent:
    """OpenAI Codex CLI rollouts. Read-only (`CAPABILITIES.read_only_reason`).

    `context_window` overrides the recorded window for every reader made (tokens); the configured
    window for the 95 % note comes from `$CODEX_HOME/config.toml`.
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
        return CodexReader(path, context_window=self.context_window, configured_window=discovery.configured_window())
