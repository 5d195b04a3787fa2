"""The bridge's request metadata (`requests.jsonl`: one line per provider request, with per-message
chars-v1 tokens and DS4 fingerprints) and the prefix comparison of two requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any



from ds4sessions.bridge.status import channel_dir




@dataclass(frozen=True)
class RequestMessage:
    """One message of a provider request: `role`, chars-v1 `tokens`, DS4 fingerprint `fp`."""

    role: str | None
    tokens: int
    fp: str


@dataclass(frozen=True)
class RequestMeta:
    """One provider request as the bridge saw it (no content).

    `seq` (1-based per Pi process), `time` (ISO), `leaf_id` (Pi's leaf when sent), `provider`,
    `model`, `api`, `cache_retention` (`short`/`long`), `system_tokens` and `tool_tokens`
    (chars-v1: DS4's `fixedTokens` = their sum), `system_hash`/`tools_hash` (SHA-256),
    `tool_names`, `messages` (the transcript sent, system messages included), `payload_bytes`.
    """

    seq: int
    time: str
    leaf_id: str | None
    provider: str | None
    model: str | None
    api: str | None
    cache_retention: str | None
    system_tokens: int
    system_hash: str
    tool_tokens: int
    tools_hash: str
    tool_names: tuple[str, ...]
    messages: tuple[RequestMessage, ...]
    payload_bytes: int

    @property
    def fixed_tokens(self) -> int:
        """System prompt + tool schema tokens (DS4 `fixedTokens`, chars-v1)."""
        return self.system_tokens + self.tool_tokens

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestMeta:
        """From a `requests.jsonl` line. Raises KeyError/TypeError/ValueError when malformed."""
        system, tools = data.get("system") or {}, data.get("tools") or {}
        return cls(
            seq=int(data["seq"]), time=str(data.get("time", "")), leaf_id=data.get("leafId"),
            provider=data.get("provider"), model=data.get("model"), api=data.get("api"),
            cache_retention=data.get("cacheRetention"), system_tokens=int(system.get("tokens", 0)),
            system_hash=str(system.get("hash", "")), tool_tokens=int(tools.get("tokens", 0)),
            tools_hash=str(tools.get("hash", "")), tool_names=tuple(tools.get("names") or ()),
            messages=tuple(RequestMessage(m.get("role"), int(m.get("tokens", 0)), str(m["fp"])) for m in data.get("messages") or ()),
            payload_bytes=int((data.get("payload") or {}).get("bytes", 0)),
        )


def read_requests(session_id: str, agent: Path | None = None) -> list[RequestMeta]:
    """Every request line of the session, oldest first (malformed or torn lines skipped)."""
    path = channel_dir(session_id, agent) / "requests.jsonl"
    try:
        data = path.read_bytes()
    except OSError:  # absent, a directory, unreadable: no metadata
        return []
    out = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            obj = json.loads(line)
            if isinstance(obj, dict):
                out.append(RequestMeta.from_json(obj))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
            continue  # a malformed line is skipped, never fatal
    return out


def prefix_change(previous: RequestMeta, current: RequestMeta) -> int | None:
    """Index of the first message of `current` whose fingerprint differs from `previous` at the
    same position ("prefix changed at message N"); None when `current` extends `previous`
    unchanged. A changed system prompt or tool schema counts as a change at message 0."""
    if previous.system_hash != current.system_hash or previous.tools_hash != current.tools_hash:
        return 0
    for index, (old, new) in enumerate(zip(previous.messages, current.messages)):
        if old.fp != new.fp:
            return index
    if len(current.messages) < len(previous.messages):
        return len(current.messages)
    return None
