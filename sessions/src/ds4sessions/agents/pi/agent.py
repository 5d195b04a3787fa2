"""Pi as an agent plug-in (`ds4sessions.agents.base.Agent`): discovery, recognition, a reader
whose `conversation()` is the neutral `Conversation`.

- `PiAgent.discover()` wraps `ds4sessions.agents.pi.discovery.list_sessions()` (header + a few
  listed entry types, no message bodies) into `base.SessionInfo`; a session is `live` when its
  bridge heartbeat is live (Pi pid running, beat younger than `bridge.channel.STALE_SECONDS`) or
  its file was modified in the last `LIVE_SECONDS`.
- `PiAgent.recognizes(head)`: the first parsable line is `{"type":"session","id":<string>}`
  (Pi session format §1, §3: Pi ignores any other file).
- `PiConversationReader` feeds a `PiSessionReader` and builds Pi's context with
  `build_context` / `extend_context` (equal to Pi 1.6.0's `buildSessionContext`, checked against
  shared/sessions-pi/*.context.json): `Conversation.messages` are exactly those messages.

Requests (Pi session format §6, §10): every assistant `message` entry of the file is one request,
counted once, in file order, on any branch. Its usage buckets are Pi's `input`, `cacheRead`,
`cacheWrite`, `output` (already disjoint: `input` excludes cached tokens); `usage.cost.total` is
`cost_usd`. Pi does not record the prompt-cache TTL split, nor reasoning tokens, so those are 0.
A reply with `stopReason` "error" or "aborted", or without usage, is `synthetic` (Pi never
anchors the context size on it, §9).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ds4core.models import ModelTable
from ds4core.usage import usage_of

from ds4sessions.agents import base
from ds4sessions.agents.pi.context import build_context
from ds4sessions.agents.pi.conversation import (  # noqa: F401  (importable here, as before the split)
    CAPABILITIES,
    PiConversationReader,
    compactions_of,
    conversation_of,
    message_meta,
    request_of,
)
from ds4sessions.agents.pi.discovery import list_sessions, load_model_table
from ds4sessions.agents.pi.reader import BOM, _parse_json

LIVE_SECONDS = 120.0
"""A session whose file changed this recently (seconds) counts as live without a heartbeat."""

def _is_header(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


PI_ROW_TYPES = frozenset({"session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
                          "custom", "custom_message", "label", "session_info"})
"""Entry types Pi writes (Pi session format §3): a row of one of them marks a damaged Pi file."""


def looks_like_damaged_pi(head: bytes) -> bool:
    """True for a file Pi's reader should report on although it has no valid header (bad input
    B02): empty or blank (an "empty session"), a Pi entry (`type` one of `PI_ROW_TYPES`, or `id`
    + `parentId`) on one of its first 200 lines, or a first line that starts a JSON object and
    no line that parses (a torn header). NUL bytes or other garbage are no Pi file."""
    if head.startswith(BOM):
        head = head[len(BOM):]
    if not head.strip(b" \t\r\n"):
        return True
    parsed_any = False
    for raw in head.splitlines()[:200]:
        try:
            row = _parse_json(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue
        parsed_any = True
        if isinstance(row, dict):
            kind = row.get("type")
            if (isinstance(kind, str) and kind in PI_ROW_TYPES) or ("id" in row and "parentId" in row):
                return True
    return not parsed_any and head.lstrip(b" \t\r\n").startswith(b"{")


class PiAgent:
    """The Pi coding agent (`base.Agent`): exact to Pi's own context, DS4's plan exact (the
    ds4-context-engine extension runs inside Pi), steering through append-only writes."""

    name = base.PI
    label = "Pi"
    capabilities = CAPABILITIES

    def __init__(self, models: ModelTable | None = None) -> None:
        """`models` defaults to the bundled table with `<agentDir>/models.json` applied."""
        self._models = models

    @property
    def models(self) -> ModelTable:
        """The model table readers use (loaded on first use)."""
        if self._models is None:
            self._models = load_model_table()
        return self._models

    def discover(self) -> list[base.SessionInfo]:
        """Every Pi session under Pi's session roots, newest first (see module doc for `live`)."""
        from ds4sessions.bridge.channel import status  # the bridge reads Pi's agent dir too

        now = time.time()
        out = []
        for info in list_sessions():
            live = now - info.modified < LIVE_SECONDS
            if not live:
                try:
                    live = status(info.session_id, now=now).live
                except ValueError:  # an id Pi would not accept has no channel
                    live = False
            out.append(
                base.SessionInfo(
                    agent=base.PI, path=info.path, session_id=info.session_id, modified=info.modified, size=info.size,
                    project=info.cwd or None, title=info.name, live=live, model=info.model,
                )
            )
        return out

    def recognizes(self, head: bytes) -> bool:
        """True when the first parsable line of `head` is a Pi session header (a leading UTF-8
        BOM is tolerated here, so the reader can report it)."""
        if head.startswith(BOM):
            head = head[len(BOM) :]
        for raw in head.split(b"\n"):
            if not raw.strip():
                continue
            try:
                obj = _parse_json(raw.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
            return _is_header(obj)
        return False

    def newest_session(self) -> Path | None:
        """The most recently modified Pi session (by file times, header-checked), or None."""
        from ds4sessions.agents.pi.discovery import newest_session

        return newest_session()

    def claims(self, head: bytes) -> bool:
        """True for a damaged Pi file no agent recognizes (`looks_like_damaged_pi`)."""
        return looks_like_damaged_pi(head)

    def reader(self, path: Path) -> PiConversationReader:
        """A fresh incremental reader for `path`."""
        return PiConversationReader(path, self.models)

    def live(self, path: Path, models: ModelTable | None = None) -> Any:
        """Pi's own live session (`ds4sessions.agents.pi.live.LiveSession`: exact to Pi's context,
        O(new lines) per append, chars-v1 first and cl100k after)."""
        from ds4sessions.agents.pi.live import LiveSession

        return LiveSession(path, models or self.models)

    def is_prompt(self, message: Mapping[str, Any], meta: Any) -> bool:
        """A Pi turn starts at every user message."""
        return message.get("role") == "user"

    def map_json(self, path: Path, *, exact: bool = True, models: ModelTable | None = None) -> dict[str, Any]:
        """`map --json`: the one-shot reader that keeps no message content (issue 14:
        `ingest.live.open_map_snapshot`) and `ingest.snapshot_json.map_json`."""
        from ds4sessions.agents.pi.live import open_map_snapshot
        from ds4sessions.ingest.snapshot_json import map_json

        return map_json(open_map_snapshot(Path(path), models or self.models, exact=exact))

    def context_json(self, path: Path) -> dict[str, Any]:
        """`context --json`: the context Pi builds from `path`, in the shape of Pi's own
        `<name>.context.json` (checked against shared/sessions-pi), plus `header`,
        `messageCount`, `llmMessages` (`convert_to_llm`) and `diagnostics` (one line per kind)."""
        from ds4sessions.agents.pi.context import convert_to_llm
        from ds4sessions.agents.pi.reader import read_session

        session = read_session(Path(path))
        ctx = build_context(session)
        out = ctx.to_json()
        out["header"] = session.header
        out["messageCount"] = len(ctx.messages)
        out["llmMessages"] = convert_to_llm(ctx.messages)
        out["diagnostics"] = session.diagnostics.summary().splitlines() if session.diagnostics.total else []
        return out

