"""Small helpers every agent reader shares (times, first prompts)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any


def iso_seconds(value: Any) -> float | None:
    """Unix seconds of an ISO-8601 timestamp string (`...Z` accepted), None when unparsable or
    out of range."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError, RecursionError):
        return None


def first_prompt(messages: Iterable[Mapping[str, Any]], limit: int = 80) -> str | None:
    """The first line of the first user message's text in `messages` (Pi-shaped agent messages),
    at most `limit` characters; None when there is none. What Pi's own session list shows for a
    session without a name, and what ds4tui shows everywhere for it (header, home, `sessions`)."""
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, (list, tuple)):
            text = " ".join(
                b["text"] for b in content if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
            )
        else:
            continue
        line = text.strip().splitlines()[0].strip() if text.strip() else ""
        if line:
            return line[:limit]
    return None
