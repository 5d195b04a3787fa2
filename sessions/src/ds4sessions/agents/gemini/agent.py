"""The Gemini CLI plug-in (`ds4sessions.agents.registry` lists it): discovery, recognition, reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ds4core.models import ModelTable

from ds4sessions.agents.base import Capabilities, SessionInfo
from ds4sessions.agents.gemini import discovery
from ds4sessions.agents.gemini.reader import CAPABILITIES, MAX_LINE_BYTES, GeminiReader
from ds4sessions.agents.plugin import ConversationAgent


def looks_like_gemini(head: bytes) -> bool:
    """True when the first non-empty line of `head` is a Gemini CLI session header: a JSON object
    with string `sessionId` and `projectHash` and no `id` (chatRecordingService.ts
    `initialize`: `{sessionId, projectHash, startTime, lastUpdated, kind}`)."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    for raw in head.lstrip().split(b"\n", 1)[:1]:
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):
            return False
        return (isinstance(row, dict) and isinstance(row.get("sessionId"), str)
                and isinstance(row.get("projectHash"), str) and "id" not in row)
    return False


class GeminiCliAgent(ConversationAgent):
    """Gemini CLI (`gemini-cli`): read-only; DS4's plan as a what-if; no retrieval; its categories,
    context count and compression threshold (`ds4sessions.agents.gemini.cockpit`)."""

    name: str = discovery.GEMINI_CLI
    label: str = "Gemini CLI"
    capabilities: Capabilities = CAPABILITIES
    max_line_bytes = MAX_LINE_BYTES
    default_provider = "google"
    """The provider this agent's bare model ids belong to (for the model table's prices)."""

    def discover(self) -> list[SessionInfo]:
        """Every Gemini CLI session on this machine, newest first (see `discovery`)."""
        return discovery.discover()

    def recognizes(self, head: bytes) -> bool:
        """True when `head` starts with a Gemini CLI session header (`looks_like_gemini`)."""
        return looks_like_gemini(head)

    def reader(self, path: Path) -> GeminiReader:
        """A fresh incremental reader: the compression threshold from the `settings.json` of the
        CLI folder holding `path` (else of `$GEMINI_CLI_HOME`/`~`), the parent of a subagent file,
        the project root `projects.json` names for its `tmp/<project>/` folder."""
        path = Path(path)
        folder = discovery.dir_of(path)
        root = discovery.project_of(path, folder) if folder is not None else None
        if folder is None:
            folders = discovery.gemini_dirs()
            folder = folders[0] if folders else None
        return GeminiReader(path, compression_threshold=discovery.compression_setting(folder),
                            parent=discovery.subagent_parent(path), project_root=root)

    def is_prompt(self, message: Mapping[str, Any], meta: Any) -> bool:
        """A turn starts at a prompt the user sent (not the session context, a state snapshot, a
        function response or an injected binary)."""
        return message.get("role") == "user" and meta is not None and meta.source == "prompt"

    def price(self, model: str) -> Any:
        """This agent's own price of `model` (`agents.base.Price`), None when its table has none."""
        from ds4sessions.agents.gemini.models import gemini_price

        return gemini_price(model)

    def account(self, conv: Any, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
        """Gemini's categories, its own context count and compression threshold (`cockpit.account`)."""
        from ds4sessions.agents.gemini.cockpit import account

        return account(conv, memo, models)

    def cache_facts(self, snapshot: Any, now: float, models: ModelTable | None = None) -> Any:
        """The prompt cache priced from gemini-models.json, without a countdown (`cockpit.cache_facts`)."""
        from ds4sessions.agents.gemini.cockpit import cache_facts

        return cache_facts(snapshot, now, models)
