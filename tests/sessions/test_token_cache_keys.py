"""The planner inputs' chars-v1 cache (`derive.inputs._TokenCache`): its estimates are
`message_tokens`' own, a rebuilt summary (a new dict of the same field objects) is found by
value, and no value key is kept for the reader's own message dicts (assistant, tool results,
system: found by identity; their keys held ~180 MiB at 50,000 turns)."""

from __future__ import annotations

from pathlib import Path

from ds4core.estimate import message_tokens
from ds4sessions.derive.inputs import _STABLE_ROLES, _TokenCache, _value_key
from ds4sessions.agents.pi.live import LiveSession


def test_estimates_hits_and_kept_keys(sample01: Path) -> None:
    messages = list(LiveSession(sample01).refresh(force=True).context.messages)
    summary = {"role": "compactionSummary", "summary": "what happened so far", "tokensBefore": 1000, "timestamp": 5}
    cache = _TokenCache()
    first = cache.estimate(messages + [summary])
    assert first == [message_tokens(m) for m in messages + [summary]]
    assert cache.misses == len(messages) + 1
    rebuildable = [m for m in messages + [summary] if m.get("role") not in _STABLE_ROLES]
    assert set(cache._by_value) == {_value_key(m) for m in rebuildable}
    assert len(rebuildable) < len(messages)  # (the sample has assistant and tool-result messages)
    rebuilt = dict(summary)  # what the next context build makes: a new dict, the same field objects
    again = cache.estimate(messages + [rebuilt])
    assert again == first and cache.misses == len(messages) + 1  # all found (by identity, or by value)
